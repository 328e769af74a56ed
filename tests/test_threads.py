"""--threads: capped at the CPUs a process may run on (a SLURM job's allocation, taskset), so
a site profile's thread count never oversubscribes a smaller allocation."""

import logging
import subprocess
import sys

import pytest

from aam.runtime.threads import available_cpus, usable_threads


def test_threads_within_the_allocation_are_kept_and_none_stays_none(caplog):
    assert usable_threads(None) is None
    assert usable_threads(1) == 1
    assert usable_threads(available_cpus()) == available_cpus()
    assert not caplog.records


def test_ranks_on_one_node_share_its_cpus(monkeypatch, caplog):
    """torchrun's LOCAL_WORLD_SIZE ranks split the CPUs; each keeps at least one thread."""
    ranks = 2 * available_cpus()  # more ranks than CPUs: one thread each
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(ranks))
    with caplog.at_level(logging.INFO):
        assert usable_threads(24) == 1
    assert f"{available_cpus()} CPUs shared by {ranks} ranks; using 1" in caplog.text
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert usable_threads(available_cpus()) == available_cpus()


def test_more_threads_than_cpus_are_capped_with_a_note(caplog):
    with caplog.at_level(logging.INFO):
        assert usable_threads(available_cpus() + 23) == available_cpus()
    assert f"--threads {available_cpus() + 23}: this process may run on" in caplog.text


@pytest.mark.slow  # a subprocess that imports torch
def test_torch_in_a_one_cpu_process_asked_for_24_threads_runs_one():
    """A process pinned to CPU 0 (as SLURM pins a job to its allocation) sets up a run with
    the Cosmos profile's 24 threads: torch gets 1."""
    code = (
        "import torch\n"
        "from aam.training.run import setup_run\n"
        "from aam.training.config import RuntimeConfig\n"
        "setup_run(RuntimeConfig(threads=24, device='cpu'))\n"
        "print(torch.get_num_threads())\n"
    )
    run = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["1"]
