"""The workflow runs on the test SLURM cluster, started together (fixture `slurm_runs`).

Two `snakemake` runs through the real executor plugin, each on its own copy of the checkout:

- `cosmos`: `snakemake all` with the Cosmos profile, its pretraining on both nodes
  (`pretrain_nodes=2`) and signalled (USR1) after its first epoch: the retry must resume on
  both nodes (test_slurm_two_nodes.py), the rest of the DAG runs as the profile asks
  (test_slurm_profiles.py);
- `lumi`: the LUMI profile, unchanged, up to the pretrained encoder and the UniFrac matrix
  (`LUMI_TARGETS`): a CPU job of its `small` partition (unifrac) and its 4-GCD pretraining on
  `small-g`. Its other jobs ask for the same partitions with other numbers, through the same
  resources as the Cosmos run's jobs (the job group included), and would cost CI a SLURM job
  each (two Snakemake starts, torch).

Most of a run's wall time is the plugin's status polling (it adds 10 s to its interval after each
round in which no job finished), so the runs poll side by side instead of one after the other.

Test overlay (what this machine cannot have): config/test.yaml instead of the site config (tiny
model, no container: there is no Singularity here), squeue for job status (no slurmdbd), the
plugin's shortest status intervals, site-sized nodes declared in slurm.conf.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from checkout import copy_checkout
from slurm_cluster import NODE_IFACE

from aam.training.checkpointing.checkpoint import load_checkpoint

SITE_ENV = {"cosmos": {"AAM_SLURM_PARTITION": "cluster"}, "lumi": {}}
# The plugin's own options (snakemake-executor-plugin-slurm): first status check 1 s after
# submission, then every 2 s (the plugin adds 10 s per round in which no job finished).
STATUS_POLLING = (
    "--slurm-init-seconds-before-status-checks",
    "1",
    "--seconds-between-status-checks",
    "2",
)
TIMEOUT = 900
LUMI_TARGETS = ("{work}/runs/tiny/pretrain/encoder.pt", "{work}/unifrac/demo.unweighted.h5")


@dataclass
class SiteRun:
    """One `snakemake <target> --profile profiles/<profile>` run in the background."""

    profile: str
    repo: Path
    work: Path
    proc: subprocess.Popen
    output: Path  # Snakemake's stdout and stderr
    signalled: list[str] = field(default_factory=list)  # pretraining jobs sent USR1

    def wait(self) -> str:
        self.proc.wait(timeout=TIMEOUT)
        return self.output.read_text()


def jobs_by_rule(work: Path) -> dict[str, list[str]]:
    """SLURM job IDs of each rule or job group, from the plugin's per-job logs
    (rule_<rule>/.../<id>.log, group_<group>/.../<id>.log), in submission order: one ID per
    `sbatch`."""
    jobs: dict[str, list[str]] = {}
    for log in (work / "slurm-logs").rglob("*.log"):
        kind_and_name = log.relative_to(work / "slurm-logs").parts[0]
        name = kind_and_name.removeprefix("rule_").removeprefix("group_")
        jobs.setdefault(name, []).append(log.stem)
    return {name: sorted(ids, key=int) for name, ids in jobs.items()}


def _start(
    root: Path,
    profile: str,
    targets: tuple[str, ...] = ("all",),
    extra: tuple[str, ...] = (),
    env_extra=None,
) -> SiteRun:
    """Start the run of the checkout copy ``root/repo``, its outputs in ``root/work``."""
    repo, work = root / "repo", root / "work"
    env = {
        **os.environ,
        "AAM_SLURM_ACCOUNT": "test",
        "AAM_WORKDIR": str(work),
        **SITE_ENV[profile],
        **(env_extra or {}),
    }
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        *(target.format(work=work) for target in targets),
        "--profile",
        f"profiles/{profile}",
        "--configfile",
        "config/test.yaml",
        "--config",
        f"workdir={work}",
        *extra,
        "--slurm-status-command",
        "squeue",
        *STATUS_POLLING,
        "--slurm-logdir",
        str(work / "slurm-logs"),
    ]
    output = root / "snakemake.out"
    with output.open("w") as handle:  # a file, not a pipe: nobody reads while the runs go
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=handle, stderr=subprocess.STDOUT)
    return SiteRun(profile, repo, work, proc, output)


def _signal_pretraining_after_its_first_epoch(run: SiteRun) -> None:
    """Send USR1 to the first pretraining job once its checkpoint holds an epoch."""
    latest = run.work / "runs/tiny/pretrain/checkpoints/latest.pt"
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and run.proc.poll() is None:
        state = load_checkpoint(latest) if latest.exists() else None
        jobs = jobs_by_rule(run.work).get("pretrain", [])
        if state and state["epoch"] >= 1 and jobs:
            subprocess.run(["scancel", "--signal=USR1", jobs[0]], check=True)
            run.signalled.append(jobs[0])
            return
        time.sleep(0.2)


def _edit_yaml(path: Path, edit) -> None:
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data))


def _two_node_overlay(repo: Path) -> None:
    """Pretraining: one process per node and one thread per process (2 CPU cores here);
    masking and dropout off, so that two ranks draw no random numbers one process would not
    (test_slurm_two_nodes.py)."""

    def profile(settings: dict) -> None:
        settings["set-resources"]["pretrain"]["gpus_per_node"] = 1
        settings["set-threads"]["pretrain"] = 1

    def config(settings: dict) -> None:
        # 3 epochs, a checkpoint after every step: long enough to be signalled mid-run
        settings["runs"]["tiny"]["pretrain"].update(
            epochs=3, checkpoint_every_minutes=0.001, mask_rate=0.0
        )
        settings["runs"]["tiny"]["model"]["dropout"] = 0.0

    _edit_yaml(repo / "profiles/cosmos/config.yaml", profile)
    _edit_yaml(repo / "config/test.yaml", config)


@pytest.fixture(scope="session")
def slurm_runs(slurm_cluster, tmp_path_factory) -> Iterator[dict[str, SiteRun]]:
    """The two runs, started together; each test waits for its own."""
    roots = {name: tmp_path_factory.mktemp(name) for name in ("cosmos", "lumi")}
    for root in roots.values():
        copy_checkout(root / "repo")
    _two_node_overlay(roots["cosmos"] / "repo")
    runs = {
        "cosmos": _start(
            roots["cosmos"],
            "cosmos",
            extra=("pretrain_nodes=2", "--verbose"),  # verbose: the plugin's sbatch calls
            env_extra={"GLOO_SOCKET_IFNAME": NODE_IFACE},
        ),
        "lumi": _start(roots["lumi"], "lumi", targets=LUMI_TARGETS),
    }
    signaller = threading.Thread(
        target=_signal_pretraining_after_its_first_epoch, args=(runs["cosmos"],), daemon=True
    )
    signaller.start()
    yield runs
    signaller.join(timeout=10)
    for run in runs.values():
        if run.proc.poll() is None:
            run.proc.kill()
