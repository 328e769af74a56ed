"""The report's front page (`aam overview`): per run, the test-split metrics of AAM beside the
baselines' with their 95% intervals, AAM minus each baseline with its paired interval and a
one-line verdict against the random forest; then what each output folder holds.

Plain HTML written here, not datavzrd: the page needs no tool beyond the image's Python, renders
inline in Snakemake's report (an iframe) and offline on a cluster, and its content is tested.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aam.analysis.predictions import MICROBIOME, inputs_text, model_label
from aam.training.config import LOWER_IS_BETTER

# What a reader finds where, relative to the workflow's workdir.
OUTPUT_FOLDERS = {
    "overview.html": "this page",
    "summary.tsv": "every run's test metrics beside the baselines', one row per run",
    "leaderboard.tsv": "each sweep's runs ranked on validation (the test split beside it)",
    "cv/<run>.tsv": "a cross-validated run's metrics per fold, their mean and sd",
    "learning_curve/<run>.tsv, .png": "a run's test metrics against its training samples "
    "(learning_curve: nested fractions of them), the baselines' beside",
    "data/<dataset>/": "the staged table, tree and metadata, split.tsv and the checks' manifests",
    "unifrac/": "UniFrac distance matrices (<dataset>.<metric>.h5) and their PCoA "
    "(<dataset>.<metric>.pcoa/: pcoa.png, ordination.txt, lsmat distance-matrix.tsv)",
    "baselines/": "the baselines' predictions of every sample (<dataset>.tsv)",
    "runs/<run>/pretrain/": "the pretrained encoder (encoder.pt), history.tsv, checkpoints/",
    "runs/<run>/finetune/": "the fine-tuned model (model.pt), history.tsv/.png, summary.json "
    "(the epoch chosen on validation)",
    "runs/<run>/predict/": "test-split predictions.tsv, metrics.json, predicted_vs_true.png",
    "runs/<run>/importance/": "each ASV's importance to AAM and to the forest "
    "(importance.tsv, .json, .png)",
    "runs/<run>/predict_on/<dataset>/": "predictions of another dataset, domain_shift.json",
    "validation/golden.json": "numerical self-check of the model's kernels on this device",
    "profiling/": "kernel profile and report.html (target profiling_report)",
    "logs/, benchmarks/": "each job's log, wall time and memory",
}
METRIC_NAMES = {
    "mae": "MAE",
    "rmse": "RMSE",
    "r2": "R²",
    "accuracy": "accuracy",
    "f1": "F1",
    "auc": "AUC",
}
HEADLINE_BASELINE = "random_forest_baseline"


@dataclass(frozen=True)
class RunMetrics:
    """One run's metrics.json content (``aam predict``) and what names it."""

    run: str
    dataset: str
    metrics: Mapping


def verdict(metrics: Mapping, baseline: str = HEADLINE_BASELINE, group: str | None = None) -> str:
    """One sentence: is AAM better than ``baseline`` on the first metric, by the paired 95%
    interval of their difference? Against a model of the microbiome (the forest) only when
    both read the same inputs (metrics.json ``inputs``): AAM given covariates the forest lacks
    gets no verdict against it."""
    differences = metrics.get("differences", {}).get(baseline)
    if not differences:
        return f"no paired comparison with the {model_label(baseline, group)} in this run"
    key, difference = next(iter(differences.items()))
    name, other = METRIC_NAMES.get(key, key), model_label(baseline, group)
    inputs = metrics.get("inputs", {})
    mine, theirs = inputs.get("model"), inputs.get(baseline)
    if mine is not None and theirs is not None and MICROBIOME in theirs and mine != theirs:
        return (
            f"AAM ({inputs_text(mine)}) and the {other} ({inputs_text(theirs)}) read different "
            "inputs: no like-for-like verdict (their paired difference is in the table)."
        )
    value, (low, high) = difference["value"], difference["interval"]
    if value is None or low is None:
        return f"AAM - {other}: {name} undefined on these samples"
    span = f"AAM - {other} = {value:+.3g} (95% interval {low:+.3g} to {high:+.3g})"
    if low <= 0 <= high:
        return f"No clear difference in {name}: {span} includes 0."
    aam_lower = high < 0
    better = aam_lower == (key in LOWER_IS_BETTER)
    return f"AAM is {'better' if better else 'worse'} than the {other} in {name}: {span}."


def _cell(value: float | None, interval: Sequence | None, signed: bool = False) -> str:
    form = "+.3g" if signed else ".3g"
    if value is None or not math.isfinite(value):
        return "undefined"
    low, high = interval or (None, None)
    span = "" if low is None else f" <span class=ci>[{low:{form}}, {high:{form}}]</span>"
    return f"{value:{form}}{span}"


def run_section(result: RunMetrics) -> str:
    """The HTML of one run: its table and its verdicts."""
    metrics = result.metrics
    group = metrics.get("group_column")
    title = (
        f"<h2>run {html.escape(result.run)} <small>dataset {html.escape(result.dataset)}, "
        f"target {html.escape(str(metrics.get('target')))}</small></h2>"
    )
    if "model" not in metrics:
        reason = metrics.get("no_metrics", "no metrics")
        return f"{title}<p>Not scored: {html.escape(str(reason))}</p>"
    sections = [k for k in metrics if k == "model" or k.endswith("_baseline")]
    keys = list(metrics["model"])
    header = "".join(
        f"<th>{METRIC_NAMES.get(k, k)} ({'lower' if k in LOWER_IS_BETTER else 'higher'} "
        "is better)</th>"
        for k in keys
    )
    rows = []
    for section in sections:
        intervals = metrics["intervals"].get(section, {})
        cells = "".join(
            f"<td>{_cell(metrics[section].get(k), intervals.get(k))}</td>" for k in keys
        )
        rows.append(f"<tr><th>{html.escape(model_label(section, group))}</th>{cells}</tr>")
    for section, differences in metrics.get("differences", {}).items():
        cells = "".join(
            f"<td>{_cell(d['value'], d['interval'], signed=True)}</td>"
            for d in differences.values()
        )
        name = f"AAM - {model_label(section, group)}"
        rows.append(f"<tr class=diff><th>{html.escape(name)}</th>{cells}</tr>")
    verdicts = "".join(
        f"<li>{html.escape(verdict(metrics, section, group))}</li>"
        for section in metrics.get("differences", {})
    )
    note = html.escape(
        f"{metrics['n']} test samples; [95% bootstrap interval]; the rows 'AAM - ...' are "
        "paired differences (the same bootstrap draws for both)."
        + _inputs_sentence(metrics.get("inputs", {}), group)
    )
    return (
        f"{title}<p class=verdict>{html.escape(verdict(metrics, group=group))}</p>"
        f"<table><tr><th>model</th>{header}</tr>{''.join(rows)}</table>"
        f"<p class=note>{note}</p><ul>{verdicts}</ul>{group_table(metrics)}"
    )


def _inputs_sentence(inputs: Mapping, group: str | None) -> str:
    """`` Inputs: AAM microbiome + site; ...`` (nothing for a metrics.json without them)."""
    if not inputs:
        return ""
    named = "; ".join(f"{model_label(k, group)}: {inputs_text(v)}" for k, v in inputs.items())
    return f" Inputs: {named}."


MAX_GROUP_ROWS = 15


def group_table(metrics: Mapping) -> str:
    """The first metric of every model per group (``by_group``, largest groups first), or
    nothing without groups."""
    groups, column = metrics.get("by_group"), metrics.get("group_column")
    if not groups:
        return ""
    sections = [k for k in groups[0] if k == "model" or k.endswith("_baseline")]
    key = next(iter(groups[0]["model"]))
    header = "".join(f"<th>{html.escape(model_label(s, column))}</th>" for s in sections)
    rows = "".join(
        f"<tr><th>{html.escape(str(g['group']))}</th><td>{g['n']}</td>"
        + "".join(f"<td>{_cell(g[s].get(key), None)}</td>" for s in sections)
        + "</tr>"
        for g in groups[:MAX_GROUP_ROWS]
    )
    more = len(groups) - MAX_GROUP_ROWS
    rest = f"<p class=note>{more} smaller groups in metrics.json (by_group)</p>" if more > 0 else ""
    name = html.escape(f"{METRIC_NAMES.get(key, key)} by {column}")
    return (
        f"<h3>{name}</h3><table><tr><th>{html.escape(str(column))}</th><th>n</th>{header}</tr>"
        f"{rows}</table>{rest}"
    )


STYLE = (
    "body{font-family:sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}"
    "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}"
    "tr th:first-child{text-align:left}tr.diff{background:#f3f6fb}"
    ".ci{color:#666;font-size:.9em}.verdict{font-weight:bold}.note{color:#555;font-size:.9em}"
    "small{font-weight:normal;color:#555}"
)


def overview_html(results: Sequence[RunMetrics]) -> str:
    """The whole page."""
    folders = "".join(
        f"<tr><th><code>{html.escape(path)}</code></th><td style='text-align:left'>"
        f"{html.escape(what)}</td></tr>"
        for path, what in OUTPUT_FOLDERS.items()
    )
    runs = "".join(run_section(result) for result in results)
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>AAM results</title>"
        f"<style>{STYLE}</style></head><body><h1>AAM results: test split</h1>{runs}"
        f"<h2>Output folders</h2><table>{folders}</table></body></html>\n"
    )
