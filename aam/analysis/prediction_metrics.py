"""The metrics of predictions against the truth (metrics.json): each model's with bootstrap
intervals (over whole groups where a split kept them whole), AAM minus each baseline, per
class, per group and per test group, and the few lines `aam predict` prints of them."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from aam.analysis.baselines import CONSTANTS
from aam.analysis.class_report import by_test_group, per_class
from aam.analysis.prediction_tables import model_label, resampled_text, scores_classes
from aam.analysis.spread import one_class_predictions, prediction_spread
from aam.errors import NonFiniteError
from aam.training.bootstrap import BOOTSTRAP_RESAMPLES, bootstrap_intervals, paired_differences
from aam.training.metrics import classification_metrics, regression_metrics

log = logging.getLogger(__name__)


def metrics_lines(metrics: dict) -> list[str]:
    """metrics.json as a few lines: each scored model (AAM first, then the baselines) with
    its metrics and their 95% intervals, then AAM minus each baseline with its paired
    interval; none without metrics."""
    names = [k for k in metrics if k == "model" or k.endswith("_baseline")]
    if not names:
        return []
    group, classifier = metrics.get("group_column"), scores_classes(metrics.get("model", {}))
    width = max(len(model_label(name, group, classifier)) for name in names)
    lines = [f"metrics of {metrics['n']} samples ({metrics['target']}), 95% bootstrap intervals:"]
    for name in names:
        cells = []
        for key, value in metrics[name].items():
            low, high = metrics["intervals"][name].get(key) or (None, None)
            interval = "" if low is None else f" [{low:.3g}, {high:.3g}]"
            cells.append(f"{key} {_number(value)}{interval}")
        lines.append(f"  {model_label(name, group, classifier):<{width}}  " + ", ".join(cells))
    for name, differences in metrics.get("differences", {}).items():
        cells = []
        for key, difference in differences.items():
            value, (low, high) = difference["value"], difference["interval"]
            interval = "" if low is None else f" [{low:+.3g}, {high:+.3g}]"
            cells.append(f"{key} {'undefined' if value is None else f'{value:+.3g}'}{interval}")
        lines.append(f"  AAM - {model_label(name, group, classifier)}: " + ", ".join(cells))
    return lines


def _number(value: float | None) -> str:
    return "undefined" if value is None or not math.isfinite(value) else f"{value:.3g}"


def score_predictions(
    models: dict[str, np.ndarray],
    truth: pd.Series | None,
    target: dict,
    metadata_path: Path,
    ids: list[str],
    groups: pd.Series | None = None,
    clusters: pd.Series | None = None,
) -> dict:
    """metrics.json content: each model's metrics on the samples with a known truth and their
    bootstrap intervals (over whole ``clusters`` where given: the groups a split kept whole),
    AAM minus each baseline (paired intervals), for a regression how much each model's
    predictions vary beside the target (``spread``, ``aam.analysis.spread``), for a classifier
    each class's scores (``per_class``) and with ``clusters`` each test group's
    (``by_test_group``, ``aam.analysis.class_report``), with ``groups``
    each model's metrics per group (``by_group``), and which samples were left out and why
    (``excluded``); without any known truth ``no_metrics`` says why. NonFiniteError when a
    metric is not finite."""
    column = target["column"]
    if truth is None:
        reason = f"{metadata_path} has no column {column!r}"
        return {"n": 0, "target": column, "no_metrics": reason, "excluded": {}}
    lookup = {c: k for k, c in enumerate(target["classes"])}
    known, excluded = _scorable(truth, lookup, ids)
    if not known.any():
        log.info("%s: no sample has a known %s: no metrics", metadata_path, column)
        reason = f"no predicted sample has a {column!r} value the model can be scored on"
        return {"n": 0, "target": column, "no_metrics": reason, "excluded": excluded}
    if lookup:
        y = truth[known].astype(str).map(lookup).to_numpy(dtype=np.int64)

        def score(values: np.ndarray, idx: np.ndarray) -> dict[str, float]:
            return classification_metrics(torch.from_numpy(values[idx]), y[idx])
    else:
        y = truth[known].to_numpy(dtype=np.float64)
        for constant in CONSTANTS:  # without --baselines, those the model file records
            if constant in target:
                models.setdefault(f"{constant}_baseline", np.full(len(known), target[constant]))

        def score(values: np.ndarray, idx: np.ndarray) -> dict[str, float]:
            return regression_metrics(values[idx], y[idx])

    everything = np.arange(len(y))
    metrics = {"n": int(known.sum()), "target": column, "excluded": excluded}
    units = None if clusters is None else clusters[known].to_numpy()
    intervals = {}
    for name, values in models.items():
        metrics[name] = score(values[known], everything)
        _check_metrics(metrics[name], name, metadata_path, column)
        intervals[name] = bootstrap_intervals(
            lambda idx, v=values[known]: score(v, idx), len(y), units
        )
    metrics["intervals"] = intervals
    if units is not None:
        metrics["interval_groups"] = {"column": clusters.name, "n": len(set(units.tolist()))}
    whole = " (the split kept them whole)" if units is not None else ""
    metrics["interval_note"] = (
        f"95% percentile bootstrap over {resampled_text(len(y), metrics.get('interval_groups'))}"
        f"{whole} ({BOOTSTRAP_RESAMPLES} resamples, the same for every model)"
    )
    baselines = {name: v[known] for name, v in models.items() if name != "model"}
    metrics["differences"] = paired_differences(
        score, models["model"][known], baselines, len(y), units
    )
    metrics["difference_note"] = (
        "AAM minus each baseline on the same samples, with the 95% interval of the difference "
        "over the same bootstrap draws (paired): an interval that excludes 0 is a difference"
    )
    if lookup:
        scored = {name: v[known] for name, v in models.items()}
        metrics["per_class"] = per_class(scored, y, target["classes"], units)
        constants = {f"{name}_baseline" for name in CONSTANTS}
        varying = {k: v for k, v in scored.items() if k not in constants}
        metrics["one_class"] = one_class_predictions(varying, target["classes"])
        if units is not None:
            metrics["by_test_group"] = by_test_group(scored, y, units, target["classes"])
    else:  # how much each model's predictions vary, but the constants'
        constants = {f"{name}_baseline" for name in CONSTANTS}
        varying = {k: v[known] for k, v in models.items() if k not in constants}
        metrics["spread"] = prediction_spread(varying, y)
    if groups is not None:
        metrics["group_column"] = groups.name
        metrics["by_group"] = _by_group(score, models, known, groups[known].to_numpy())
    fitted = (
        "mean = the majority class (the training class frequencies: its prediction is the "
        "most frequent training class)"
        if lookup
        else "mean = the training mean, median = the training median"
    )
    metrics["baseline_note"] = (
        f"baselines are fitted on the training samples: {fitted}, random_forest = a random "
        "forest on relative abundances (aam baselines)"
    )
    return metrics


def _scorable(truth: pd.Series, lookup: dict[str, int], ids: list[str]) -> tuple[np.ndarray, dict]:
    """Which samples can be scored (a truth value; for a classifier, a class the model knows)
    and, by reason, the IDs of those that cannot."""
    known = truth.notna().to_numpy()
    excluded = {}
    if not known.all():
        excluded["no_target_value"] = [ids[k] for k in np.flatnonzero(~known)]
    if lookup:
        unseen = known & truth.astype(str).map(lookup).isna().to_numpy()
        if unseen.any():
            labels = truth.astype(str).to_numpy()
            excluded["class_not_in_training"] = {
                label: [ids[k] for k in np.flatnonzero(unseen & (labels == label))]
                for label in sorted(set(labels[unseen]))
            }
        known = known & ~unseen
    return known, excluded


def _by_group(
    score: Callable, models: dict[str, np.ndarray], known: np.ndarray, labels: np.ndarray
) -> list[dict]:
    """Each model's metrics per group of the scored samples (``labels``: their groups),
    largest group first."""
    return [
        {
            "group": group,
            "n": int((labels == group).sum()),
            **{
                name: score(v[known], np.flatnonzero(labels == group)) for name, v in models.items()
            },
        }
        for group in sorted(set(labels), key=lambda g: (-(labels == g).sum(), g))
    ]


def _check_metrics(metrics: dict, part: str, metadata_path: Path, column: str) -> None:
    """NonFiniteError for a non-finite metric. An undefined R^2 (every true value equal) or
    AUC (one class only) is allowed: metrics.json records it as null."""
    bad = [k for k, v in metrics.items() if not math.isfinite(v) and k not in ("r2", "auc")]
    if bad:
        raise NonFiniteError(
            f"{metadata_path}: {part} {', '.join(bad)} not finite (the {column!r} values or "
            "their errors overflow); rescale the column or check its values"
        )
