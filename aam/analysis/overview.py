"""The landing page (`aam overview`): when and from what the results were made, then per run
the test-split metrics of AAM beside the baselines' with their 95% intervals, AAM minus each
baseline with its paired interval, a one-line verdict against the forest that reads what AAM
reads, and the run's figures inline; then each stage's provenance, the config, and a link to
every file the run wrote (``aam.analysis.workdir_index`` finds them).

Plain HTML written here, not datavzrd: the page needs no tool beyond the image's Python, renders
inline in Snakemake's report (an iframe) and offline on a cluster, and its content is tested.
"""

from __future__ import annotations

import hashlib
import html
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aam.analysis.class_section import balance_warnings, class_html
from aam.analysis.figures import IN_TARGET_UNITS, METRIC_NAMES
from aam.analysis.interval_cell import cell
from aam.analysis.methods import methods_html
from aam.analysis.prediction_tables import (
    MICROBIOME,
    inputs_text,
    model_label,
    resampled_text,
    scores_classes,
)
from aam.analysis.search_section import search_html
from aam.analysis.spread import near_constant_notes
from aam.analysis.workdir_index import Figure, StageRecord
from aam.training.config import LOWER_IS_BETTER
from aam.training.meters.events import EVENTS_DIR

# What each top folder of the work directory holds (the page lists only those that exist).
OUTPUT_FOLDERS = {
    ".": "this page, summary.tsv (every run's test metrics beside the baselines', one row per "
    "run), leaderboard.tsv (each sweep's runs ranked on validation), software_versions.tsv, "
    "citations.bib (the Methods' references) and Snakemake's report.html",
    "data": "per dataset: the staged table, tree and metadata, split.tsv and the checks' manifests",
    "unifrac": "UniFrac distance matrices (<dataset>.<metric>.h5) and their PCoA "
    "(<dataset>.<metric>.pcoa/: the figure, ordination.txt, lsmat distance-matrix.tsv)",
    "baselines": "the baselines' predictions of every sample (<dataset>.tsv), each row naming "
    "its model's inputs",
    "runs": "per run: pretrain/ (encoder.pt, history), finetune/ (model.pt, history, "
    "summary.json: the epoch chosen on validation), predict/ (test-split predictions.tsv, "
    "metrics.json, the predicted-vs-true figure), importance/, predict_on/<dataset>/",
    "cv": "a cross-validated run's metrics per fold, their mean and sd",
    "learning_curve": "a run's test metrics against its training samples, the baselines' beside",
    "validation": "numerical self-check of the model's kernels on this device (golden.json)",
    "profiling": "kernel profile and report.html (target profiling_report)",
    "logs": "each job's log",
    "benchmarks": "each job's wall time and memory",
}
# The forests, in the order the headline verdict looks for one reading what AAM reads.
FORESTS = ("random_forest_covariates_baseline", "random_forest_baseline")


def headline_baseline(metrics: Mapping) -> str:
    """The forest with AAM's inputs (metrics.json ``inputs``): the one given the covariates
    when AAM read them; the random forest when none matches (the verdict then says so)."""
    inputs = metrics.get("inputs", {})
    same = [f for f in FORESTS if f in inputs and inputs[f] == inputs.get("model")]
    return same[0] if same else FORESTS[-1]


@dataclass(frozen=True)
class RunMetrics:
    """One run's metrics.json content (``aam predict``) and what names it."""

    run: str
    dataset: str
    metrics: Mapping
    cost: Mapping | None = None  # ``workdir_index.training_cost`` of its training jobs
    search: Mapping | None = None  # ``search_section.search_summaries``: its search, if any
    samples: str | None = None  # how its dataset's table and metadata met (samples.json line)


def ensemble_members(metrics: Mapping) -> list[str]:
    """The runs an ensemble's metrics.json averages (its models are
    ``runs/<run>/finetune/model.pt``); none for one model."""
    return [Path(model).parent.parent.name for model in metrics.get("ensemble", [])]


def cost_text(result: RunMetrics) -> str:
    """The training cost of a run (of every member of an ensemble) in words."""
    cost, members = result.cost, ensemble_members(result.metrics)
    if not cost:
        return "training cost: no benchmark files"
    whose = f"its {len(members)} members ({', '.join(members)})" if members else "its"
    return (
        f"training cost of {whose} pretraining and fine-tuning jobs ({cost['jobs']}): "
        f"{cost['wall_s'] / 3600:.2f} job hours (GPU hours for one-GPU jobs), "
        f"{cost['cpu_s'] / 3600:.2f} CPU hours"
    )


def verdict(metrics: Mapping, baseline: str | None = None, group: str | None = None) -> str:
    """One sentence: is AAM better than ``baseline`` (default: ``headline_baseline``) on the
    first metric, by the paired 95% interval of their difference? Against a model of the
    microbiome (a forest) only when both read the same inputs (metrics.json ``inputs``): AAM
    given covariates the forest lacks gets no verdict against it."""
    baseline = baseline or headline_baseline(metrics)
    differences = metrics.get("differences", {}).get(baseline)
    if not differences:
        return f"no paired comparison with the {_label(baseline, metrics, group)} in this run"
    key, difference = next(iter(differences.items()))
    name, other = METRIC_NAMES.get(key, key), _label(baseline, metrics, group)
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
    better = _better(key, low, high)
    if better is None:
        return f"No clear difference in {name}: {span} includes 0."
    return f"AAM is {'better' if better else 'worse'} than the {other} in {name}: {span}."


def _label(section: str, metrics: Mapping, group: str | None = None) -> str:
    """``model_label`` of a model of ``metrics`` (a classifier's constants by what they
    predict)."""
    return model_label(section, group, scores_classes(metrics.get("model", {})))


def resampled(metrics: Mapping) -> str:
    """What a run's bootstrap draws resample (``predictions.resampled_text``)."""
    return resampled_text(metrics["n"], metrics.get("interval_groups"))


def _better(key: str, low: float, high: float) -> bool | None:
    """Whether AAM is better on metric ``key`` by the paired interval [low, high] of AAM minus
    a baseline; None where the interval includes 0."""
    if low <= 0 <= high:
        return None
    return (high < 0) == (key in LOWER_IS_BETTER)


def beats(metrics: Mapping, baseline: str) -> bool:
    """AAM is better than ``baseline`` on the first metric: the paired 95% interval of their
    difference excludes 0 on the better side."""
    differences = metrics.get("differences", {}).get(baseline)
    if not differences:
        return False
    key, difference = next(iter(differences.items()))
    value, (low, high) = difference["value"], difference["interval"]
    return value is not None and low is not None and _better(key, low, high) is True


def best_constant(metrics: Mapping) -> str:
    """The constant baseline AAM must beat: of the training mean and median (regression; the
    median is the best constant under MAE), the one better on the first metric on these test
    samples; the mean where there is no median (classifiers, older metrics)."""
    constants = [k for k in ("mean_baseline", "median_baseline") if k in metrics]
    if len(constants) < 2 or "model" not in metrics:
        return "mean_baseline"
    key = next(iter(metrics["model"]))
    values = {k: metrics[k].get(key) for k in constants}
    if any(v is None for v in values.values()):
        return "mean_baseline"
    pick = min if key in LOWER_IS_BETTER else max
    return pick(constants, key=lambda k: values[k])


def skill_caveat(metrics: Mapping) -> str | None:
    """One sentence where AAM did not beat the better training constant (``best_constant``:
    its skill is not shown, so an importance of it ranks noise); None where it did."""
    constant = best_constant(metrics)
    if beats(metrics, constant):
        return None
    return (
        f"AAM did not beat the {_label(constant, metrics)} on its test split "
        f"({verdict(metrics, constant).rstrip('.')}): its ASV importance is that of a "
        "model without shown skill."
    )


def glance_table(results: Sequence[RunMetrics]) -> str:
    """Every scored run (and ensemble) in one table, so they compare at a glance: AAM's first
    metric, its inputs, the headline forest's and their paired difference, each with its 95%
    interval; "" when no run was scored."""
    rows = []
    for result in results:
        metrics = result.metrics
        if "model" not in metrics:
            continue
        key = next(iter(metrics["model"]))
        forest = headline_baseline(metrics)
        difference = metrics.get("differences", {}).get(forest, {}).get(key)
        inputs = metrics.get("inputs", {})
        cells = [
            html.escape(result.run),
            html.escape(inputs_text(inputs["model"])) if "model" in inputs else "not recorded",
            html.escape(_metric_header(key, metrics)),
            cell(metrics["model"][key], metrics["intervals"]["model"].get(key)),
            cell(metrics.get(forest, {}).get(key), metrics["intervals"].get(forest, {}).get(key)),
            cell(difference["value"], difference["interval"], signed=True)
            if difference
            else "none",
            html.escape(resampled(metrics)),
        ]
        rows.append("<tr>" + "".join(f"<td class=l>{c}</td>" for c in cells) + "</tr>")
    if not rows:
        return ""
    header = "".join(
        f"<th>{h}</th>"
        for h in (
            "run",
            "AAM reads",
            "metric",
            "AAM",
            "the forest with its inputs",
            "AAM - forest",
            "intervals resample",
        )
    )
    note = (
        "Each value: the test-split estimate [its 95% bootstrap interval], over the draws the "
        "last column names (whole groups where the split kept them whole); AAM - forest: the "
        "paired difference on the same samples and draws [its 95% interval]."
    )
    return (
        f"<h2>At a glance</h2><table><tr>{header}</tr>{''.join(rows)}</table>"
        f"<p class=note>{note}</p>"
    )


def run_section(result: RunMetrics) -> str:
    """The HTML of one run: its table and its verdicts, with a warning line for each model
    whose predictions are near-constant (metrics.json ``spread``)."""
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
    header = "".join(f"<th>{html.escape(_metric_header(k, metrics))}</th>" for k in keys)
    rows = []
    inputs = metrics.get("inputs", {})
    for section in sections:
        intervals = metrics["intervals"].get(section, {})
        read = html.escape(inputs_text(inputs[section])) if section in inputs else "not recorded"
        cells = f"<td class=l>{read}</td>" + "".join(
            f"<td>{cell(metrics[section].get(k), intervals.get(k))}</td>" for k in keys
        )
        rows.append(f"<tr><th>{html.escape(_label(section, metrics, group))}</th>{cells}</tr>")
    for section, differences in metrics.get("differences", {}).items():
        cells = "<td class=l></td>" + "".join(
            f"<td>{cell(d['value'], d['interval'], signed=True)}</td>" for d in differences.values()
        )
        name = f"AAM - {_label(section, metrics, group)}"
        rows.append(f"<tr class=diff><th>{html.escape(name)}</th>{cells}</tr>")
    verdicts = "".join(
        f"<li>{html.escape(verdict(metrics, section, group))}</li>"
        for section in metrics.get("differences", {})
    )
    note = html.escape(
        f"{metrics['n']} test samples; [95% bootstrap interval over {resampled(metrics)}]; the "
        "rows 'AAM - ...' are paired differences (the same bootstrap draws for both); inputs: "
        "what each model read."
    )
    caveat = skill_caveat(metrics)
    constant = "".join(
        f"<p class=warn>{html.escape(note)}</p>" for note in near_constant_notes(metrics, group)
    )
    return (
        f"{title}<p class=verdict>{html.escape(verdict(metrics, group=group))}</p>"
        f"{constant}{samples_note(result)}{split_note(metrics)}{balance_warnings(metrics)}"
        f"<table><tr><th>model</th><th class=l>inputs</th>{header}</tr>{''.join(rows)}</table>"
        f"<p class=note>{note}</p><ul>{verdicts}</ul>{group_table(metrics)}{class_html(metrics)}"
        f"{search_html(result.search)}"
        f"<p class=note>{html.escape(cost_text(result))}</p>"
        + (f"<p class=warn>{html.escape(caveat)}</p>" if caveat else "")
    )


def samples_note(result: RunMetrics) -> str:
    """How the run's dataset's table and metadata met (rule check_data's count), if known."""
    return f"<p class=note>Samples: {html.escape(result.samples)}</p>" if result.samples else ""


def _metric_header(key: str, metrics: Mapping) -> str:
    """A metric's column header: its name, its unit where the target has one and the metric
    is in it, and which way is better."""
    unit = metrics.get("target_unit") if key in IN_TARGET_UNITS else None
    better = "lower" if key in LOWER_IS_BETTER else "higher"
    return f"{METRIC_NAMES.get(key, key)}{f' ({unit})' if unit else ''}, {better} is better"


def split_note(metrics: Mapping) -> str:
    """Whether the test samples' groups were seen in training (metrics.json ``split_groups``):
    a warning where a group is on both sides of the split, or nothing without groups."""
    split = metrics.get("split_groups")
    if not split:
        return ""
    column, shared = html.escape(str(split["column"])), split["in_training"]
    if not shared:
        return (
            f"<p class=note>Split: none of the {split['test_groups']} {column} groups of the "
            "test samples has training samples: the scores are on new groups.</p>"
        )
    samples = f"{split['test_samples_in_trained_groups']} of {split['test_samples']}"
    return (
        f"<p class=warn>Split: {len(shared)} of the {split['test_groups']} {column} groups of "
        f"the test samples also have training samples ({samples} test samples): the scores "
        "partly measure recognising those groups. datasets.&lt;name&gt;.split_group_column: "
        f"{column} keeps every group on one side.</p>"
    )


MAX_GROUP_ROWS = 15


def group_table(metrics: Mapping) -> str:
    """The first metric of every model per group (``by_group``, largest groups first), or
    nothing without groups."""
    groups, column = metrics.get("by_group"), metrics.get("group_column")
    if not groups:
        return ""
    sections = [k for k in groups[0] if k == "model" or k.endswith("_baseline")]
    key = next(iter(groups[0]["model"]))
    header = "".join(f"<th>{html.escape(_label(s, metrics, column))}</th>" for s in sections)
    rows = "".join(
        f"<tr><th>{html.escape(str(g['group']))}</th><td>{g['n']}</td>"
        + "".join(f"<td>{cell(g[s].get(key), None)}</td>" for s in sections)
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
    "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:80em}"
    "table{border-collapse:collapse;margin:.5em 0;display:block;overflow-x:auto;max-width:100%}"
    "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}td code{overflow-wrap:anywhere}"
    "tr th:first-child{text-align:left}tr.diff{background:#f3f6fb}"
    ".ci{color:#666;font-size:.9em}.verdict{font-weight:bold}.note{color:#555;font-size:.9em}"
    ".warn{color:#a33;font-size:.9em}"
    "small{font-weight:normal;color:#555}td.l,th.l{text-align:left}"
    "figure{margin:1em 0}figure img{max-width:100%;border:1px solid #ddd}"
    "figcaption{font-size:.9em;color:#444}"
    "pre{background:#f6f6f6;padding:.6em;overflow-x:auto}"
)


@dataclass(frozen=True)
class Page:
    """Everything on the page: the runs (with their figures), the stages' provenance records,
    the config files (path, text), the work directory's files by folder, when it was made,
    what the workflow left out, the work directory as named, the training docs' link and the
    Methods' BibTeX file."""

    runs: Sequence[tuple[RunMetrics, Sequence[Figure]]]
    stages: Sequence[StageRecord] = ()
    configs: Sequence[tuple[str, str]] = ()
    files: Mapping[str, Sequence[str]] = field(default_factory=dict)
    made: str = ""
    notes: Sequence[str] = ()  # what the workflow left out, and why
    workdir: str = "."  # the page's folder, as the command was given it
    docs: str = ""  # docs/training.md relative to the page; "" where the checkout has none
    citations: str = ""  # the Methods' BibTeX file relative to the page; "" where none is written


def tensorboard_html(page: Page) -> str:
    """How to follow the runs' training curves in TensorBoard (their event files are under
    ``runs/``), with a link to the docs where the page can reach them; "" without runs."""
    if "runs" not in page.files:
        return ""
    logdir = html.escape(shlex.quote(str(Path(page.workdir) / "runs")))
    where = "docs/training.md, Following a run"
    docs = f"<a href='{html.escape(page.docs)}#following-a-run'>{where}</a>" if page.docs else where
    return (
        "<p class=note>Training curves of every run, per epoch and while it trains: "
        f"<code>.venv/bin/tensorboard --logdir {logdir}</code> from the checkout "
        "(<code>tensorboard</code> in the container), then open localhost:6006; the event files "
        f"are in runs/&lt;run&gt;/&lt;stage&gt;/{EVENTS_DIR}/ ({docs}).</p>"
    )


def figures_html(figures: Sequence[Figure]) -> str:
    """The figures inline, each as wide as the page allows (a wide figure of several panels
    stays readable) and a link to its file: click it to see it at full size, offline (PDF: the
    link only)."""
    out = []
    for fig in figures:
        href = html.escape(fig.path)
        link = f"<a href='{href}'>{href}</a>"
        image = (
            f"<a href='{href}'><img src='{fig.data_uri}' alt='{html.escape(fig.title)}'></a>"
            if fig.data_uri
            else ""
        )
        out.append(
            f"<figure>{image}<figcaption>{html.escape(fig.title)}: {link}</figcaption></figure>"
        )
    return f"<div>{''.join(out)}</div>" if out else ""


def made_from(stages: Sequence[StageRecord]) -> str:
    """One sentence: the commits (dirty or not), devices and software the stages ran with."""
    if not stages:
        return "No provenance records found."
    records = [s.record for s in stages]

    def kinds(key: str) -> str:
        return ", ".join(sorted({str(r.get(key)) for r in records}))

    containers = kinds("container_image")
    commits = sorted(
        {f"{r.get('git_commit') or 'unknown'}{' (dirty)' if r.get('git_dirty') else ''}"
         for r in records}
    )  # fmt: skip
    return (
        f"{len(records)} stages, from commit {', '.join(commits)}; device {kinds('device')}; "
        f"python {kinds('python')}, torch {kinds('torch')}; "
        + (f"container {containers}" if containers != "None" else "no container")
    )


def software_versions(stages: Sequence[StageRecord]) -> list[tuple[str, str, int]]:
    """(name, version, stages) of the python, packages and tools each stage's record names (as
    its job read them), one row per version seen, sorted by name: two rows of one name say the
    stages ran different versions."""
    seen: Counter[tuple[str, str]] = Counter()
    for stage in stages:
        record = stage.record
        named = {"python": record.get("python"), "torch": record.get("torch")}
        named.update(record.get("packages") or {})
        named.update(record.get("tools") or {})
        seen.update((str(name), str(version)) for name, version in named.items() if version)
    return [(name, version, n) for (name, version), n in sorted(seen.items(), key=_by_name)]


def _by_name(item: tuple[tuple[str, str], int]) -> tuple[str, str]:
    (name, version), _ = item
    return name.lower(), version


def software_html(stages: Sequence[StageRecord]) -> str:
    """The software versions table (``software_versions``)."""
    rows = "".join(
        f"<tr><td class=l>{html.escape(name)}</td><td class=l>{html.escape(version)}</td>"
        f"<td>{n} of {len(stages)}</td></tr>"
        for name, version, n in software_versions(stages)
    )
    header = "<tr><th>software</th><th>version</th><th>stages</th></tr>"
    return f"<table>{header}{rows}</table>" if rows else "<p>No provenance records found.</p>"


def stages_html(stages: Sequence[StageRecord]) -> str:
    """Each stage's record: where, its command line, code fingerprint, device, finish time."""
    rows = "".join(
        f"<tr><td class=l><a href='{html.escape(s.path)}'>{html.escape(s.path)}</a></td>"
        f"<td class=l><code>{html.escape(shlex.join(map(str, s.record.get('command', []))))}"
        f"</code></td><td>{html.escape(str(s.record.get('code_fingerprint')))}</td>"
        f"<td class=l>{html.escape(str(s.record.get('device')))}</td>"
        f"<td>{html.escape(str(s.record.get('finished')))}</td></tr>"
        for s in stages
    )
    names = ("record", "command", "code", "device", "finished")
    header = "<tr>" + "".join(f"<th>{n}</th>" for n in names) + "</tr>"
    return f"<table>{header}{rows}</table>" if rows else "<p>No provenance records found.</p>"


def configs_html(configs: Sequence[tuple[str, str]]) -> str:
    """Each config file: its path, its sha256, its text (folded)."""
    out = []
    for path, text in configs:
        digest = hashlib.sha256(text.encode()).hexdigest()
        out.append(
            f"<p><code>{html.escape(path)}</code> sha256 <code>{digest}</code></p>"
            f"<details><summary>the config</summary><pre>{html.escape(text)}</pre></details>"
        )
    return "".join(out) or "<p>No config file given.</p>"


def files_html(files: Mapping[str, Sequence[str]]) -> str:
    """Every file, by top folder with what the folder holds; large folders folded."""
    out = []
    for folder, paths in files.items():
        what = html.escape(OUTPUT_FOLDERS.get(folder, ""))
        links = "".join(f"<li><a href='{html.escape(p)}'>{html.escape(p)}</a></li>" for p in paths)
        name = "top folder" if folder == "." else f"{folder}/"
        summary = f"<code>{html.escape(name)}</code> ({len(paths)} files) {what}"
        opened = " open" if len(paths) <= 12 else ""
        out.append(f"<details{opened}><summary>{summary}</summary><ul>{links}</ul></details>")
    return "".join(out)


def overview_html(page: Page) -> str:
    """The whole page."""
    runs = "".join(run_section(result) + figures_html(figs) for result, figs in page.runs)
    skipped = "".join(f"<p class=warn>Left out: {html.escape(note)}</p>" for note in page.notes)
    made = html.escape(f"Made {page.made}. " if page.made else "") + html.escape(
        made_from(page.stages)
    )
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>AAM results</title>"
        f"<style>{STYLE}</style></head><body><h1>AAM results: test split</h1>"
        f"<p class=note>{made}</p>{skipped}{tensorboard_html(page)}"
        f"{glance_table([result for result, _ in page.runs])}{runs}"
        f"<h2>How they were made</h2>{methods_html(software_versions(page.stages), page.citations)}"
        f"{stages_html(page.stages)}<h2>Software</h2><p class=note>aam and each dependency it "
        "declares that a stage imported, the Snakemake that ran the stage and each tool it ran, "
        f"with its version, as the stage's job read them.</p>{software_html(page.stages)}"
        f"<h2>Config</h2>{configs_html(page.configs)}"
        f"<h2>Files</h2>{files_html(page.files)}</body></html>\n"
    )
