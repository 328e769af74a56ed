"""The Cosmos and LUMI profiles, unchanged, submit the demo DAG through the real SLURM executor
plugin to a real one-node SLURM cluster. The LUMI run is also the preemption test: its pretraining
job is signalled (USR1) mid-run, and the retry must resume from the checkpoint.

Both runs start together (one module fixture) and share the cluster: most of a run's wall time is
the plugin's status polling, which the two runs spend side by side instead of one after the other.

Test overlay (what this machine cannot have): config/test.yaml instead of the site config
(tiny model, no container: there is no Singularity here), squeue for job status (no slurmdbd),
the plugin's shortest status intervals, and a site-sized node declared in slurm.conf.
"""

import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from checkout import REPO, copy_checkout

from aam.training.checkpoint import load_checkpoint

pytestmark = pytest.mark.xdist_group("slurm")  # one cluster per machine: one xdist worker

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


@dataclass
class SiteRun:
    """One `snakemake all --profile profiles/<profile>` run in the background."""

    profile: str
    repo: Path
    work: Path
    proc: subprocess.Popen
    output: Path  # Snakemake's stdout and stderr
    signalled: list[str] = field(default_factory=list)  # pretraining jobs sent USR1

    def wait(self) -> str:
        self.proc.wait(timeout=TIMEOUT)
        return self.output.read_text()


def _start(root: Path, profile: str) -> SiteRun:
    """Start the run of the checkout copy ``root/repo``, its outputs in ``root/work``."""
    repo, work = root / "repo", root / "work"
    env = {**os.environ, "AAM_SLURM_ACCOUNT": "test", "AAM_WORKDIR": str(work), **SITE_ENV[profile]}
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "all",
        "--profile",
        f"profiles/{profile}",
        "--configfile",
        "config/test.yaml",
        "--config",
        f"workdir={work}",
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
        jobs = _jobs_by_rule(run.work).get("pretrain", [])
        if state and state["epoch"] >= 1 and jobs:
            subprocess.run(["scancel", "--signal=USR1", jobs[0]], check=True)
            run.signalled.append(jobs[0])
            return
        time.sleep(0.2)


@pytest.fixture(scope="module")
def site_runs(slurm_cluster, tmp_path_factory):
    """The two site runs, started together; LUMI's pretraining is long enough to be signalled."""
    runs = {profile: tmp_path_factory.mktemp(profile) for profile in SITE_ENV}
    for root in runs.values():
        copy_checkout(root / "repo")
    lumi = runs["lumi"] / "repo"
    config = yaml.safe_load((lumi / "config/test.yaml").read_text())
    config["runs"]["tiny"]["pretrain"].update(epochs=4, checkpoint_every_minutes=0.001)
    (lumi / "config/test.yaml").write_text(yaml.safe_dump(config))
    started = {profile: _start(root, profile) for profile, root in runs.items()}
    signaller = threading.Thread(
        target=_signal_pretraining_after_its_first_epoch, args=(started["lumi"],), daemon=True
    )
    signaller.start()
    yield started
    signaller.join(timeout=10)
    for run in started.values():
        if run.proc.poll() is None:
            run.proc.kill()


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
    return {
        "partition": partition,
        "gpu": resources.get("gpu") or resources.get("gpus_per_node", 0),
        "minutes": resources["runtime"],
        "threads": threads,
    }


def _minutes(limit: str) -> int:
    days, _, clock = limit.rpartition("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return int(days or 0) * 1440 + h * 60 + m + (s > 0)


@pytest.mark.parametrize("profile", ["cosmos", "lumi"])
def test_profile_runs_the_demo_dag_with_its_resources(slurm_cluster, site_runs, profile):
    run = site_runs[profile]
    output = run.wait()
    assert run.proc.returncode == 0, output[-4000:]
    work = run.work
    assert (work / "runs/tiny/predict/predictions.tsv").is_file()
    assert (work / "runs/tiny/predict/metrics.json").is_file()
    jobs = _jobs_by_rule(work)
    gpu_and_cpu_jobs = {"unifrac", "baselines", "pretrain", "finetune", "predict", "validate"}
    assert set(jobs) == gpu_and_cpu_jobs, jobs  # the rest are localrules
    assert (work / "validation/golden.json").is_file()
    for rule in sorted(gpu_and_cpu_jobs):
        want = _expected(profile, rule)
        # every attempt asks for the rule's resources (LUMI's pretraining: signalled, retried)
        attempts = sorted(jobs[rule], key=int)
        for jobid in attempts:
            job = slurm_cluster.scontrol_job(jobid)
            assert job["Partition"] == want["partition"], (rule, job)
            assert _minutes(job["TimeLimit"]) == want["minutes"], (rule, job["TimeLimit"])
            if want["gpu"]:
                # gpu: the job's total (TresPerJob); gpus_per_node: per node (TresPerNode)
                tres = job.get("TresPerJob", "") + job.get("TresPerNode", "")
                assert re.search(rf"gpu:{want['gpu']}\b", tres), (rule, job)
                cpus = settings_cpus(profile, rule)
                assert re.search(rf"gpu[:=]{cpus}\b", job.get("CpusPerTres", "")), (rule, job)
            else:
                assert "gpu" not in job.get("TresPerJob", ""), (rule, job)
                assert int(job["CPUs/Task"]) == want["threads"], (rule, job)
        final = slurm_cluster.scontrol_job(attempts[-1])
        assert final["JobState"] == "COMPLETED", (rule, final["JobState"])


def settings_cpus(profile: str, rule: str) -> int:
    settings = yaml.safe_load((REPO / f"profiles/{profile}/config.yaml").read_text())
    return settings["set-resources"][rule]["cpus_per_gpu"]


def test_signalled_pretraining_is_retried_and_resumes_from_its_checkpoint(slurm_cluster, site_runs):
    run = site_runs["lumi"]
    output = run.wait()
    assert run.signalled, "pretraining finished before it could be signalled\n" + output[-3000:]
    assert run.proc.returncode == 0, output[-4000:]
    attempts = _jobs_by_rule(run.work)["pretrain"]
    assert len(attempts) == 2
    assert slurm_cluster.scontrol_job(run.signalled[0])["JobState"] != "COMPLETED"
    log = (run.work / "logs/pretrain/tiny.log").read_text()
    assert re.search(r"resumed from .*latest\.pt at epoch [2-4]", log), log[-3000:]
    history = (run.work / "runs/tiny/pretrain/history.tsv").read_text().splitlines()
    assert [row.split("\t")[0] for row in history] == ["epoch", "1", "2", "3", "4"]
    assert (run.work / "runs/tiny/predict/predictions.tsv").is_file()
