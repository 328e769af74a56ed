"""Pretraining on two nodes of the test cluster, through the Cosmos profile and the real SLURM
plugin: srun starts one torchrun per node, their ranks (gloo, one per node) meet at a c10d
rendezvous on the first node. The job is signalled (USR1) after its first epoch, the retry
resumes from latest.pt on both nodes, and the encoder equals the same training on one node.

It is the pretraining of the Cosmos site run (`slurm_runs["cosmos"]`, whose other jobs
test_slurm_profiles.py checks); its overlay is in tests/slurm_runs.py: one process per node
instead of 4 APUs, one thread per process (2 CPU cores in all), 3 epochs, gloo told to use the
nodes' interface (GLOO_SOCKET_IFNAME=aam0, as a site names its Slingshot interfaces). Masking
and dropout are off, as in test_distributed.py (which compares two ranks with one process): the
comparison covers the pairwise UniFrac loss over the gathered embeddings.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from checkout import copy_checkout
from errors import failure_lines
from slurm_cluster import NODES
from slurm_runs import SiteRun, jobs_by_rule

# one cluster per machine: one xdist worker
pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm")]

ENV = {"AAM_SLURM_ACCOUNT": "test", "AAM_SLURM_PARTITION": "cluster"}


def _snakemake(work: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        str(work / "runs/tiny/pretrain/encoder.pt"),
        "--profile",
        "profiles/cosmos",
        "--configfile",
        "config/test.yaml",
        "--config",
        f"workdir={work}",
        *extra,
    ]


def _shell_command(output: str, start: str) -> str:
    """The first job shell command Snakemake printed (printshellcmds) that begins with `start`."""
    prefix = "Shell command: "
    return next(
        line.removeprefix(prefix) for line in output.splitlines() if line.startswith(prefix + start)
    )


def _local_encoder(run: SiteRun, output: str, out: Path, launcher: list[str]) -> dict:
    """The job's own `aam pretrain` arguments, run here under `launcher`; its encoder."""
    shell = _shell_command(output, "srun --nodes=2 ")
    words = shlex.split(shell)
    words = words[words.index("--") + 1 : words.index(">")]
    words[words.index("--output-dir") + 1] = str(out)
    words[words.index("--provenance") + 1] = str(out / "provenance.json")
    env = {**os.environ, "PYTHONPATH": str(run.repo)}
    local = subprocess.run(
        [sys.executable, *launcher, *words], capture_output=True, text=True, env=env, timeout=300
    )
    assert local.returncode == 0, failure_lines(local.stderr)
    return torch.load(out / "encoder.pt", weights_only=False)["model"]


@pytest.mark.extended  # the Cosmos site run's pretraining: `make test-extended`
def test_pretraining_on_two_nodes_resumes_after_usr1_and_equals_one_process(
    slurm_cluster, slurm_runs, tmp_path
):
    run = slurm_runs["cosmos"]
    output = run.wait()
    assert run.proc.returncode == 0, output[-5000:]
    assert run.signalled, "pretraining ended before it could be signalled"
    jobs = jobs_by_rule(run.work)["pretrain"]
    assert len(jobs) == 2 and jobs[0] == run.signalled[0], jobs  # signalled, then retried
    for jobid in jobs:
        job = slurm_cluster.scontrol_job(jobid)
        assert job["NumNodes"] == "2" and job["NodeList"] == f"aamnode[1-{len(NODES)}]", job
        assert job["Partition"] == "cluster" and "gpu:1" in job["TresPerNode"], job
    assert slurm_cluster.scontrol_job(jobs[0])["JobState"] != "COMPLETED"
    assert slurm_cluster.scontrol_job(jobs[1])["JobState"] == "COMPLETED"

    sbatch = [line for line in output.splitlines() if "sbatch call:" in line]
    pretrain_sbatch = [line for line in sbatch if "rule_pretrain" in line]
    assert len(pretrain_sbatch) == 2
    for option in ("-p cluster", "--nodes=2", "--ntasks=2", "--cpus-per-gpu=24", "--gres=gpu:1"):
        assert f" {option} " in pretrain_sbatch[0], (option, pretrain_sbatch[0])
    assert "--ntasks-per-gpu" not in pretrain_sbatch[0]

    log = (run.work / "logs/pretrain/tiny.log").read_text()  # the retry's log
    resumed = re.findall(r"resumed from .*latest\.pt at epoch [23]", log)
    assert len(resumed) == 2, log[-3000:]  # one line per rank, i.e. per node
    history = (run.work / "runs/tiny/pretrain/history.tsv").read_text().splitlines()
    assert [row.split("\t")[0] for row in history] == ["epoch", "1", "2", "3"]

    two_nodes = torch.load(run.work / "runs/tiny/pretrain/encoder.pt", weights_only=False)
    two_nodes = two_nodes["model"]
    # Two ranks on one node, never stopped: the same weights, bit for bit.
    one_node = _local_encoder(
        run,
        output,
        tmp_path / "one_node",
        ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"],
    )
    assert two_nodes.keys() == one_node.keys()
    for name, weight in one_node.items():
        assert torch.equal(two_nodes[name], weight), name
    # (DDP against one process on the whole global batches, equal up to rounding:
    # test_distributed.py.)


def test_cosmos_profile_runs_pretraining_on_four_nodes_of_four_apus(tmp_path):
    repo, work = tmp_path / "repo", tmp_path / "work"
    copy_checkout(repo)
    env = {**os.environ, **ENV, "AAM_WORKDIR": str(work)}
    dry = subprocess.run(
        [*_snakemake(work, "pretrain_nodes=4"), "-n", "-p"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stderr[-3000:]
    shell = _shell_command(dry.stdout, "srun ")
    assert shell.startswith(
        "srun --nodes=4 --ntasks=4 --ntasks-per-node=1 --cpus-per-task=96 --gres=gpu:4 "
        "--kill-on-bad-exit=1 python -m aam.workflow.launch --nproc-per-node 4 -- -m aam "
    ), shell
    resources = next(
        line for line in dry.stdout.splitlines() if "resources:" in line and "mpi=srun" in line
    )
    for item in ("nodes=4", "gpus_per_node=4", "cpus_per_gpu=24", "gres=gpu:4", "tasks=4"):
        assert item in resources, resources


def test_more_nodes_than_the_partition_has_stop_before_any_job(slurm_cluster, tmp_path):
    """The other runs may be using the cluster meanwhile: only this run's jobs are looked at."""
    repo, work = tmp_path / "repo", tmp_path / "work"
    copy_checkout(repo)
    run = subprocess.run(
        [*_snakemake(work, "pretrain_nodes=4"), "--slurm-status-command", "squeue"],
        cwd=repo,
        env={**os.environ, **ENV, "AAM_WORKDIR": str(work)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    message = (
        "pretrain_nodes: 4 nodes asked, but partition cluster has 2; lower pretrain_nodes in "
        "the config or choose a bigger partition"
    )
    assert message in run.stderr, run.stderr[-3000:]
    assert not (repo / "logs/slurm").exists()  # nothing submitted (the plugin's job logs)
    assert not (work / "runs").exists()
