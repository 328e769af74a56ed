"""A classifier's run on the landing page (metrics.json of `aam predict`,
``aam.analysis.class_report``): the samples of each class in each split, with a warning where
validation or test holds one class; each class's precision, recall and F1 of every model; and
each test group's (person's) samples, true class and how every model did on them."""

from __future__ import annotations

import html
from collections.abc import Mapping

from aam.analysis.class_report import CLASS_METRICS, one_class_splits
from aam.analysis.interval_cell import cell
from aam.analysis.prediction_tables import model_label

SPLIT_NAMES = {"train": "training", "val": "validation", "test": "test"}
MAX_TEST_GROUPS = 30  # rows of the per-group table; metrics.json holds every group


def _models(row: Mapping) -> list[str]:
    return [k for k in row if k == "model" or k.endswith("_baseline")]


def balance_warnings(metrics: Mapping) -> str:
    """A warning line per validation or test split of one class (``class_balance``)."""
    balance = metrics.get("class_balance") or {}
    out = []
    for name in one_class_splits(balance):
        counts = html.escape(", ".join(f"{c} {n}" for c, n in balance[name].items()))
        use = (
            "the epoch kept was chosen on it"
            if name == "val"
            else "the test accuracy is the share of that one class called right"
        )
        out.append(
            f"<p class=warn>The {SPLIT_NAMES[name]} split holds one class only ({counts}): "
            f"{use}, and its AUC is undefined.</p>"
        )
    return "".join(out)


def balance_table(metrics: Mapping) -> str:
    """The samples of each class in each split (``class_balance``)."""
    balance = metrics.get("class_balance")
    if not balance:
        return ""
    classes = list(next(iter(balance.values())))
    header = "".join(f"<th>{html.escape(c)}</th>" for c in classes)
    rows = "".join(
        f"<tr><th>{SPLIT_NAMES.get(name, html.escape(name))}</th>"
        + "".join(f"<td>{counts[c]}</td>" for c in classes)
        + f"<td>{sum(counts.values())}</td></tr>"
        for name, counts in balance.items()
    )
    return (
        f"<h3>Samples of each class by split</h3><table><tr><th>split</th>{header}"
        f"<th>samples</th></tr>{rows}</table>"
    )


def per_class_table(metrics: Mapping) -> str:
    """Each class's precision, recall and F1 of every model with their intervals
    (``per_class``)."""
    rows = metrics.get("per_class")
    if not rows:
        return ""
    models = _models(rows[0])
    header = "".join(f"<th>{name}</th>" for name in CLASS_METRICS.values())
    body = []
    for row in rows:
        for k, name in enumerate(models):
            first = (
                f"<th rowspan={len(models)}>{html.escape(row['class'])}"
                f"<br><small>{row['n']} test samples</small></th>"
                if k == 0
                else ""
            )
            scores, intervals = row[name], row["intervals"][name]
            cells = "".join(f"<td>{cell(scores[m], intervals[m])}</td>" for m in CLASS_METRICS)
            label = html.escape(model_label(name, metrics.get("group_column"), classifier=True))
            body.append(f"<tr>{first}<th class=l>{label}</th>{cells}</tr>")
    note = (
        "Each class against the rest: precision (of the samples called the class, the share "
        "that are), recall (of the class's samples, the share called it) and F1; the macro F1 "
        "above is the mean of the classes' F1. [95% interval over the same bootstrap draws]; "
        "undefined: a class never called (precision) or absent (recall)."
    )
    return (
        "<h3>Per class: precision, recall, F1</h3>"
        f"<table><tr><th>class</th><th class=l>model</th>{header}</tr>{''.join(body)}</table>"
        f"<p class=note>{html.escape(note)}</p>"
    )


def group_accuracy_table(metrics: Mapping) -> str:
    """Per test group (``by_test_group``): its samples, true class, AAM's mean probability of
    the true class and every model's accuracy."""
    groups = metrics.get("by_test_group")
    if not groups:
        return ""
    column = html.escape(str((metrics.get("interval_groups") or {}).get("column", "group")))
    models = _models(groups[0])
    labels = [model_label(m, metrics.get("group_column"), classifier=True) for m in models]
    header = "".join(f"<th>{html.escape(label)}: accuracy</th>" for label in labels)
    rows = "".join(
        f"<tr><th>{html.escape(str(g['group']))}</th><td>{g['n']}</td>"
        f"<td class=l>{html.escape(_true(g['true']))}</td>"
        f"<td>{g['model']['true_class_probability']:.2f}</td>"
        + "".join(f"<td>{g[m]['accuracy']:.2f}</td>" for m in models)
        + "</tr>"
        for g in groups[:MAX_TEST_GROUPS]
    )
    more = len(groups) - MAX_TEST_GROUPS
    rest = f"<p class=note>{more} more in metrics.json (by_test_group)</p>" if more > 0 else ""
    note = (
        f"The split kept each {column} whole: the test score rests on these {len(groups)}, each "
        "with all its samples (the intervals above resample them whole)."
    )
    return (
        f"<h3>Accuracy by test {column}</h3><table><tr><th>{column}</th><th>samples</th>"
        f"<th class=l>true class</th><th>AAM's mean probability of the true class</th>"
        f"{header}</tr>{rows}</table>{rest}<p class=note>{html.escape(note)}</p>"
    )


def _true(counts: Mapping[str, int]) -> str:
    """A group's true class, or its classes with their samples where it has several."""
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{c} {n}" for c, n in counts.items())


def class_html(metrics: Mapping) -> str:
    """A classifier's tables: class balance, per class, per test group ("" for a regression)."""
    return balance_table(metrics) + per_class_table(metrics) + group_accuracy_table(metrics)
