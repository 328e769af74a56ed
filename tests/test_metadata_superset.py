"""Metadata that describes more samples than the table holds (issue 73, item 1): QIIME 2 and
Qiita metadata usually do (a Qiita study: 646 metadata rows, 470 samples in its table). The
table lists the samples; the metadata's other rows are ignored by every command, with no hand
filtering."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import biom
import numpy as np
import pandas as pd
import pytest
import yaml
from biom.util import biom_open
from checkout import REPO, copy_checkout
from errors import one_line_error
from planning import planned

from aam.cli import main
from aam.data.split import read_split
from aam.training.inputs.study import load_study
from aam.workflow.dataset_checks import check_dataset

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


# --- the workflow: check_data counts and refuses, match_samples drops ---------------------


def test_check_data_counts_a_superset_once(superset, tmp_path, caplog):
    table, metadata = superset
    out = tmp_path / "checked.sha256"
    samples = tmp_path / "samples.json"
    args = ["--dataset", "d", "--table", table, "--metadata", metadata, "--target-column", "age"]
    caplog.set_level(logging.INFO, logger="aam.commands.check_data")
    assert aam("check-data", *args, "--output", out, "--samples", samples) == 0
    counts = {"table_samples": 12, "metadata_rows": 17, "matched": 12, "table_only": 0}
    (line,) = [r.getMessage() for r in caplog.records if r.name == "aam.commands.check_data"]
    (shallow,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    written = {**counts, "metadata_only": 5, "with_target": 12, "low_depth": 12, "line": line}
    assert json.loads(samples.read_text()) == written  # the line for the landing page
    assert "12 samples in the table (12) and the metadata (17 rows)" in line
    assert "5 metadata rows of samples the table lacks ignored" in line
    assert line.endswith("; 12 with fewer than 1,000 reads")
    assert f"datasets.d: 12 of the 12 samples of {table} hold fewer than 1,000 reads" in shallow
    assert "set datasets.d.rarefy: {depth: ..., seed: 42}" in shallow


def test_a_table_sample_without_a_metadata_row_stops_the_check_naming_the_key(tmp_path):
    table = write_table(tmp_path / "table.biom")
    metadata = write_metadata(tmp_path / "m.tsv", [*EXTRA, *IDS[2:]], ages={"s05": ""})
    message = one_line_error(check_dataset, "d", table, metadata, "age")
    assert message == (
        f"datasets.d: 2 of the 12 samples of {table} have no row in {metadata} (s00, s01); add "
        "their rows (an empty target cell marks a sample without a target), or set "
        "datasets.d.drop_samples_without_metadata: true to leave them out"
    )
    counts = check_dataset("d", table, metadata, "age", drop_samples_without_metadata=True)
    assert (counts.matched, counts.table_only, counts.metadata_only) == (10, 2, 5)
    assert counts.with_target == 9  # s05 has no age


def test_an_empty_blank_without_a_metadata_row_is_left_out_unchecked(tmp_path):
    """A blank (no reads, no metadata row) stops the check only as a sample without a row."""
    table = write_table(tmp_path / "table.biom", [*IDS, "BLANK1"])
    given = biom.load_table(str(table))
    empty = given.transform(lambda v, sid, _: v * (sid != "BLANK1"), inplace=False)
    with biom_open(str(table), "w") as handle:
        empty.to_hdf5(handle, "aam tests")
    metadata = write_metadata(tmp_path / "m.tsv", IDS)
    message = one_line_error(check_dataset, "d", table, metadata, "age")
    assert "1 of the 13 samples" in message and "(BLANK1)" in message
    counts = check_dataset("d", table, metadata, "age", drop_samples_without_metadata=True)
    assert (counts.matched, counts.table_only) == (12, 1)


def test_match_samples_writes_the_samples_with_a_metadata_row(tmp_path):
    table = write_table(tmp_path / "table.biom")
    metadata = write_metadata(tmp_path / "m.tsv", [*EXTRA, *IDS[2:]])
    out = tmp_path / "matched.biom"
    assert aam("match-samples", "--table", table, "--metadata", metadata, "--output", out) == 0
    matched, given = biom.load_table(str(out)), biom.load_table(str(table))
    assert list(matched.ids()) == IDS[2:]
    assert np.array_equal(
        matched.to_dataframe(dense=True).to_numpy(),
        given.filter(IDS[2:], inplace=False)
        .remove_empty(axis="observation")
        .to_dataframe(dense=True)
        .to_numpy(),
    )


def test_the_plan_reads_the_matched_table_where_the_config_drops(tmp_path):
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["datasets"]["demo"]["drop_samples_without_metadata"] = True
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    plan = planned(path)
    assert plan.table_of("demo") == plan.work / "data/demo/matched.biom"
    assert "--drop-samples-without-metadata" in plan.data_checks["demo"]
    config["datasets"]["demo"]["rarefy"] = {"depth": 100, "seed": 1}
    path.write_text(yaml.safe_dump(config))
    plan = planned(path)
    assert plan.table_of("demo") == plan.work / "data/demo/rarefied.biom"
    assert plan.unrarefied_table("demo") == plan.work / "data/demo/matched.biom"


@pytest.mark.workflow
@pytest.mark.slow
def test_the_workflow_reads_a_superset_and_drops_table_samples_without_a_row(tmp_path):
    """60 demo samples in the table, the demo's 400 metadata rows but 2 of theirs: check_data
    stops naming the key, then, with it set, counts, and the split and the baselines read the
    58 samples both describe, by hand filtering nothing."""
    root = copy_checkout(tmp_path / "repo")
    demo = biom.load_table(str(root / "data/demo/table.biom"))
    ids = [str(s) for s in demo.ids()[:60]]
    table = demo.filter(ids, inplace=False).remove_empty(axis="observation")
    with biom_open(str(tmp_path / "table.biom"), "w") as handle:
        table.to_hdf5(handle, "aam tests")
    rows = (root / "data/demo/metadata.tsv").read_text().splitlines()
    kept = [row for row in rows if row.split("\t", 1)[0] not in ids[:2]]
    (tmp_path / "metadata.tsv").write_text("\n".join(kept) + "\n")
    config = yaml.safe_load((root / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config["datasets"]["demo"].update(table=str(tmp_path / "table.biom"))
    config["datasets"]["demo"].update(metadata=str(tmp_path / "metadata.tsv"))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    data = tmp_path / "work/data/demo"

    def snakemake(*targets: Path) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "snakemake", *map(str, targets), "--profile"]
        cmd += ["profiles/local", "--configfile", str(path), "--cores", "2"]
        return subprocess.run(cmd, cwd=root, capture_output=True, text=True)

    assert snakemake(data / "samples.json").returncode != 0
    log = (tmp_path / "work/logs/check_data/demo.log").read_text()
    assert "2 of the 60 samples" in log and "drop_samples_without_metadata: true" in log

    config["datasets"]["demo"]["drop_samples_without_metadata"] = True
    path.write_text(yaml.safe_dump(config))
    run = snakemake(data / "samples.json", data / "split.tsv", tmp_path / "work/baselines/demo.tsv")
    assert run.returncode == 0, run.stderr[-3000:]
    counts = json.loads((data / "samples.json").read_text())
    assert counts.pop("line").startswith("datasets.demo: 58 samples in the table (60)")
    assert counts == {
        **{"table_samples": 60, "metadata_rows": 398, "matched": 58, "table_only": 2},
        **{"metadata_only": 340, "with_target": 58, "low_depth": 0},  # demo samples: 1,000+ reads
    }
    assert list(biom.load_table(str(data / "matched.biom")).ids()) == ids[2:]
    assert sorted(read_split(data / "split.tsv").index) == sorted(ids[2:])
    baselines = pd.read_csv(tmp_path / "work/baselines/demo.tsv", sep="\t")
    assert set(baselines["sample_id"]) == set(ids[2:])
