"""A search in the DAG: the site profiles submit each worker as a GPU job of its own (dry
run); a tiny search runs end to end (its run trains with the chosen values, its forest is
scored beside AAM); a worker SIGKILLed mid-trial, then the DAG rerun, continues the study to
its budget exactly; a changed space reruns the search, a moved budget continues it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from checkout import REPO, dry_run, job_counts
from test_quality_gates import SITE_ENV

SEARCH = {
    "space": {
        "finetune.lr": {"low": 0.0003, "high": 0.01, "log": True},
        "pretrain": {"choices": ["none", "pretrained"]},
    },
    "trials": 3,
    "workers": 2,
    "folds": 2,
    "forest": {"trials": 3, "space": {"trees": {"low": 10, "high": 30}}},
}


def _config(tmp_path: Path, search: dict = SEARCH, **top) -> Path:
    """The test config, its run searched, no UniFrac matrix (not the search's business)."""
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config["unifrac"] = {"matrix": False}
    config["datasets"]["demo"]["split_group_column"] = "qiita_study_id"
    config["runs"]["tiny"]["search"] = search
    config.update(top)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _snakemake(cwd: Path, config: Path, *extra: str, env=None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", *extra, "--profile", "profiles/local"]
    cmd += ["--configfile", str(config), "--cores", "2"]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)


@pytest.mark.workflow
@pytest.mark.parametrize(("profile", "cpus"), [("cosmos", 24), ("lumi", 7)])
def test_site_profiles_submit_each_worker_as_a_gpu_job(profile, cpus, tmp_path, checkout_copy):
    shim = tmp_path / "bin" / "apptainer"  # Snakemake asks `apptainer --version` while planning
    shim.parent.mkdir()
    shim.write_text('#!/bin/sh\necho "apptainer version 1.3.4"\n')
    shim.chmod(0o755)
    env = {**os.environ, **SITE_ENV, "AAM_WORKDIR": str(tmp_path)}
    env["PATH"] = f"{shim.parent}{os.pathsep}{env['PATH']}"
    config = _config(tmp_path, {**SEARCH, "workers": 3, "trials": 6})
    cmd = [sys.executable, "-m", "snakemake", "all", "--profile", f"profiles/{profile}"]
    cmd += ["--dry-run", "--configfile", str(config)]
    run = subprocess.run(cmd, cwd=checkout_copy, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    counts = job_counts(run.stdout)
    assert counts["search_worker"] == 3 and counts["search_best"] == 1, counts
    assert counts["search_split"] == 2 and counts["search_forest"] == 1, counts
    jobs = re.findall(r"rule search_worker:\n(.*?)\n\n", run.stdout, flags=re.S)
    assert len(jobs) == 3
    for job in jobs:
        resources = re.search(r"resources: (.*)", job).group(1)
        assert "gpu=1" in resources and f"cpus_per_gpu={cpus}" in resources, resources
    assert len({re.search(r"workers/(\d+)\.json", job).group(1) for job in jobs}) == 3


@pytest.mark.workflow
def test_a_changed_space_reruns_the_search_and_a_typo_stops_before_any_job(tmp_path, checkout_copy):
    config = _config(tmp_path)
    run = dry_run(checkout_copy, config)
    assert run.returncode == 0, run.stderr[-2000:]
    counts = job_counts(run.stdout)
    # the run trains once with the chosen values: its pretraining and fine-tuning wait for them
    assert counts["pretrain"] == 1 and counts["finetune"] == 1 and counts["search_worker"] == 2
    typo = _config(tmp_path, {**SEARCH, "space": {"finetune.lrr": {"low": 0.1, "high": 0.2}}})
    run = dry_run(checkout_copy, typo)
    assert run.returncode != 0
    assert "config runs.tiny.search.space.finetune.lrr: not a run option" in run.stdout + run.stderr


@pytest.mark.extended  # minutes of CPU: `make test-extended`
def test_a_search_runs_end_to_end_survives_a_killed_worker_and_reruns_what_changed(
    tmp_path, checkout_copy
):
    work = tmp_path / "work"
    config = _config(tmp_path, {**SEARCH, "workers": 1})
    search = work / "runs/tiny/search"
    # One worker, killed (SIGKILL: no handler runs) once its first trial has begun a fold.
    cmd = [sys.executable, "-m", "snakemake", str(search / "workers/1.json")]
    cmd += ["--profile", "profiles/local", "--configfile", str(config), "--cores", "1"]
    proc = subprocess.Popen(
        cmd, cwd=checkout_copy, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 600
    while not list((search / "trials").glob("*/0/fold1/finetune")) and time.monotonic() < deadline:
        time.sleep(0.5)
    worker = subprocess.run(
        ["pgrep", "-f", f"search-worker.*{search}"], capture_output=True, text=True
    )
    pids = [int(p) for p in worker.stdout.split()]
    assert pids, "the worker never started a trial"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    proc.communicate(timeout=120)
    assert not (search / "workers/1.json").exists()

    run = _snakemake(checkout_copy, config, "all")
    assert run.returncode == 0, run.stderr[-4000:]
    trials = pd.read_csv(search / "trials.tsv", sep="\t")
    counted = trials[trials["state"].isin(["complete", "pruned"])]
    assert len(counted) == 3, trials  # exactly the budget
    killed = trials[trials["state"] == "killed"]
    assert len(killed) == 1 and killed["number"].tolist() == [0], trials
    retry = trials[trials["retry_of"] == 0]
    assert (
        len(retry) == 1
        and retry["value.finetune.lr"].iloc[0] == killed["value.finetune.lr"].iloc[0]
    )
    best = yaml.safe_load((search / "best.yaml").read_text())
    summary = json.loads((search / "search.json").read_text())
    states = summary["trials"]
    assert states.get("complete", 0) + states.get("pruned", 0) == 3 and states["killed"] == 1
    assert best["finetune"]["lr"] == pytest.approx(summary["best"]["values"]["finetune.lr"])
    # the run trained with the chosen values and was tested once, beside the searched forest
    command = json.loads((work / "runs/tiny/finetune/provenance.json").read_text())["command"]
    assert command[command.index("--options-file") + 1] == str(search / "best.yaml")
    assert "--lr" not in command  # the searched option comes from best.yaml alone
    metrics = json.loads((work / "runs/tiny/predict/metrics.json").read_text())
    assert "searched_forest_baseline" in metrics
    assert not list((search / "trials").glob("*/*/fold*"))  # each trial's files removed

    # A budget raised by one continues the study (one more trial); the space changed starts anew.
    more = _config(tmp_path, {**SEARCH, "workers": 1, "trials": 4})
    run = _snakemake(checkout_copy, more, "all")
    assert run.returncode == 0, run.stderr[-4000:]
    trials = pd.read_csv(search / "trials.tsv", sep="\t")
    assert trials["state"].isin(["complete", "pruned"]).sum() == 4, trials
    wider = {**SEARCH["space"], "finetune.epochs": {"low": 1, "high": 2}}
    changed = _config(tmp_path, {**SEARCH, "workers": 1, "trials": 4, "space": wider})
    run = dry_run(checkout_copy, changed)
    assert run.returncode == 0, run.stderr[-2000:]
    assert {"search_worker", "search_best", "finetune", "predict"} <= set(job_counts(run.stdout))
