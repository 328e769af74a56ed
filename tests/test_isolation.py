"""The suite leaves the checkout alone: the snapshot sees every kind of change, the session guard
fails a run that writes into its checkout, and xdist keeps each test group on one worker (a
scattered group would start the SLURM cluster or the shared DAG run twice)."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import checkout
import pytest


def test_snapshot_sees_created_removed_and_modified_files_but_not_caches(tmp_path):
    (tmp_path / "kept.txt").write_text("a")
    (tmp_path / "gone.txt").write_text("b")
    (tmp_path / "edited.txt").write_text("c")
    before = checkout.snapshot(tmp_path)
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "edited.txt").write_text("cc")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "new.tsv").write_text("d")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"e")
    assert checkout.changes(before, checkout.snapshot(tmp_path)) == [
        "modified edited.txt",
        "removed gone.txt",
        "created results",
        "created results/new.tsv",
    ]


def _pytest(
    repo: Path, test_body: str, *options: str, env=None, suite_setup: bool = True
) -> subprocess.CompletedProcess:
    """Run pytest on one test file in ``repo``, with a copy of the suite's own session setup
    (conftest.py and what it imports; ``suite_setup=False``: plain pytest and its plugins)."""
    tests = repo / "tests"
    tests.mkdir(parents=True)
    setup = ("conftest.py", "checkout.py", "slurm_cluster.py", "slurm_runs.py")
    for name in setup if suite_setup else ():
        shutil.copy(checkout.REPO / "tests" / name, tests / name)
    (repo / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (tests / "test_probe.py").write_text(textwrap.dedent(test_body))
    cmd = [sys.executable, "-m", "pytest", "-q", str(tests / "test_probe.py"), *options]
    return subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.slow
def test_guard_fails_a_session_that_writes_into_its_checkout(tmp_path):
    body = """
        from checkout import REPO

        def test_writes_results():
            (REPO / "results").mkdir()
            (REPO / "results" / "out.tsv").write_text("x")
    """
    run = _pytest(tmp_path / "repo", body)
    assert run.returncode == 1, run.stdout[-2000:]
    assert "1 passed" in run.stdout
    assert "the tests changed the checkout" in run.stdout
    assert "created results/out.tsv" in run.stdout


@pytest.mark.slow
def test_guard_passes_a_session_that_writes_only_to_tmp_path(tmp_path):
    body = """
        def test_writes_elsewhere(tmp_path):
            (tmp_path / "out.tsv").write_text("x")
    """
    run = _pytest(tmp_path / "repo", body)
    assert run.returncode == 0, run.stdout[-2000:]
    assert "changed the checkout" not in run.stdout


@pytest.mark.slow
def test_xdist_keeps_a_group_on_one_worker(tmp_path):
    body = """
        import os
        import pytest

        pytestmark = pytest.mark.xdist_group("together")

        @pytest.mark.parametrize("i", range(6))
        def test_records_its_worker(i):
            out = os.path.join(os.environ["RECORDS"], f"test-{i}")
            with open(out, "w") as handle:
                handle.write(os.environ["PYTEST_XDIST_WORKER"])
    """
    records = tmp_path / "records"
    records.mkdir()
    env = {**os.environ, "RECORDS": str(records)}
    # the installed pytest and pytest-xdist alone (the suite's conftest would only add its
    # imports to the three processes)
    options = ("-n", "2", "--dist", "loadgroup")
    run = _pytest(tmp_path / "repo", body, *options, env=env, suite_setup=False)
    assert run.returncode == 0, run.stdout[-2000:]
    assert len(list(records.iterdir())) == 6
    workers = {p.read_text() for p in records.iterdir()}
    assert len(workers) == 1, f"one group ran on {sorted(workers)} (pytest-xdist issue #1386)"
