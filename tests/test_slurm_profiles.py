"""The Cosmos and LUMI profiles, unchanged, submit the demo DAG through the real SLURM executor
plugin to a real one-node SLURM cluster; then a pretraining job is signalled mid-run and its
retry resumes from the checkpoint.

Test overlay (what this machine cannot have): config/test.yaml instead of the site config
(tiny model, no container: there is no Singularity here), squeue for job status (no slurmdbd),
short status intervals, and a site-sized node declared in slurm.conf.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from aam.training.checkpoint import load_checkpoint  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
COPIED = ("aam", "workflow", "config", "profiles", "data", "tests/golden")
SITE_ENV = {"cosmos": {"AAM_SLURM_PARTITION": "cluster"}, "lumi": {}}


def _copy_repo(target: Path) -> Path:
    for name in COPIED:
        shutil.copytree(REPO / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _snakemake(repo: Path, profile: str, work: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "AAM_SLURM_ACCOUNT": "test", "AAM_WORKDIR": str(work),
           **SITE_ENV[profile]}  # fmt: skip
    cmd = [
        sys.executable, "-m", "snakemake", "all", "--profile", f"profiles/{profile}",
        "--configfile", "config/test.yaml", "--config", f"workdir={work}",
        "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
        "--seconds-between-status-checks", "2", "--slurm-logdir", str(work / "slurm-logs"),
        *extra,
    ]  # fmt: skip
    return subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip


def _jobs_by_rule(work: Path) -> dict[str, list[str]]:
    """SLURM job IDs of each rule, from the plugin's per-job logs (rule_<rule>/.../<id>.log)."""
    jobs: dict[str, list[str]] = {}
    for log in (work / "slurm-logs").rglob("*.log"):
        rule = log.relative_to(work / "slurm-logs").parts[0].removeprefix("rule_")
        jobs.setdefault(rule, []).append(log.stem)
    return jobs


def _expected(profile: str, rule: str) -> dict:
    settings = yaml.safe_load((REPO / f"profiles/{profile}/config.yaml").read_text())
    resources = {**settings["default-resources"], **settings["set-resources"].get(rule, {})}
    partition = os.path.expandvars(str(resources["slurm_partition"]))
    if "$" in partition:
        partition = SITE_ENV[profile]["AAM_SLURM_PARTITION"]
    threads = settings["set-threads"].get(rule)
    return {"partition": partition, "gpu": resources.get("gpu", 0),
            "minutes": resources["runtime"], "threads": threads}  # fmt: skip


def _minutes(limit: str) -> int:
    days, _, clock = limit.rpartition("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return int(days or 0) * 1440 + h * 60 + m + (s > 0)


@pytest.mark.parametrize("profile", ["cosmos", "lumi"])
def test_profile_runs_the_demo_dag_with_its_resources(slurm_cluster, tmp_path, profile):
    repo, work = _copy_repo(tmp_path / "repo"), tmp_path / "work"
    proc = _snakemake(repo, profile, work)
    output, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, output[-4000:]
    assert (work / "runs/tiny/predict/predictions.tsv").is_file()
    assert (work / "runs/tiny/predict/metrics.json").is_file()
    jobs = _jobs_by_rule(work)
    gpu_and_cpu_jobs = {"unifrac", "pretrain", "finetune", "predict", "validate"}
    assert set(jobs) == gpu_and_cpu_jobs, jobs  # the rest are localrules
    assert (work / "validation/golden.json").is_file()
    for rule in sorted(gpu_and_cpu_jobs):
        want = _expected(profile, rule)
        job = slurm_cluster.scontrol_job(jobs[rule][0])
        assert job["Partition"] == want["partition"], (rule, job)
        assert _minutes(job["TimeLimit"]) == want["minutes"], (rule, job["TimeLimit"])
        if want["gpu"]:
            assert re.search(rf"gpu:{want['gpu']}\b", job.get("TresPerJob", "")), (rule, job)
            cpus = settings_cpus(profile, rule)
            assert re.search(rf"gpu[:=]{cpus}\b", job.get("CpusPerTres", "")), (rule, job)
        else:
            assert "gpu" not in job.get("TresPerJob", ""), (rule, job)
            assert int(job["CPUs/Task"]) == want["threads"], (rule, job)
        assert job["JobState"] == "COMPLETED", (rule, job["JobState"])


def settings_cpus(profile: str, rule: str) -> int:
    settings = yaml.safe_load((REPO / f"profiles/{profile}/config.yaml").read_text())
    return settings["set-resources"][rule]["cpus_per_gpu"]


def test_signalled_pretraining_is_retried_and_resumes_from_its_checkpoint(slurm_cluster, tmp_path):
    repo, work = _copy_repo(tmp_path / "repo"), tmp_path / "work"
    config = yaml.safe_load((repo / "config/test.yaml").read_text())
    config["runs"]["tiny"]["pretrain"].update(epochs=4, checkpoint_every_minutes=0.001)
    (repo / "config/test.yaml").write_text(yaml.safe_dump(config))
    proc = _snakemake(repo, "lumi", work)
    latest = work / "runs/tiny/pretrain/checkpoints/latest.pt"
    signalled = None
    deadline = time.monotonic() + 600
    while signalled is None and time.monotonic() < deadline and proc.poll() is None:
        state = load_checkpoint(latest) if latest.exists() else None
        jobs = _jobs_by_rule(work).get("pretrain", [])
        if state and state["epoch"] >= 1 and jobs:
            signalled = jobs[0]
            subprocess.run(["scancel", "--signal=USR1", signalled], check=True)
        time.sleep(0.2)
    output, _ = proc.communicate(timeout=900)
    assert signalled, "pretraining finished before it could be signalled\n" + output[-3000:]
    assert proc.returncode == 0, output[-4000:]
    attempts = _jobs_by_rule(work)["pretrain"]
    assert len(attempts) == 2 and slurm_cluster.scontrol_job(signalled)["JobState"] != "COMPLETED"
    log = (work / "logs/pretrain/tiny.log").read_text()
    assert re.search(r"resumed from .*latest\.pt at epoch [2-4]", log), log[-3000:]
    history = (work / "runs/tiny/pretrain/history.tsv").read_text().splitlines()
    assert [row.split("\t")[0] for row in history] == ["epoch", "1", "2", "3", "4"]
    assert (work / "runs/tiny/predict/predictions.tsv").is_file()
