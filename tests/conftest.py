"""Shared fixtures: the bundled demo data (real oral microbiome samples), one SLURM cluster,
and a guard that fails the suite if the tests changed the checkout they run from."""

import compileall
import os
import shutil
import tempfile
from pathlib import Path

# Before anything loads OpenMP (torch, numba): the two xdist workers and the processes they start
# share 2 cores with 2 threads each, and OpenMP's default busy-wait at every barrier then burns
# the cores the other threads need. Measured here (2026-11-24): two one-epoch `aam pretrain
# --threads 2` side by side took 15.8 s of CPU each, 4.9 s with threads that sleep when they
# wait (and 4.4-5.0 s alone either way). Inherited by every process the suite starts, SLURM
# jobs included (sbatch exports the environment); a value set by the caller is kept.
os.environ["OMP_WAIT_POLICY"] = os.environ.get("OMP_WAIT_POLICY", "PASSIVE")

import biom
import checkout
import hypothesis_profiles  # noqa: F401  (registers and loads the profile)
import pytest
from dag_run import completed, copy  # noqa: F401  (the shared whole-DAG run, its copies)
from hypothesis.configuration import set_hypothesis_home_dir
from slurm_cluster import slurm_cluster  # noqa: F401  (one session-wide SLURM cluster)
from slurm_runs import slurm_runs  # noqa: F401  (the workflow runs on it, started together)

from aam.unifrac.engines import compute_unifrac
from aam.unifrac.io import write_distance_matrix
from aam.unifrac.tree import load_tree

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"
BEFORE = pytest.StashKey[checkout.Snapshot]()

# Hypothesis's caches go to a temporary directory (its profiles: hypothesis_profiles.py).
HYPOTHESIS_HOME = Path(tempfile.mkdtemp(prefix="aam-hypothesis-"))
set_hypothesis_home_dir(HYPOTHESIS_HOME)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller, not an xdist worker
        # aam's bytecode, once, before the workers start: the processes the suite starts (its
        # checkout copies take the .pyc along) read it instead of compiling aam each time, also
        # where PYTHONDONTWRITEBYTECODE is set (0.15-0.35 s of CPU per snakemake dry run).
        compileall.compile_dir(REPO / "aam", quiet=1)
        session.config.stash[BEFORE] = checkout.snapshot()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(HYPOTHESIS_HOME, ignore_errors=True)
    before = session.config.stash.get(BEFORE, None)
    if before is None:
        return
    changed = checkout.changes(before, checkout.snapshot())
    if changed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = "\n  ".join(changed[:20])
        message = (
            f"the tests changed the checkout {checkout.REPO} ({len(changed)} paths):\n  {lines}"
        )
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def checkout_copy(tmp_path_factory) -> Path:
    """A copy of the checkout's workflow parts, for dry runs and lint (tests must not write)."""
    return checkout.copy_checkout(tmp_path_factory.mktemp("checkout") / "repo")


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    return DEMO


@pytest.fixture(scope="session")
def demo_table() -> biom.Table:
    return biom.load_table(str(DEMO / "table.biom"))


@pytest.fixture(scope="session")
def small_study(tmp_path_factory, demo_table, demo_dir):
    """48 demo samples with their UniFrac matrix."""
    root = tmp_path_factory.mktemp("study")
    ids = demo_table.ids()[:48]
    table = demo_table.filter(ids, inplace=False).remove_empty(axis="observation")
    with biom.util.biom_open(str(root / "table.biom"), "w") as handle:
        table.to_hdf5(handle, "test")
    tree = load_tree(demo_dir / "tree.nwk")
    matrix = compute_unifrac(table, tree, ["unweighted"], threads=1)["unweighted"]
    write_distance_matrix(root / "unifrac.h5", [str(s) for s in table.ids()], matrix)
    return root
