"""ASV names: short md5 IDs, QIIME 2 taxonomy TSVs, the deepest confident rank, and the
importance table and figure labels built from them."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from aam.analysis.importance_plot import row_labels
from aam.analysis.taxonomy import (
    asv_labels,
    deepest_rank,
    read_taxonomy,
    short_ids,
    taxa_of,
)
from aam.errors import InputError

A, B, C = "TACGTAGGTGGCAAGCGTTG", "TACGTAGGTGGCAAGCGTTA", "TACGGAGGGTGCAAGCGTTA"


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def test_short_ids_are_md5_prefixes_that_never_repeat():
    ids = short_ids([A, B, C])
    assert ids == [md5(A)[:8], md5(B)[:8], md5(C)[:8]]
    # sequences sharing their first 12 bases still get different IDs (the old labels did not)
    assert len(set(ids)) == 3 and A[:12] == B[:12]
    # where two md5s share the first 8 hex digits, every ID grows until all differ
    sequences = [f"ACGT{i}" for i in range(200_000)]
    by_prefix: dict[str, str] = {}
    pair = None
    for s in sequences:
        prefix = md5(s)[:5]
        if prefix in by_prefix:
            pair = [by_prefix[prefix], s]
            break
        by_prefix[prefix] = s
    assert pair is not None
    longer = short_ids(pair, length=5)
    assert len(longer[0]) == len(longer[1]) > 5 and longer[0] != longer[1]
    assert all(md5(s).startswith(i) for s, i in zip(pair, longer, strict=True))


@pytest.mark.parametrize(
    ("taxon", "rank"),
    [
        ("d__Bacteria; p__Firmicutes; c__Bacilli; g__Streptococcus; s__", "g__Streptococcus"),
        ("k__Bacteria; p__Proteobacteria; c__; o__; f__; g__; s__", "p__Proteobacteria"),
        ("Bacteria;Firmicutes;Bacilli", "Bacilli"),
        ("Unassigned", "Unassigned"),
        ("", "Unassigned"),
    ],
)
def test_deepest_rank_is_the_deepest_named_one(taxon, rank):
    assert deepest_rank(taxon) == rank


def test_read_taxonomy_matches_by_sequence_or_md5(tmp_path):
    path = tmp_path / "taxonomy.tsv"
    path.write_text(
        "Feature ID\tTaxon\tConfidence\n"
        "#q2:types\tcategorical\tnumeric\n"
        f"{A}\td__Bacteria; g__Prevotella\t0.91\n"
        f"{md5(B)}\td__Bacteria; p__Firmicutes; g__\t0.85\n"
    )
    taxa = taxa_of([A, B, C], read_taxonomy(path))
    assert taxa["taxon"].iloc[:2].tolist() == [
        "d__Bacteria; g__Prevotella",
        "d__Bacteria; p__Firmicutes; g__",
    ]
    assert taxa["confidence"].iloc[:2].tolist() == [0.91, 0.85] and taxa.iloc[2].isna().all()
    labels = asv_labels(short_ids([A, B, C]), taxa["taxon"].tolist())
    assert labels == [f"g__Prevotella {md5(A)[:8]}", f"p__Firmicutes {md5(B)[:8]}", md5(C)[:8]]
    assert asv_labels(["abc", "def"]) == ["abc", "def"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sample\tTaxon\nx\ty\n", "is not a QIIME 2 taxonomy's"),
        ("Feature ID\tConfidence\nx\t1\n", "is not a QIIME 2 taxonomy's"),
        ("Feature ID\tTaxon\nx\ta\nx\tb\n", "Feature ID 'x' appears twice"),
    ],
)
def test_read_taxonomy_rejects_other_files_in_one_line(tmp_path, text, message):
    path = tmp_path / "bad.tsv"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as err:
        read_taxonomy(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(InputError, match="no such taxonomy file"):
        read_taxonomy(tmp_path / "missing.tsv")


def test_importance_table_ranks_the_forest_among_what_it_measured(monkeypatch, tmp_path):
    import scipy.sparse as sp

    from aam.analysis import importance

    asvs = [A, B, C, "TTTT"]
    abundance = np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    monkeypatch.setattr(
        importance, "relative_abundances", lambda _, rows: sp.csr_matrix(abundance[rows])
    )
    study = SimpleNamespace(samples=SimpleNamespace(asv_ids=asvs))
    aam = np.array([0.3, 0.2, 0.1, 0.0])
    forest = np.array([0.0, -0.004, 0.02, 0.0])  # B scored below zero, A and D not measured
    path = tmp_path / "taxonomy.tsv"
    path.write_text(f"Feature ID\tTaxon\tConfidence\n{A}\td__Bacteria; g__Rothia\t0.9\n")
    table = importance.importance_table(
        study, np.arange(2), aam, forest, np.array([1, 2]), read_taxonomy(path)
    )
    assert table["asv"].tolist() == asvs  # AAM's order
    # the negative score ranks last of the measured ones, not below the unmeasured zeros
    assert table["forest_rank"].isna().tolist() == [True, False, False, True]
    assert table["forest_rank"].dropna().tolist() == [2, 1]
    labels = row_labels(table, scored=2)
    assert labels[0] == f"g__Rothia {md5(A)[:8]}  AAM #1, forest: not measured"
    assert labels[1] == f"{md5(B)[:8]}  AAM #2, forest #2 of 2 (R² drop -0.004)"
    assert labels[2] == f"{md5(C)[:8]}  AAM #3, forest #1 of 2 (R² drop +0.02)"
    assert row_labels(table, 2, classifier=True)[2].endswith("(accuracy drop +0.02)")
    written = tmp_path / "importance.tsv"
    table.to_csv(written, sep="\t", index=False)
    again = pd.read_csv(written, sep="\t")
    assert again.columns[:3].tolist() == ["asv_id", "taxon", "confidence"]
    assert again["asv_id"].is_unique and again["confidence"].iloc[0] == 0.9
    # without a taxonomy: short IDs, never sequence prefixes
    bare = importance.importance_table(study, np.arange(2), aam, forest, np.array([1, 2]))
    assert bare["taxon"].isna().all()
    assert row_labels(bare, 2)[3] == f"{md5('TTTT')[:8]}  AAM #4, forest: not measured"
