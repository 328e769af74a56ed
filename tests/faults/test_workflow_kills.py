"""The workflow killed: `snakemake` and every job it started (SIGKILL to its process group)
after a seeded number of finished jobs, twice, each time `snakemake --unlock` and a rerun. The
run completes with the results of an uninterrupted run (the same predictions, histories, splits
and baselines, byte for byte), nothing duplicated and no temporary left; while a run goes on, a
second `snakemake` on its work directory is refused (by Snakemake's lock or aam's)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from checkout import copy_checkout
from injection import temporaries

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

# outputs that must come out byte-identical (no timestamps, hosts or paths in them); the
# histories' measured columns (speed, time, memory) are left out
COMPARED = ("*.tsv", "runs/*/*/history.tsv", "runs/*/predict/predictions.tsv")
MEASURED = ["samples_per_s", "epoch_seconds", "peak_memory_mb", "device_busy", "tflops", "mfu"]


def snakemake(work: Path, *extra: str) -> list[str]:
    """The command line of `snakemake EXTRA` with the local profile, the test config and
    ``work`` as its work directory."""
    options = ["--profile", "profiles/local", "--configfile", "config/test.yaml", "--cores", "2"]
    return [sys.executable, "-m", "snakemake", *extra, *options, "--config", f"workdir={work}"]


def finished_jobs(work: Path) -> int:
    """Jobs done so far: each writes its benchmark file when it ends."""
    return sum(1 for p in (work / "benchmarks").rglob("*.tsv")) if work.exists() else 0


def compared(work: Path) -> dict[str, bytes]:
    files = {p for pattern in COMPARED for p in work.glob(pattern)}
    files |= set(work.glob("data/*/split.tsv")) | set(work.glob("baselines/*.tsv"))
    return {str(p.relative_to(work)): _content(p) for p in sorted(files)}


def _content(path: Path) -> bytes:
    if path.name != "history.tsv":
        return path.read_bytes()
    history = pd.read_csv(path, sep="\t")
    return history.drop(columns=MEASURED, errors="ignore").to_csv(sep="\t").encode()


@pytest.mark.parametrize("seed", [8])
def test_killed_twice_then_unlocked_the_workflow_completes_to_the_uninterrupted_results(
    tmp_path, seed
):
    repo = copy_checkout(tmp_path / "repo")
    straight, work = tmp_path / "straight", tmp_path / "work"
    done = subprocess.run(snakemake(straight, "all"), cwd=repo, capture_output=True)
    assert done.returncode == 0, done.stderr[-3000:]
    total = finished_jobs(straight)
    kills = sorted(random.Random(seed).sample(range(2, total - 2), 2))
    for number, after in enumerate(kills):
        run = subprocess.Popen(
            snakemake(work, "all"),
            cwd=repo,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: snakemake and its jobs
        )
        deadline = time.monotonic() + 300
        while finished_jobs(work) < after and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run.poll() is None, f"the run ended before {after} jobs (kill {number})"
        if number == 0:
            second = subprocess.run(snakemake(work, "all"), cwd=repo, capture_output=True)
            refusals = (b"is running this workflow", b"Directory cannot be locked")
            assert second.returncode != 0, second.stderr[-2000:]
            assert any(refusal in second.stderr for refusal in refusals), second.stderr[-2000:]
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=60)
        unlock = subprocess.run(snakemake(work, "--unlock"), cwd=repo, capture_output=True)
        assert unlock.returncode == 0, unlock.stderr[-2000:]
    rerun = subprocess.run(snakemake(work, "all"), cwd=repo, capture_output=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert compared(work) == compared(straight)
    assert finished_jobs(work) == total  # each job's outputs once: no job left out or added
    assert not temporaries(work), temporaries(work)
    again = subprocess.run(snakemake(work, "all", "--dry-run"), cwd=repo, capture_output=True)
    assert again.returncode == 0 and b"Nothing to be done" in again.stdout + again.stderr
