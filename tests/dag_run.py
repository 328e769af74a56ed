"""The shared whole-DAG run of the workflow tests: a copy of the repository after `snakemake all`
with the tiny test config (fixture ``completed``; session scope, so one run per session whichever
module asks), fresh copies of it (``copy``), and how the tests run and edit it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from checkout import copy_checkout, job_counts

OPTIONS = ["--profile", "profiles/local", "--configfile", "config/test.yaml"]


def run_snakemake(cwd: Path, *extra: str, targets=("all",)) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", *targets, *OPTIONS, *extra]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def scheduled(cwd: Path) -> set[str]:
    """Rules of the jobs a dry run would execute (parsed from its job-stats table)."""
    run = run_snakemake(cwd, "--dry-run")
    assert run.returncode == 0, run.stderr[-3000:]
    if "Nothing to be done" in run.stdout + run.stderr:
        return set()
    return set(job_counts(run.stdout))


def edit(path: Path, old: str, new: str) -> None:
    """Replace the first ``old`` in ``path`` by ``new`` (it must be there)."""
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def _rename_target(root: Path, column: str) -> None:
    """Rename the demo's target column (metadata header and test config) to ``column``."""
    edit(root / "data/demo/metadata.tsv", "sample_id\tage\t", f"sample_id\t{column}\t")
    config = yaml.safe_load((root / "config/test.yaml").read_text())
    config["datasets"]["demo"]["target"] = column
    (root / "config/test.yaml").write_text(yaml.safe_dump(config))


@pytest.fixture(scope="session")
def completed(tmp_path_factory) -> Path:
    """A copy of the repository after a full run of the tiny workflow config."""
    root = copy_checkout(tmp_path_factory.mktemp("workflow") / "repo")
    marker = root.parent / "executed"
    _rename_target(root, f"host age $(touch {marker}) `touch {marker}`; 'q\"")
    run = run_snakemake(root, "--cores", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    assert not marker.exists(), "a metadata column name was executed by the shell"
    return root


@pytest.fixture
def copy(completed, tmp_path) -> Path:
    """A fresh copy of the completed run (timestamps and .snakemake metadata kept)."""
    target = tmp_path / "repo"
    shutil.copytree(completed, target, symlinks=True)
    return target
