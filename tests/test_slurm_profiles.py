"""The Cosmos and LUMI profiles, unchanged, submit the demo DAG through the real SLURM executor
plugin to the real two-node test cluster. The LUMI run is also the preemption test: its
pretraining job is signalled (USR1) mid-run, and the retry must resume from the checkpoint.

The runs and their test overlay: tests/slurm_runs.py (fixture `slurm_runs`).
"""

import os
import re

import pytest
import yaml
from checkout import REPO
from slurm_runs import SITE_ENV, jobs_by_rule

pytestmark = pytest.mark.xdist_group("slurm")  # one cluster per machine: one xdist worker


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
def test_profile_runs_the_demo_dag_with_its_resources(slurm_cluster, slurm_runs, profile):
    run = slurm_runs[profile]
    output = run.wait()
    assert run.proc.returncode == 0, output[-4000:]
    work = run.work
    assert (work / "runs/tiny/predict/predictions.tsv").is_file()
    assert (work / "runs/tiny/predict/metrics.json").is_file()
    jobs = jobs_by_rule(work)
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


def test_signalled_pretraining_is_retried_and_resumes_from_its_checkpoint(
    slurm_cluster, slurm_runs
):
    run = slurm_runs["lumi"]
    output = run.wait()
    assert run.signalled, "pretraining finished before it could be signalled\n" + output[-3000:]
    assert run.proc.returncode == 0, output[-4000:]
    attempts = jobs_by_rule(run.work)["pretrain"]
    assert len(attempts) == 2
    assert slurm_cluster.scontrol_job(run.signalled[0])["JobState"] != "COMPLETED"
    log = (run.work / "logs/pretrain/tiny.log").read_text()
    assert re.search(r"resumed from .*latest\.pt at epoch [2-4]", log), log[-3000:]
    history = (run.work / "runs/tiny/pretrain/history.tsv").read_text().splitlines()
    assert [row.split("\t")[0] for row in history] == ["epoch", "1", "2", "3", "4"]
    assert (run.work / "runs/tiny/predict/predictions.tsv").is_file()
