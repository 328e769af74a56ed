"""Metadata that describes more samples than the table holds (issue 73, item 1): QIIME 2 and
Qiita metadata usually do (a Qiita study: 646 metadata rows, 470 samples in its table). The
table lists the samples; the metadata's other rows are ignored by every command, with no hand
filtering."""

from __future__ import annotations

from pathlib import Path

import biom
import numpy as np
import pytest
from biom.util import biom_open

from aam.cli import main
from aam.data.split import read_split
from aam.training.data.study import load_study

IDS = [f"s{k:02d}" for k in range(12)]
EXTRA = [f"x{k:02d}" for k in range(5)]  # metadata rows of samples the table lacks


def aam(*args: str | Path) -> int:
    """Exit status of `aam ARGS` run in-process (argparse errors raise SystemExit)."""
    try:
        return main([str(a) for a in args])
    except SystemExit as stop:
        return int(stop.code or 0)


def write_table(path: Path, ids: list[str] = IDS) -> Path:
    rng = np.random.default_rng(7)
    asvs = ["".join(rng.choice(list("ACGT"), 24)) for _ in range(8)]
    counts = rng.integers(0, 20, size=(8, len(ids))).astype(float)
    counts[0] += 1  # every sample has reads
    with biom_open(str(path), "w") as handle:
        biom.Table(counts, asvs, ids).to_hdf5(handle, "aam tests")
    return path


def write_metadata(path: Path, ids: list[str], ages: dict[str, str] | None = None) -> Path:
    """``ids``' rows (age, site, subject); ``ages`` overrides some ages (``""``: none)."""
    ages = ages or {}
    rows = [
        f"{sid}\t{ages.get(sid, 20 + k)}\t{'gut' if k % 2 else 'oral'}\tp{k // 2}"
        for k, sid in enumerate(ids)
    ]
    path.write_text("\n".join(["sample_id\tage\tsite\tsubject", *rows]) + "\n")
    return path


@pytest.fixture
def superset(tmp_path) -> tuple[Path, Path]:
    """A 12-sample table and metadata with 5 more rows, of samples it lacks, listed first."""
    return (
        write_table(tmp_path / "table.biom"),
        write_metadata(tmp_path / "metadata.tsv", [*EXTRA, *IDS]),
    )


@pytest.mark.parametrize("grouped", [False, True])
def test_split_assigns_the_tables_samples(superset, tmp_path, grouped):
    table, metadata = superset
    out = tmp_path / "split.tsv"
    groups = ["--group-column", "subject"] if grouped else []
    args = ["--table", table, "--metadata", metadata, "--target-column", "age", *groups]
    assert aam("split", *args, "--output", out) == 0
    assert sorted(read_split(out).index) == IDS


def test_fold_split_assigns_the_tables_samples(superset, tmp_path):
    table, metadata = superset
    out = tmp_path / "fold1.split.tsv"
    args = ["--table", table, "--metadata", metadata, "--target-column", "site", "--classifier"]
    assert aam("split", *args, "--folds", "3", "--fold", "1", "--output", out) == 0
    assert sorted(read_split(out).index) == IDS


def test_samples_without_a_target_are_listed_unused(tmp_path):
    """A table sample without a target value (s03) or, with --allow-missing-samples, without a
    metadata row (s11) is in the split, unused: pretraining and prediction, which read the
    table and the split, find every sample of the table there."""
    table = write_table(tmp_path / "table.biom")
    metadata = write_metadata(tmp_path / "m.tsv", [*EXTRA, *IDS[:-1]], ages={"s03": ""})
    out = tmp_path / "split.tsv"
    args = ["--table", table, "--metadata", metadata, "--target-column", "age"]
    args += ["--allow-missing-samples"]
    assert aam("split", *args, "--output", out) == 0
    split = read_split(out)
    assert list(split.index) == IDS
    assert split[["s03", "s11"]].tolist() == ["unused", "unused"]
    assert (split.drop(["s03", "s11"]) != "unused").all()

    study = load_study(table, max_bp=24, split_path=out)  # as pretraining reads them
    assert study.samples.sample_ids == IDS
    assert not {"s03", "s11"} & {IDS[k] for k in study.subset("train")}

    point = tmp_path / "lc.split.tsv"  # a learning-curve point drawn from that split
    assert (
        aam("split", *args, "--from-file", out, "--train-fraction", "0.5", "--output", point) == 0
    )
    assert read_split(point)[["s03", "s11"]].tolist() == ["unused", "unused"]
