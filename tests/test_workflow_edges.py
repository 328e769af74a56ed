"""The workflow at its edges: planning reads no data file, a bad tree stopped by its first job,
named by the path in the config. (A classifier run end to end: tests/test_workflow_extended.py,
run `classes`.)"""

import re
import subprocess
import sys

import pytest
import yaml
from checkout import copy_checkout, dry_run, stopped_by_check


def _config(root):
    return yaml.safe_load((root / "config/test.yaml").read_text())


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
    assert f"rule stage_tree: {log}" in run.stderr.splitlines()  # the line, on the terminal
    assert not (root / "results/test/runs").exists()  # no training job started


@pytest.mark.workflow
def test_a_dry_run_reads_no_data_file(tmp_path, checkout_copy):
    """Table, tree and metadata that are not data files at all: the dry run plans (the cost of
    `snakemake -n` does not grow with the data); the run's first job names a bad file."""
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    config = _config(checkout_copy)
    config["workdir"] = str(tmp_path / "work")
    for key, name in (("table", "table.biom"), ("tree", "tree.nwk"), ("metadata", "meta.tsv")):
        (garbage / name).write_bytes(b"\x00\x01 not a data file\n")
        config["datasets"]["demo"][key] = str(garbage / name)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    planned = dry_run(checkout_copy, path)
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert re.search(r"^pretrain\s+1$", planned.stdout, flags=re.M), planned.stdout[-2000:]
    line = stopped_by_check(path, tmp_path / "work", "demo")
    assert f"{garbage}/" in line, line
