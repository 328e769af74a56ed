"""What the workflow's rules share, set in one place; the report's entries; the targets of
rule `all`.

``shared_directives`` gives every rule what would otherwise be repeated in each: Snakemake has
a global ``container:`` but no global form of ``benchmark:``, ``conda:`` (its global ``conda:``
is the environment of the running Snakemake, not of the jobs), an input or a params entry.
``REPORT`` describes each output the report shows (``report_entry``), ``final_outputs`` lists
what `snakemake all` makes. Standard library only, and no Snakemake import: the Snakefile passes
its rules (duck-typed ``snakemake.rules.Rule``) and its values.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple

from aam.runtime.external_tools import SNAKEMAKE_VERSION
from aam.runtime.figures import FORMATS, figure_name
from aam.training.checkpointing import orphan
from aam.workflow.plan import SPLIT_PART

# `python -m aam [--provenance <output>] <command>` in a rule's shell command.
AAM_COMMAND = re.compile(r"-m aam (?:--provenance \{[\w.:]+\} )?([\w-]+)")


def aam_command(shellcmd: str | None) -> str | None:
    """The `aam` command a rule's shell command runs (None: none)."""
    match = AAM_COMMAND.search(shellcmd or "")
    return match.group(1) if match else None


def benchmark_of(log: str, work: Path) -> str:
    """The benchmark file beside log ``log``: ``<work>/benchmarks/<rule>/<name>.tsv`` for
    ``<work>/logs/<rule>/<name>.log`` (wildcards and their constraints kept)."""
    logs, benchmarks = str(work / "logs"), str(work / "benchmarks")
    if not (log.startswith(logs + "/") and log.endswith(".log")):
        raise ValueError(f"log {log} is not <work>/logs/<rule>/<name>.log")
    return benchmarks + log[len(logs) : -len(".log")] + ".tsv"


def digests(paths: Iterable[str | Path]) -> list[str]:
    """The sha256 of each file: a params value that reruns a job reading these files whole
    when their text changes, where they are not inputs (the overview's config files)."""
    return [hashlib.sha256(Path(path).read_bytes()).hexdigest() for path in paths]


def out_dir(wildcards: Any, output: Any) -> Path:
    """Params function: the folder of a job's first output (its ``--output-dir``)."""
    return Path(output[0]).parent


def shared_directives(
    rules: Iterable[Any],
    work: Path,
    code: Callable[[str], str],
    conda_env: str,
    image_input: Any,
    on_host: Iterable[str] = ("build_container",),
) -> None:
    """Give every rule that runs something (a shell command or a script; not `all`):

    * ``benchmark:`` beside its log (``benchmark_of``): its wall time and peak memory (a
      rule may name its own: build_container's is in container.smk, which test workflows
      include without the Snakefile);
    * ``params: code=code(command)`` where its shell runs `python -m aam <command>`: the
      fingerprint of the code that command can run (Snakemake reruns a job whose params
      changed; ``aam.workflow.fingerprint``);
    * unless it runs on the host (``on_host``: build_container makes the image), ``conda:
      conda_env`` (used with --software-deployment-method conda) and input ``image=
      image_input``: the image it runs in (a rule waits for its build: ``container:`` makes no
      DAG edge; ``[]`` without one).

    Called once, after the last rule is defined: the same values a directive of each rule
    would set (the rule's own log, params and inputs come first)."""
    host = set(on_host)
    for rule in rules:
        if rule.shellcmd is None and rule.script is None:
            continue
        if rule.log and rule.benchmark is None:
            rule.benchmark_modifier = rule.log_modifier
            rule.benchmark = benchmark_of(str(rule.log[0]), work)
        command = aam_command(rule.shellcmd)
        if command is not None:
            rule.set_params(code=code(command))
        if rule.name not in host:
            rule.conda_env = conda_env
            rule.set_input(image=image_input)


def job_prefix(repo: Path, image: str | None, compile_cache: Path) -> str:
    """The exports before every job's shell command (Snakemake's ``shell.prefix``; braces
    doubled for its formatting). Every job runs `python -m aam` from ``repo``: in the
    ``image`` with its python (the image holds dependencies only), without one with the python
    running Snakemake. A training job stops when the Snakemake that runs it is gone
    (``aam.training.checkpointing.orphan``: the token names this process, in a SLURM job the
    job's own Snakemake); torch.compile's caches are shared in ``compile_cache``; the job's
    provenance record names this Snakemake's version (``SNAKEMAKE_VERSION``). Not in a rule's
    shell command or params, which are rerun triggers: the prefix is neither."""
    exports = [f'PYTHONPATH={shlex.quote(str(repo))}"{os.pathsep}${{{{PYTHONPATH:-}}}}"']
    python_bin = shlex.quote(str(Path(sys.executable).parent))
    exports += [] if image else [f'PATH={python_bin}"{os.pathsep}$PATH"']
    exports += [f"{orphan.ENV}={shlex.quote(orphan.workflow_token())}"]
    exports += [f"TORCHINDUCTOR_CACHE_DIR={shlex.quote(str(compile_cache))}"]
    exports += [f"{SNAKEMAKE_VERSION}={shlex.quote(metadata.version('snakemake'))}"]
    return "".join(f"export {e}; " for e in exports)


# The wildcards' forms (the Snakefile's global wildcard_constraints). Names hold no "/" (config
# schema), so a dataset's files never match a fold's, a learning-curve point's or a new-study
# point's (baselines/{dataset}.tsv against baselines/<dataset>/<part>.tsv).
WILDCARDS = {
    "dataset": "[^/]+",
    "run": "[^/]+",
    "folds": r"\d+",
    "seed": r"-?\d+",
    "fold": r"\d+",
    "shard": r"\d+",
    "fraction": r"[0-9.e-]+",
    "size": r"\d+",
    "worker": r"\d+",
    "part": SPLIT_PART,
}

# The report's categories in reading order (Snakemake's report lists them sorted by name).
CATEGORIES = {
    "results": "1. Results",
    "predictions": "2. Predictions",
    "training": "3. Training",
    "self_check": "4. Numerical self-check of the kernels",
    "profiling": "5. Profiling",
}


class ReportEntry(NamedTuple):
    """How the report shows an output: ``snakemake.io.report``'s arguments."""

    caption: str  # workflow/report/<caption>.rst
    category: str
    subcategory: str | None
    labels: dict[str, str]


def _entry(caption: str, category: str, file: str, sub: str | None = None, **labels: str):
    return ReportEntry(caption, CATEGORIES[category], sub, {**labels, "file": file})


_ON = "runs/{run}/predict_on/{dataset}"  # a run's predictions on another dataset
_RUN = {"sub": "{run}", "run": "{run}"}
_RUN_ON = {"sub": "{run} on {dataset}", "run": "{run}", "dataset": "{dataset}"}
# output, under the work directory -> its entry in the report (`snakemake --report`)
REPORT = {
    "overview.html": _entry("overview", "results", "overview: AAM beside the baselines"),
    "summary.tsv": _entry("summary", "results", "metrics of every run"),
    "software_versions.tsv": _entry("versions", "results", "software versions of every stage"),
    "leaderboard.tsv": _entry("leaderboard", "results", "sweep leaderboard"),
    "cv/{run}.tsv": _entry("cross_validation", "results", "cross-validation of {run}"),
    "learning_curve/{run}.tsv": _entry(
        "learning_curve", "results", "learning curve of {run} (table)"
    ),
    "learning_curve/{run}.<figure>": _entry("learning_curve", "results", "learning curve of {run}"),
    "new_study/{run}.tsv": _entry("new_study", "results", "new study of {run} (table)"),
    "new_study/{run}.<figure>": _entry("new_study", "results", "new study of {run}"),
    "unifrac/{dataset}.{metric}.pcoa/pcoa.<figure>": _entry(
        "pcoa", "results", "PCoA of {dataset} ({metric} UniFrac)"
    ),
    "runs/{run}/predict/predictions.tsv": _entry(
        "predictions", "predictions", "predictions", **_RUN
    ),
    "runs/{run}/predict/metrics.json": _entry("metrics", "predictions", "metrics", **_RUN),
    "runs/{run}/predict/predicted_vs_true.<figure>": _entry(
        "predicted_vs_true", "predictions", "predicted vs true", **_RUN
    ),
    "runs/{run}/ensemble/predictions.tsv": _entry(
        "predictions", "predictions", "ensemble predictions", **_RUN
    ),
    "runs/{run}/ensemble/metrics.json": _entry(
        "metrics", "predictions", "ensemble metrics", **_RUN
    ),
    "runs/{run}/ensemble/predicted_vs_true.<figure>": _entry(
        "predicted_vs_true", "predictions", "ensemble predicted vs true", **_RUN
    ),
    f"{_ON}/predictions.tsv": _entry("predictions_on", "predictions", "predictions", **_RUN_ON),
    f"{_ON}/metrics.json": _entry("metrics_on", "predictions", "metrics", **_RUN_ON),
    f"{_ON}/domain_shift.json": _entry("domain_shift", "predictions", "domain shift", **_RUN_ON),
    "runs/{run}/search/trials.tsv": _entry("search_trials", "training", "search trials", **_RUN),
    "runs/{run}/search/search.<figure>": _entry("search", "training", "search", **_RUN),
    "runs/{run}/search/forest/trials.tsv": _entry(
        "search_trials", "training", "forest search trials", **_RUN
    ),
    "runs/{run}/importance/importance.tsv": _entry(
        "importance", "predictions", "ASV importance", **_RUN
    ),
    "runs/{run}/importance/importance.<figure>": _entry(
        "importance", "predictions", "top ASVs", **_RUN
    ),
    "runs/{run}/pretrain/history.tsv": _entry(
        "history", "training", "history", **_RUN, stage="pretrain"
    ),
    "runs/{run}/finetune/history.tsv": _entry(
        "history", "training", "history", **_RUN, stage="finetune"
    ),
    "runs/{run}/{stage}/history.<figure>": _entry(
        "curves", "training", "curves", **_RUN, stage="{stage}"
    ),
    "validation/golden.json": _entry("validation", "self_check", "golden compare"),
    "profiling/report.html": _entry("profiling", "profiling", "profiling report"),
}


def report_entry(output: str | Path, work: Path) -> ReportEntry:
    """The report entry of ``output`` (a path under ``work``, wildcards unexpanded); a figure's
    key ends in ``.<figure>``, whatever its format."""
    key = Path(output).relative_to(work)
    if key.suffix.removeprefix(".") in FORMATS:
        key = key.with_suffix(".<figure>")
    return REPORT[str(key)]


def final_outputs(plan: Any) -> list[Path]:
    """The targets of rule `all` (``plan``: an ``aam.workflow.plan.Plan``): the data check of
    every dataset (first), the predictions, metrics, figures and training curves of every run,
    its ASV importance and its predictions on other datasets, the ensembles' metrics and
    figures, the summary table and the report's front page, the sweeps' leaderboard, the
    cross-validation tables and learning curves, the UniFrac matrices with their PCoA
    (unifrac.matrix: true) and the golden-file check.

    Every figure is a target: its name follows ``figure_format``, and Snakemake neither
    reruns a job for an output no target asks for nor, while that output has no record,
    compares the job's params or code with its last run's."""
    work, runs, metric = plan.work, list(plan.runs), plan.metric
    fmt = plan.config["figure_format"]
    on = [(run, other) for run, spec in plan.runs.items() for other in spec["predict_on"]]
    return [
        *(work / f"data/{name}/checked.sha256" for name in plan.checked_datasets),
        *(work / f"runs/{run}/predict/predictions.tsv" for run in runs),
        *(work / f"runs/{run}/predict/metrics.json" for run in runs),
        *(work / f"runs/{run}/predict" / figure_name("predicted_vs_true", fmt) for run in runs),
        *(work / f"runs/{run}/finetune" / figure_name("history", fmt) for run in runs),
        *(
            work / f"runs/{run}/pretrain" / figure_name("history", fmt)
            for run in plan.pretraining_runs
        ),
        *(work / f"runs/{run}/importance/importance.tsv" for run in plan.importance_runs),
        *(
            work / f"runs/{run}/importance" / figure_name("importance", fmt)
            for run in plan.importance_runs
        ),
        *(plan.ensemble_metrics(run) for run in plan.ensembles),
        *(
            plan.ensemble_metrics(run).parent / figure_name("predicted_vs_true", fmt)
            for run in plan.ensembles
        ),
        *(
            work / f"runs/{run}/predict_on/{other}/{name}"
            for run, other in on
            for name in ("predictions.tsv", "metrics.json", "domain_shift.json")
        ),
        work / "summary.tsv",
        work / "overview.html",
        *([work / "leaderboard.tsv"] if plan.sweeps else []),
        *(work / f"cv/{run}.tsv" for run in plan.cv),
        *(plan.search_file(run, "search.json") for run in plan.searches),
        *(plan.search_file(run, figure_name("search", fmt)) for run in plan.searches),
        *(work / f"learning_curve/{run}.tsv" for run in plan.curves),
        *(work / "learning_curve" / figure_name(run, fmt) for run in plan.curves),
        *(work / f"new_study/{run}.tsv" for run in plan.new_studies),
        *(work / "new_study" / figure_name(run, fmt) for run in plan.new_studies),
        *(work / f"unifrac/{name}.{metric}.h5" for name in plan.matrix_datasets),
        *(
            work / f"unifrac/{name}.{metric}.pcoa" / figure_name("pcoa", fmt)
            for name in plan.matrix_datasets
        ),
        work / "validation/golden.json",
    ]
