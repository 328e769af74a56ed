"""The workflow at its edges: a categorical target (``classifier: true``) end to end, every
output a classifier run declares written (beside the regression run of tests/test_workflow.py);
a bad tree stopped by its first job, named by the path in the config."""

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from checkout import copy_checkout


def _config(root):
    return yaml.safe_load((root / "config/test.yaml").read_text())


@pytest.mark.workflow
def test_classifier_run_writes_every_declared_output(tmp_path):
    root = copy_checkout(tmp_path / "repo")
    config = _config(root)
    demo = config["datasets"]["demo"]
    demo.update(target="qiita_study_id", classifier=True, categorical=[])
    config["unifrac"] = {"matrix": False}  # the batches' UniFrac is computed from the tree
    (root / "config/classes.yaml").write_text(yaml.safe_dump(config))
    options = ["--profile", "profiles/local", "--configfile", "config/classes.yaml"]
    snakemake = [sys.executable, "-m", "snakemake", "all", *options]
    run = subprocess.run([*snakemake, "--cores", "2"], cwd=root, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]

    out = root / "results/test/runs/tiny/predict"
    predictions = pd.read_csv(out / "predictions.tsv", sep="\t", dtype=str)
    split = pd.read_csv(root / "results/test/data/demo/split.tsv", sep="\t", dtype=str)
    assert set(predictions["sample_id"]) == set(split.loc[split["split"] == "test", "sample_id"])
    classes = [c.removeprefix("prob_") for c in predictions if c.startswith("prob_")]
    assert len(classes) > 2 and set(predictions["prediction"]) <= set(classes)
    metrics = json.loads((out / "metrics.json").read_text())
    for model in ("model", "mean_baseline", "random_forest_baseline"):
        assert 0.0 <= metrics[model]["accuracy"] <= 1.0, model
    assert (out / "predicted_vs_true.png").read_bytes()[:4] == b"\x89PNG"  # confusion matrices
    summary = pd.read_csv(root / "results/test/summary.tsv", sep="\t")
    assert summary.loc[0, "target"] == "qiita_study_id"
    assert {"model_accuracy", "random_forest_baseline_accuracy"} <= set(summary)

    report = subprocess.run(
        [*snakemake, "--report", "report.html"], cwd=root, capture_output=True, text=True
    )
    assert report.returncode == 0, report.stderr[-3000:]
    assert (root / "report.html").stat().st_size > 10_000


@pytest.mark.workflow
def test_a_tree_without_branch_lengths_stops_at_staging_named_as_configured(tmp_path):
    root = copy_checkout(tmp_path / "repo")
    tree = root / "data/demo/tree.nwk"
    bare = root / "my trees/no lengths.nwk"
    bare.parent.mkdir()
    bare.write_text(re.sub(r":[0-9.eE+-]+", "", tree.read_text()))  # every length removed
    config = _config(root)
    config["datasets"]["demo"]["tree"] = "my trees/no lengths.nwk"
    (root / "config/bare.yaml").write_text(yaml.safe_dump(config))
    options = ["--profile", "profiles/local", "--configfile", "config/bare.yaml"]
    cmd = [sys.executable, "-m", "snakemake", "all", *options, "--cores", "1"]
    run = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    assert run.returncode != 0
    assert "Error in rule stage_tree" in run.stdout + run.stderr
    log = (root / "results/test/logs/stage_tree/demo.log").read_text().strip()
    assert log.startswith("aam stage: error: my trees/no lengths.nwk: ") and "\n" not in log, log
    assert "branch(es) lack a finite length" in log
    assert not (root / "results/test/runs").exists()  # no training job started
