"""What a dry run schedules after each config edit, and which jobs each edit changes: run as
``python rerun_plan.py ROOT CASES TARGET...`` in a copy of the repository after a finished run
(ROOT), one Snakemake parse per candidate value, all in this one process (~0.2 s each, where a
`snakemake -n` takes ~3.5 s). Prints one JSON object.

CASES is a JSON file: ``{"config": path, "base": config, "edits": [[name, alternatives], ...]}``,
each alternative ``[key, [values...]]`` (a key of the schema in one dataset or run). The values
are tried in turn, written over ``config`` (where the finished run's config was: the overview's
params name it); the first one Snakemake parses and plans, and that changes a job, wins (else
the first it plans: a key no job reads), then the next alternative's. For it (and ``key``):

* ``changed``: the jobs that run something whose params, input files or output files differ
  from the unedited config's jobs (new jobs included): what the edit changes. Params computed
  from a job's threads or resources (the launcher of a multi-node job) are how a job is
  started, not what it computes, and are left out: so is ``--threads``, in the shell command;
* ``scheduled``: the jobs the dry run would execute (Snakemake's own decision, from its records
  of the finished run);
* ``downstream``: ``changed`` and every job that reads their outputs, transitively.
"""

import inspect
import json
import sys
from pathlib import Path

import yaml
from snakemake.api import SnakemakeApi
from snakemake.settings.types import (
    ConfigSettings,
    DAGSettings,
    OutputSettings,
    Quietness,
    ResourceSettings,
)

# Dry run, then return (no scheduling of the dry-run "execution"): the DAG keeps its plan.
QUIET = {Quietness.RULES, Quietness.PROGRESS}
LAUNCH = {"threads", "resources"}  # params functions of these: how a job starts
TRIES = 6  # candidate values tried per key


def job_name(job) -> str:
    wildcards = ",".join(f"{k}={v}" for k, v in sorted(dict(job.wildcards).items()))
    return f"{job.rule.name}[{wildcards}]"


def _what(job) -> list:
    """What a job computes from: its params but the launch ones, its input and output paths."""
    params = [
        (name, str(value))
        for name, value in job.params._allitems()
        if not (callable(raw := job.rule.params.get(name)) and LAUNCH & _arguments(raw))
    ]
    return [params, sorted(map(str, job.input)), sorted(map(str, job.output))]


def _arguments(function) -> set[str]:
    return set(inspect.signature(function).parameters)


def plan(root: Path, config: Path, targets: set[str]) -> dict:
    """The jobs of a dry run of ``targets``: what each computes from, which would run."""
    with SnakemakeApi(OutputSettings(quiet=QUIET)) as api:
        workflow = api.workflow(
            # the local profile's pretraining on 1 GPU per node: a config may ask for 2 nodes
            resource_settings=ResourceSettings(
                cores=1, overwrite_resources={"pretrain": {"gpus_per_node": 1}}
            ),
            config_settings=ConfigSettings(configfiles=[config]),
            snakefile=root / "workflow/Snakefile",
            workdir=root,
        )
        workflow.dag(DAGSettings(targets=targets)).execute_workflow(executor="dryrun")
        dag = workflow._workflow.dag
        jobs = [job for job in dag.jobs if not job.rule.norun]
        after = {job_name(j): sorted(job_name(d) for d in dag.depending[j]) for j in jobs}
        return {
            "what": {job_name(job): _what(job) for job in jobs},
            "scheduled": sorted(job_name(job) for job in dag.needrun_jobs() if not job.rule.norun),
            "after": after,
        }


def _downstream(jobs: set[str], after: dict) -> set[str]:
    found, todo = set(jobs), list(jobs)
    while todo:
        for job in after.get(todo.pop(), []):
            if job not in found and job in after:
                found.add(job)
                todo.append(job)
    return found


def _write(config: Path, value: dict) -> None:
    config.write_text(yaml.safe_dump(value, sort_keys=False))


def _set(config: dict, key: list, value) -> dict:
    edited = json.loads(json.dumps(config))
    node = edited
    for part in key[:-1]:
        node = node.setdefault(part, {})
    node[key[-1]] = value
    return edited


def _edit(root: Path, config: Path, settings: dict, key: list, values: list, base: dict):
    """The first of ``values`` of ``key`` that Snakemake plans and that changes a job (else the
    first it plans: a key no job reads), at most ``TRIES`` of them."""
    errors, found = [], None
    for value in values[:TRIES]:
        _write(config, _set(settings, key, value))
        try:
            edited = plan(root, config, set(base["targets"]))
        except Exception as err:  # the plan (or Snakemake) refuses it: the next one
            errors.append(f"{value!r}: {' '.join(str(err).split())[:300]}")
            continue
        changed = {job for job, what in edited["what"].items() if base["what"].get(job) != what}
        result = {
            "value": value,
            "changed": sorted(changed),
            "scheduled": edited["scheduled"],
            "downstream": sorted(_downstream(changed, edited["after"])),
        }
        if changed:
            return result
        found = found or result
    return found or {"refused": errors}


def main(root: Path, cases: dict, targets: set[str]) -> dict:
    config = root / cases["config"]
    original = config.read_text()  # the finished run's (the overview shows its text)
    base = {**plan(root, config, targets), "targets": sorted(targets)}
    results = {"base": base["scheduled"], "edits": {}}
    for name, alternatives in cases["edits"]:
        found = None
        for key, values in alternatives:
            result = {**_edit(root, config, cases["base"], key, values, base), "key": key}
            if result.get("changed"):
                found = result
                break
            found = result if found is None or "refused" in found else found
        results["edits"][name] = found
    config.write_text(original)
    return results


if __name__ == "__main__":
    root, cases = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    print(json.dumps(main(root, cases, set(sys.argv[3:]))))
