"""The checkout under test: copies of it for workflow runs, and a snapshot of its files so the
suite can prove it left a user's checkout (their `results/`, `.snakemake/`, edits) untouched."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What a workflow run needs: the package, the workflow, configs, profiles, data, golden files.
WORKFLOW_PARTS = ("aam", "workflow", "config", "profiles", "data", "containers", "tests/golden")
# Not the user's state: tool installs and interpreter caches (pytest's own cache is disabled in
# pyproject.toml, hypothesis keeps no database, ruff runs with --no-cache).
IGNORED_DIRS = {".git", ".venv", "__pycache__"}

Snapshot = dict[str, tuple[int, int]]


def copy_checkout(target: Path, parts: tuple[str, ...] = WORKFLOW_PARTS) -> Path:
    """Copy ``parts`` of the checkout to ``target`` (no results); return ``target``. The
    bytecode and numba's compiled kernels (``__pycache__/*.pyc``, ``*.nbi``, ``*.nbc``) come
    along: Python and numba reuse them for the copied sources (same mtime and size) instead of
    compiling them again in every copy (numba: 4-5 s of the first training job)."""
    for name in parts:
        shutil.copytree(REPO / name, target / name)
    return target


def snapshot(root: Path = REPO) -> Snapshot:
    """(mtime_ns, size) of every file under ``root`` and (0, 0) for every directory (their
    mtimes change when Python writes a ``__pycache__``), except ``IGNORED_DIRS``."""
    found: Snapshot = {}
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in IGNORED_DIRS and not d.endswith(".egg-info")]
        for name in subdirs:
            found[os.path.relpath(os.path.join(directory, name), root)] = (0, 0)
        for name in files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            found[os.path.relpath(path, root)] = (info.st_mtime_ns, info.st_size)
    return found


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """Paths created, removed or modified between two snapshots, sorted."""
    created = [f"created {p}" for p in after.keys() - before.keys()]
    removed = [f"removed {p}" for p in before.keys() - after.keys()]
    modified = [f"modified {p}" for p in before.keys() & after.keys() if before[p] != after[p]]
    return sorted(created + removed + modified, key=lambda line: line.split(" ", 1)[1])


def dry_run(cwd: Path, config: Path, *extra: str) -> subprocess.CompletedProcess:
    """`snakemake all --profile profiles/local --configfile CONFIG --dry-run` in ``cwd``."""
    cmd = [sys.executable, "-m", "snakemake", "all", "--profile", "profiles/local"]
    cmd += ["--configfile", str(config), "--dry-run", *extra]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def job_counts(output: str) -> dict[str, int]:
    """Jobs per rule of the "Job stats" table Snakemake prints (a dry run's plan)."""
    table = output.split("Job stats:")[1].split("total")[0]
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)\s*$", table, flags=re.M)}


def stopped_by_check(config: Path, work: Path, dataset: str) -> str:
    """Bad data: the run of ``config`` (workdir ``work``), in a copy of the checkout beside
    ``work``, stops at rule check_data of ``dataset`` before any training job. Returns the
    check's one-line error (its log). (That a dry run plans whatever the data hold, since
    parsing reads no data file: test_workflow_edges.py.)"""
    cwd = copy_checkout(work.parent / "checked-repo")
    cmd = [sys.executable, "-m", "snakemake", "all", "--profile", "profiles/local"]
    run = subprocess.run(
        [*cmd, "--configfile", str(config), "--cores", "1"], cwd=cwd, capture_output=True, text=True
    )
    assert run.returncode != 0 and "Error in rule check_data" in run.stdout + run.stderr
    assert not (work / "runs").exists()  # no training job started
    line = (work / f"logs/check_data/{dataset}.log").read_text().strip()
    assert line.startswith("aam check-data: error: ") and "\n" not in line, line
    return line
