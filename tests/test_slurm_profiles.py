"""The Cosmos and LUMI profiles, unchanged, submit the demo DAG through the real SLURM executor
plugin to the real two-node test cluster. (The preemption test, a pretraining job signalled with
USR1 mid-run and resumed by its retry, is the two-node run's: test_slurm_two_nodes.py.)

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
