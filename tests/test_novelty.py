"""Prediction reports what the model never saw: the share of a table's ASVs and reads that were
in none of the training samples (aam/data/novelty.py), in the log and metrics.json, with a
warning above the threshold and when no ASV is shared at all."""

from __future__ import annotations

import json
import logging

import biom
import numpy as np
import pandas as pd
import pytest
import torch
from test_cli_training import aam, micro_metadata, micro_table, write_metadata, write_table
from test_non_finite import trained_micro  # noqa: F401  (module fixture)

from aam.data.novelty import NOVELTY_WARNING, fingerprints, novelty, sample_asvs
from aam.data.samples import SampleSet

SEQUENCES = ["ACGTACGTAC", "CCCCGGGGAA", "TTTTAAAACC", "GAGAGAGATT"]


def samples() -> SampleSet:
    """3 samples over 4 ASVs: reads (rows ASVs, columns samples)."""
    counts = np.array([[5, 0, 1], [5, 2, 0], [0, 8, 0], [0, 0, 9]], dtype=float)
    return SampleSet.from_table(biom.Table(counts, SEQUENCES, ["a", "b", "c"]), max_bp=10)


def test_fingerprints_are_sorted_unique_and_tell_sequences_apart():
    prints = fingerprints([*SEQUENCES, SEQUENCES[0]])
    assert prints.dtype == np.int64 and len(prints) == 4
    assert np.array_equal(prints, np.sort(prints))
    assert np.array_equal(fingerprints(SEQUENCES[::-1]), prints)


def test_the_asvs_a_sample_set_saw_are_those_with_reads():
    assert np.array_equal(sample_asvs(samples(), np.array([0])), fingerprints(SEQUENCES[:2]))
    assert np.array_equal(sample_asvs(samples(), np.array([1, 0])), fingerprints(SEQUENCES[:3]))


def test_novelty_counts_the_unseen_asvs_and_their_share_of_the_reads():
    training = fingerprints(SEQUENCES[:2])  # ASVs 0 and 1 seen
    found = novelty(samples(), np.array([1, 2]), training)
    # samples b (2 seen + 8 unseen reads) and c (1 seen + 9 unseen): ASVs 0, 1, 2, 3 present
    assert found["asvs"] == 4 and found["unseen_asvs"] == 2
    assert found["unseen_asv_fraction"] == 0.5
    assert found["unseen_read_fraction"] == pytest.approx(17 / 20)
    assert found["samples_mostly_unseen"] == 2
    assert found["warning"] and not found["none_shared"]
    assert found["warning_above"] == NOVELTY_WARNING
    seen = novelty(samples(), np.array([0]), training)
    assert seen["unseen_asvs"] == 0 and seen["unseen_read_fraction"] == 0 and not seen["warning"]
    nothing = novelty(samples(), np.array([0, 1, 2]), fingerprints(["AAAAAAAAAA"]))
    assert nothing["none_shared"] and nothing["warning"] and nothing["unseen_read_fraction"] == 1


@pytest.mark.slow
def test_predict_reports_novelty_and_warns_when_no_asv_is_shared(
    trained_micro,  # noqa: F811
    tmp_path,
    caplog,
):
    caplog.set_level(logging.INFO)
    model = trained_micro.out / "model.pt"
    state = torch.load(model, weights_only=True)
    split = pd.read_csv(trained_micro.out / "split.tsv", sep="\t", index_col=0).iloc[:, 0]
    table = micro_table()
    train = [k for k, sid in enumerate(table.ids()) if split.get(sid) == "train"]
    seen = SampleSet.from_table(table, max_bp=24)
    assert np.array_equal(state["training_asvs"].numpy(), sample_asvs(seen, np.array(train)))

    out = tmp_path / "same"
    args = ("--model", model, "--metadata", trained_micro.metadata, "--threads", "2")
    assert aam("predict", "--table", trained_micro.table, "--output-dir", out, *args) == 0
    err = caplog.text
    expected = novelty(seen, np.arange(12), state["training_asvs"].numpy())
    reported = json.loads((out / "metrics.json").read_text())["novelty"]
    assert reported == expected
    assert f"novelty: {expected['unseen_asvs']} of 8 ASVs" in err
    # no warning of novelty; the tiny model's near-constant predictions (metrics.json spread)
    # get their own line, and only where spread marks them
    spread = json.loads((out / "metrics.json").read_text())["spread"]["models"]["model"]
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    flat = "AAM is near-constant"
    assert [line[: len(flat)] for line in warned] == [flat] * bool(spread["near_constant"]), warned
    caplog.clear()

    rng = np.random.default_rng(99)  # the same samples on 8 other sequences
    other = ["".join(rng.choice(list("ACGT"), 24)) for _ in range(8)]
    foreign = biom.Table(table.matrix_data.toarray(), other, list(table.ids()))
    path = write_table(tmp_path / "foreign.biom", foreign)
    metadata = write_metadata(tmp_path / "metadata.tsv", micro_metadata())
    out = tmp_path / "foreign"
    rc = aam("predict", "--table", path, "--output-dir", out, *args[:2], "--metadata", metadata)
    assert rc == 0
    err = caplog.text
    assert "novelty: 8 of 8 ASVs (100.0% of the reads)" in err
    assert f"{path} shares no ASV with the model's training samples" in err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["novelty"]["none_shared"] and metrics["novelty"]["warning"]
    assert metrics["n"] == 12  # still scored, and marked
