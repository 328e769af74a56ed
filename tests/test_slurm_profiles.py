"""The Cosmos and LUMI profiles submit the demo DAG through the real SLURM executor plugin to the
real two-node test cluster, each job asking for what its profile says. (The Cosmos run's
pretraining runs on two nodes, is signalled with USR1 mid-run and resumed by its retry:
test_slurm_two_nodes.py.)

The runs and their test overlay: tests/slurm_runs.py (fixture `slurm_runs`).
"""

import os
import re

import pytest
import yaml
from slurm_runs import SITE_ENV, SiteRun, jobs_by_rule

# one cluster per machine: one xdist worker
pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm")]


# The SLURM jobs of each run: the rest are localrules; predict runs in the fine-tuning job (the
# profiles' job group). LUMI's run stops at the pretrained encoder and the matrix (LUMI_TARGETS).
JOBS = {
    "cosmos": {"unifrac", "pcoa", "baselines", "pretrain", "finetune_predict", "importance"}
    | {"embedding_forest", "validate"},
    "lumi": {"unifrac", "pretrain"},
}


def _settings(run: SiteRun) -> dict:
    """The run's profile (the Cosmos run's, with the two-node overlay of slurm_runs.py)."""
    return yaml.safe_load((run.repo / f"profiles/{run.profile}/config.yaml").read_text())


def _rules_of(settings: dict, name: str) -> list[str]:
    """The rules of the test DAG that run in the job ``name``: a job group's (it has no
    predict_on here), or the rule itself."""
    grouped = [rule for rule, group in settings["groups"].items() if group == name]
    return sorted(rule for rule in grouped if rule != "predict_on") or [name]


def _job_name(run: SiteRun, name: str) -> str:
    """The plugin's name of a job (its log folder): a group job is `<group>_<its rules>`."""
    rules = _rules_of(_settings(run), name)
    return name if rules == [name] else "_".join([name, *rules])


def _expected(run: SiteRun, name: str) -> dict:
    """What the job of a rule, or of a job group (its rules run one after the other), asks for."""
    settings = _settings(run)
    rules = _rules_of(settings, name)
    asked = [
        {**settings["default-resources"], **settings["set-resources"].get(rule, {})}
        for rule in rules
    ]
    partitions = {os.path.expandvars(str(resources["slurm_partition"])) for resources in asked}
    assert len(partitions) == 1, (name, partitions)  # a group job runs on one partition
    partition = partitions.pop()
    if "$" in partition:
        partition = SITE_ENV[run.profile]["AAM_SLURM_PARTITION"]
    return {
        "partition": partition,
        "gpu": max(r.get("gpu") or r.get("gpus_per_node", 0) for r in asked),
        "minutes": sum(r["runtime"] for r in asked),  # in series: the sum of their limits
        "threads": max(settings["set-threads"].get(rule, 0) for rule in rules),
        "cpus_per_gpu": max(r.get("cpus_per_gpu", 0) for r in asked),
    }


def _minutes(limit: str) -> int:
    days, _, clock = limit.rpartition("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return int(days or 0) * 1440 + h * 60 + m + (s > 0)


@pytest.mark.extended  # a whole-DAG run per site: `make test-extended` (the 8-minute budget)
@pytest.mark.parametrize("profile", ["cosmos", "lumi"])
def test_profile_runs_the_demo_dag_with_its_resources(slurm_cluster, slurm_runs, profile):
    run = slurm_runs[profile]
    output = run.wait()
    assert run.proc.returncode == 0, output[-4000:]
    work = run.work
    assert (work / "runs/tiny/pretrain/encoder.pt").is_file()
    assert (work / "runs/tiny/predict/metrics.json").is_file() == (profile == "cosmos")
    named = {_job_name(run, name): name for name in JOBS[profile]}
    jobs = {named.get(name, name): ids for name, ids in jobs_by_rule(work).items()}
    assert set(jobs) == JOBS[profile], jobs
    # one sbatch per job (Cosmos: 8, 9 without the job group), and the retry of a signalled
    # pretraining
    retries = len(jobs["pretrain"]) - 1
    assert retries == (profile == "cosmos"), jobs
    assert sum(len(ids) for ids in jobs.values()) == len(JOBS[profile]) + retries, jobs
    assert (work / "validation/golden.json").is_file() == (profile == "cosmos")
    for rule in sorted(JOBS[profile]):
        want = _expected(run, rule)
        # every attempt asks for the rule's resources (Cosmos's pretraining: signalled, retried)
        attempts = sorted(jobs[rule], key=int)
        for jobid in attempts:
            job = slurm_cluster.scontrol_job(jobid)
            assert job["Partition"] == want["partition"], (rule, job)
            assert _minutes(job["TimeLimit"]) == want["minutes"], (rule, job["TimeLimit"])
            if want["gpu"]:
                # gpu: the job's total (TresPerJob); gpus_per_node: per node (TresPerNode)
                tres = job.get("TresPerJob", "") + job.get("TresPerNode", "")
                assert re.search(rf"gpu:{want['gpu']}\b", tres), (rule, job)
                cpus = want["cpus_per_gpu"]
                assert re.search(rf"gpu[:=]{cpus}\b", job.get("CpusPerTres", "")), (rule, job)
            else:
                assert "gpu" not in job.get("TresPerJob", ""), (rule, job)
                assert int(job["CPUs/Task"]) == want["threads"], (rule, job)
        final = slurm_cluster.scontrol_job(attempts[-1])
        assert final["JobState"] == "COMPLETED", (rule, final["JobState"])
