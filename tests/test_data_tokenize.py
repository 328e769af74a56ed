"""aam.data.tokenize: nucleotide tokens."""

from pathlib import Path

import numpy as np
import pytest

from aam.data.table import load_table
from aam.data.tokenize import (
    MASK,
    OTHER,
    PAD,
    START,
    VOCAB_SIZE,
    A,
    C,
    G,
    T,
    tokenize,
    unique_tokens,
)

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"


def test_vocabulary():
    tokens = [PAD, A, C, G, T, OTHER, START, MASK]
    assert tokens == list(range(VOCAB_SIZE))


def test_acgtn():
    tokens = tokenize(["ACGTN"], max_bp=5)
    assert tokens.dtype == np.uint8 and tokens.shape == (1, 6)
    assert tokens.tolist() == [[START, A, C, G, T, OTHER]]


def test_lower_case_and_other_characters():
    tokens = tokenize(["acgt", "RYn-", "A.é?"], max_bp=4)
    assert tokens[0].tolist() == [START, A, C, G, T]
    assert tokens[1].tolist() == [START] + [OTHER] * 4
    assert tokens[2].tolist() == [START, A, OTHER, OTHER, OTHER]


def test_truncation_and_padding():
    tokens = tokenize(["ACGTACGT", "GG", ""], max_bp=4)
    assert tokens.tolist() == [
        [START, A, C, G, T],
        [START, G, G, PAD, PAD],
        [START, PAD, PAD, PAD, PAD],
    ]


def test_empty_input_and_bad_max_bp():
    assert tokenize([], max_bp=3).shape == (0, 4)
    with pytest.raises(ValueError):
        tokenize(["A"], max_bp=0)


def test_unique_tokens():
    sequences = ["GGA", "acg", "GGA", "ACG"]
    tokens, inverse = unique_tokens(sequences, max_bp=3)
    assert tokens.shape == (3, 4)
    np.testing.assert_array_equal(tokens[inverse], tokenize(sequences, max_bp=3))


def test_demo_sequences():
    sequences = load_table(DEMO / "table.biom").ids(axis="observation")
    tokens = tokenize(sequences, max_bp=150)
    assert tokens.shape == (1594, 151)
    assert (tokens[:, 0] == START).all()
    assert (tokens[:, 101:] == PAD).all()  # 100-nt ASVs
    assert np.isin(tokens[:, 1:101], [A, C, G, T, OTHER]).all()
    unique, inverse = unique_tokens(sequences, max_bp=150)
    np.testing.assert_array_equal(unique[inverse], tokens)
