"""The local SLURM cluster works with the real Snakemake slurm executor (a GPU job on small-g)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import slurm_cluster as harness  # noqa: E402
from slurm_cluster import GPUS, PARTITIONS  # noqa: E402

# one cluster per machine: one xdist worker
pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm")]

SNAKEFILE = textwrap.dedent(
    """
    rule all:
        input: "cpu.txt", "gpu_env.txt"

    rule cpu:
        output: "cpu.txt"
        threads: 1
        shell: "echo $SLURM_JOB_ID $SLURM_JOB_PARTITION $SLURM_CPUS_PER_TASK > {output}"

    rule gpu:
        output: "gpu_env.txt"
        resources: gpu=1, slurm_partition="small-g", runtime=10
        shell: "env | sort > {output}"
    """
)


def snakemake_slurm(
    workdir: Path, *extra: str, timeout: float = 120
) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--executor",
        "slurm",
        "--jobs",
        "2",
        "--slurm-status-command",
        "squeue",
        "--slurm-init-seconds-before-status-checks",
        "1",
        "--seconds-between-status-checks",
        "2",
        "--default-resources",
        "slurm_account=test",
        "slurm_partition=small",
        "mem_mb=500",
        "--slurm-logdir",
        str(workdir / "slurm-logs"),
        "--slurm-keep-successful-logs",
        *extra,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SNAKEMAKE_"))}
    return subprocess.run(
        cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout
    )


def read_env(path: Path) -> dict[str, str]:
    pairs = (line.partition("=") for line in path.read_text().splitlines())
    return {key: value for key, sep, value in pairs if sep}


def test_missing_slurm_fails_with_the_packages_to_install(monkeypatch):
    monkeypatch.setattr(harness, "SBIN_PATH", "/nonexistent")
    problem = harness.preflight()
    assert "slurmctld" in problem and "munged" in problem
    assert ".ci/run" in problem and "slurm-wlm" in problem and "munge" in problem
    assert "iproute2" in problem


def test_cluster_has_the_site_partitions_and_enforces_their_time_limits(slurm_cluster):
    out = slurm_cluster.run("sinfo", "--noheader", "--format=%R %l %D %G")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert set(rows) == set(PARTITIONS)
    assert rows["small-g"][0] == "3-00:00:00" and rows["gpu"][0] == "1-00:00:00"
    assert all(row[2] == f"gpu:{GPUS}" for row in rows.values())
    fits = slurm_cluster.run("sbatch", "--test-only", "-p", "dev-g", "-t", "180", "--wrap", "true")
    assert fits == ""  # --test-only reports on stderr
    too_long = subprocess.run(
        ["sbatch", "--test-only", "-p", "dev-g", "-t", "181", "--wrap", "true"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert too_long.returncode != 0 and "time limit" in too_long.stderr


def test_two_nodes_have_their_own_addresses_and_hostnames(slurm_cluster):
    nodes = [
        harness.parse_scontrol_oneliner(line)
        for line in slurm_cluster.run("scontrol", "show", "node", "-o").splitlines()
    ]
    assert [(n["NodeName"], n["NodeAddr"]) for n in nodes] == [
        ("aamnode1", "10.77.0.1"),
        ("aamnode2", "10.77.0.2"),
    ]
    assert {
        line.split()[0] for line in harness._run(["ip", "netns", "list"]).stdout.splitlines()
    } >= {
        "aamn1",
        "aamn2",
    }
    # one task per node: each sees its node's hostname and only its own address on aam0
    out = slurm_cluster.run(
        "srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "-p",
        "small",
        "-t",
        "1",
        "sh",
        "-c",
        "echo $SLURM_NODEID $(hostname) $(ip -4 -o addr show aam0 | awk '{print $4}')",
        timeout=60,
    )
    assert sorted(out.splitlines()) == ["0 aamnode1 10.77.0.1/24", "1 aamnode2 10.77.0.2/24"]


def test_snakemake_slurm_executor_runs_a_cpu_and_a_gpu_job(slurm_cluster, tmp_path):
    slurm_cluster.wait_idle()
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    run = snakemake_slurm(tmp_path)  # within its timeout; no wall-time assertion (issue 43)
    assert run.returncode == 0, f"{run.stderr[-4000:]}\n{slurm_cluster.logs()}"

    cpu_jobid, cpu_partition, cpus = (tmp_path / "cpu.txt").read_text().split()
    assert (cpu_partition, cpus) == ("small", "1")
    env = read_env(tmp_path / "gpu_env.txt")
    assert env["SLURM_GPUS_ON_NODE"] == "1"
    assert env["SLURM_JOB_PARTITION"] == "small-g"
    if (slurm_cluster.root / "gpu" / "fakegpu0").is_char_device():  # not where mknod is denied
        assert env.get("ROCR_VISIBLE_DEVICES") == "0"  # as on a real GPU node

    # no sacct: the controller keeps finished jobs for MinJobAge=600 s
    job = slurm_cluster.scontrol_job(env["SLURM_JOB_ID"])
    assert job["JobState"] == "COMPLETED" and job["Partition"] == "small-g"
    assert job["TresPerJob"] == "gres:gpu:1"
    assert job["TimeLimit"] == "00:10:00"
    cpu_job = slurm_cluster.scontrol_job(cpu_jobid)
    assert cpu_job["Partition"] == "small" and cpu_job.get("TresPerJob", "") == ""
    states = {j["jobid"]: j["state"] for j in slurm_cluster.squeue()}
    assert states[env["SLURM_JOB_ID"]] == states[cpu_jobid] == "COMPLETED"
    # --slurm-keep-successful-logs: one log per rule, named after the job id
    logs = sorted(
        p.relative_to(tmp_path / "slurm-logs") for p in (tmp_path / "slurm-logs").rglob("*.log")
    )
    expected = {
        Path("rule_cpu", f"{cpu_jobid}.log"),
        Path("rule_gpu", f"{env['SLURM_JOB_ID']}.log"),
    }
    assert set(logs) == expected, logs
