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
from hypothesis import given, settings
from hypothesis import strategies as st


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
    tests.mkdir(parents=True, exist_ok=True)
    setup = ("conftest.py", "hypothesis_profiles.py", "checkout.py", "slurm_cluster.py")
    setup += ("slurm_runs.py", "dag_run.py")
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


def _drawn(profile: str) -> list[float]:
    """The examples one run of a property test draws under ``profile``."""
    drawn: list[float] = []

    @settings(settings.get_profile(profile), max_examples=30)
    @given(st.floats(0, 1e6))
    def record(x):
        drawn.append(x)

    record()
    return drawn


def test_the_profile_follows_ci_and_only_ci_pins_examples():
    """tests/conftest.py: CI=true loads "ci" (derandomized, no deadline); otherwise "aam"
    draws new examples each run (issue 43)."""
    ci = os.environ.get("CI", "").lower() in ("true", "1")
    assert settings.default.derandomize is ci
    assert _drawn("ci") == _drawn("ci")
    assert _drawn("aam") != _drawn("aam")
    assert settings.get_profile("ci").deadline is None


@pytest.mark.slow
def test_two_ci_sessions_run_the_same_property_examples(tmp_path):
    """Two sessions with the suite's profiles (hypothesis_profiles.py, which conftest.py
    loads) and CI=true draw the same examples: the same commit runs the same cases, so a CI
    run fails only for a change (issue 43)."""
    body = """
        import os
        from hypothesis import given, strategies as st

        @given(st.floats(0, 1e6))
        def test_records_its_examples(x):
            with open(os.environ["RECORDS"], "a") as handle:
                handle.write(repr(x) + "\\n")
    """
    drawn = []
    for name in ("first", "second"):
        repo, records = tmp_path / name, tmp_path / f"{name}.txt"
        (repo / "tests").mkdir(parents=True)
        shutil.copy(checkout.REPO / "tests" / "hypothesis_profiles.py", repo / "tests")
        (repo / "tests" / "conftest.py").write_text("import hypothesis_profiles  # noqa\n")
        env = {**os.environ, "RECORDS": str(records), "CI": "true"}
        run = _pytest(repo, body, env=env, suite_setup=False)
        assert run.returncode == 0, run.stdout[-2000:]
        drawn.append(records.read_text().splitlines())
    assert len(drawn[0]) >= 50 and drawn[0] == drawn[1]
