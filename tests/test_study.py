"""`load_study`: samples without a target and the split file written by `aam split`."""

from __future__ import annotations

from pathlib import Path

import biom
import numpy as np
import pandas as pd
import pytest
from biom.util import biom_open

from aam.data.split import write_split
from aam.errors import InputError
from aam.training.study import load_study

ASVS = ["ACGTACGTAC", "CCGGTTAAGG", "TTTTAAAACC", "GAGAGACTCT"]


def _inputs(tmp_path: Path, ages: list[float], sites: list[str | None]) -> tuple[Path, Path]:
    ids = [f"s{k}" for k in range(len(ages))]
    counts = np.random.default_rng(0).integers(1, 9, size=(len(ASVS), len(ids))).astype(float)
    table = tmp_path / "table.biom"
    with biom_open(str(table), "w") as handle:
        biom.Table(counts, ASVS, ids).to_hdf5(handle, "test")
    metadata = tmp_path / "metadata.tsv"
    frame = pd.DataFrame({"sample_id": ids, "age": ages, "site": sites})
    frame.to_csv(metadata, sep="\t", index=False)
    return table, metadata


def _split(tmp_path: Path, ids: list[str]) -> Path:
    labels = ["train"] * (len(ids) - 1) + ["val"]
    path = tmp_path / "split.tsv"
    write_split(path, pd.Series(labels, index=pd.Index(ids, name="sample_id"), name="split"))
    return path


AGES = [20.0, float("nan"), 40.0, 50.0, float("nan"), 70.0]
SITES = ["gut", "oral", None, "gut", "oral", "gut"]


def test_split_without_the_samples_lacking_a_target(tmp_path):
    table, metadata = _inputs(tmp_path, AGES, SITES)
    # What `aam split --target-column age` writes: s1 and s4 have no age and are left out.
    split = _split(tmp_path, ["s0", "s2", "s3", "s5"])
    study = load_study(table, max_bp=10, metadata_path=metadata, target="age", split_path=split)
    assert study.samples.sample_ids == ["s0", "s2", "s3", "s5"]
    np.testing.assert_array_equal(study.targets, [20.0, 40.0, 50.0, 70.0])
    assert list(study.split) == ["train", "train", "train", "val"]


def test_split_without_a_sample_lacking_a_class(tmp_path):
    table, metadata = _inputs(tmp_path, AGES, SITES)
    split = _split(tmp_path, ["s0", "s1", "s3", "s4", "s5"])  # s2 has no site
    study = load_study(
        table, max_bp=10, metadata_path=metadata, target="site", classifier=True,
        split_path=split,
    )  # fmt: skip
    assert study.classes == ["gut", "oral"]
    assert study.samples.sample_ids == ["s0", "s1", "s3", "s4", "s5"]


def test_split_missing_a_sample_that_has_a_target_is_still_an_error(tmp_path):
    table, metadata = _inputs(tmp_path, AGES, SITES)
    split = _split(tmp_path, ["s0", "s2", "s3"])  # s5 has an age but no split
    with pytest.raises(InputError, match=r"split.tsv lacks 1 ID\(s\) .*\(s5\)"):
        load_study(table, max_bp=10, metadata_path=metadata, target="age", split_path=split)
    study = load_study(
        table, max_bp=10, metadata_path=metadata, target="age", split_path=split,
        allow_missing=True,
    )  # fmt: skip
    assert study.samples.sample_ids == ["s0", "s2", "s3"]


def test_split_without_target_keeps_the_strict_check(tmp_path):
    table, metadata = _inputs(tmp_path, AGES, SITES)
    split = _split(tmp_path, ["s0", "s2", "s3", "s5"])
    with pytest.raises(InputError, match="lacks 2 ID"):
        load_study(table, max_bp=10, metadata_path=metadata, split_path=split)
