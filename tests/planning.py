"""What the workflow decides before any training job, found in this process instead of a
`snakemake` run (a Python start, Snakemake's imports, a copy of the checkout each):

- ``plan_error``: the one line that stops a config at parse time. common.smk raises plan()'s
  PlanError as its WorkflowError; test_run_options.py runs the dry run that prints it.
- ``check_data_error``: the one line of a dataset's check_data job, `aam check-data` with the
  flags of the plan. test_workflow_edges.py runs the workflow that stops at that job.
"""

from __future__ import annotations

import io
import os
import shlex
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr
from pathlib import Path

import yaml
from checkout import REPO

from aam.cli import main
from aam.errors import EXIT_INPUT
from aam.workflow.plan import Plan, PlanError, plan


@contextmanager
def _in(cwd: Path) -> Iterator[None]:
    """Relative paths of a config resolve from ``cwd``, as in a run started there."""
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(previous)


def planned(config: Path, cwd: Path = REPO) -> Plan:
    """The plan of `snakemake --profile profiles/local --configfile CONFIG` run in ``cwd``."""
    with _in(cwd):
        return plan(yaml.safe_load(config.read_text()), cwd)


def plan_error(config: Path, cwd: Path = REPO) -> str:
    """The PlanError line that stops ``config`` at parse time."""
    try:
        planned(config, cwd)
    except PlanError as err:
        line = str(err)
        assert "\n" not in line, line
        return line
    raise AssertionError(f"{config} was planned without an error")


def check_data_error(config: Path, dataset: str, cwd: Path = REPO) -> str:
    """The error line of rule check_data on ``dataset`` of ``config``; no manifest written."""
    scheme = planned(config, cwd)
    data = scheme.datasets[dataset]
    manifest = scheme.work / f"data/{dataset}/checked.sha256"
    manifest.parent.mkdir(parents=True, exist_ok=True)  # as Snakemake does for a job
    args = ["check-data", "--dataset", dataset, "--table", data["table"]]
    args += ["--metadata", data["metadata"], "--output", str(manifest)]
    args += ["--sequences", data["sequences"]] if data["sequences"] else []
    args += shlex.split(scheme.data_checks[dataset])
    stderr = io.StringIO()
    with _in(cwd), redirect_stderr(stderr):
        code = main(args)
    line = stderr.getvalue().strip()
    assert code == EXIT_INPUT and not manifest.exists(), (code, line)
    assert line.startswith("aam check-data: error: ") and "\n" not in line, line
    return line
