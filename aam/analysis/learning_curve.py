"""Learning curve: the test metrics of the model and of the baselines, with their intervals,
against the number of training samples, from each point's split (`aam split
--train-fraction`) and metrics.json (`aam predict`). Every point has the same test samples."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from aam.analysis.cross_validation import read_test_metrics
from aam.analysis.figures import metric_label, title
from aam.analysis.prediction_tables import SCRATCH, model_label, scores_classes
from aam.data.split import read_split
from aam.errors import InputError
from aam.runtime.figures import pyplot

FIRST_COLUMNS = ["fraction", "n_train", "n_val", "n_test"]


def curve_table(
    fractions: Sequence[float],
    splits: Sequence[Path],
    metrics_files: Sequence[Path],
    scratch_files: Sequence[Path] = (),
) -> pd.DataFrame:
    """One row per point, fractions ascending: ``fraction, n_train, n_val, n_test``, then
    ``<model>_<metric>`` and its interval ``<model>_<metric>_low/_high`` for every model of the
    metrics (``model``, then ``scratch``: the model of ``scratch_files``, AAM fine-tuned from a
    random initialisation on the same points, when given; then ``<baseline>_baseline``).
    InputError when the points' test samples, or their models and metrics, differ, or a metric
    is not finite."""
    if not len(fractions) == len(splits) == len(metrics_files) >= 2:
        raise InputError(
            f"{len(fractions)} fractions, {len(splits)} splits, {len(metrics_files)} metrics: "
            "a learning curve needs one split and one metrics.json per fraction, at least 2"
        )
    if scratch_files and len(scratch_files) != len(fractions):
        raise InputError(
            f"{len(scratch_files)} from-scratch metrics for {len(fractions)} fractions: give one "
            "per fraction, in the same order"
        )
    scratches = scratch_files or [None] * len(fractions)
    points = zip(fractions, splits, metrics_files, scratches, strict=True)
    rows, tests = [], []
    for fraction, split_path, path, scratch in sorted(points, key=lambda point: point[0]):
        labels = read_split(split_path)
        tests.append(set(labels.index[labels == "test"]))
        metrics = read_test_metrics(path, f"point {fraction:g}")
        row = {
            "fraction": fraction,
            "n_train": int((labels == "train").sum()),
            "n_val": int((labels == "val").sum()),
            "n_test": metrics["n"],  # the test samples scored: those with a known target
        }
        scored = [(path, metrics, model) for model in metrics.get("intervals") or {}]
        if scratch is not None:
            theirs = read_test_metrics(scratch, f"from-scratch point {fraction:g}")
            if theirs["n"] != metrics["n"]:
                raise InputError(
                    f"{scratch}: {theirs['n']} test samples scored, {path}: {metrics['n']}; "
                    "the from-scratch curve must be scored on the same test samples"
                )
            scored.insert(1, (scratch, theirs, "model"))
        for source, found, model in scored:
            name = SCRATCH if source == scratch else model
            intervals = found["intervals"][model]
            for metric, value in found[model].items():
                low, high = intervals.get(metric) or (None, None)
                for suffix, number in (("", value), ("_low", low), ("_high", high)):
                    row[f"{name}_{metric}{suffix}"] = _finite(number, source, name, metric)
        rows.append(row)
    if any(test != tests[0] for test in tests):
        raise InputError(
            f"{', '.join(map(str, splits))}: the points' test samples differ; a learning curve "
            "compares fractions on one test split (make each split from the same split file)"
        )
    columns = [list(row) for row in rows]
    if any(found != columns[0] for found in columns):
        raise InputError(
            f"{', '.join(map(str, metrics_files))}: the points' models or metrics differ; "
            "predict every point with the same baselines"
        )
    return pd.DataFrame(rows, columns=columns[0])


def _finite(value: object, path: Path, model: str, metric: str) -> float | None:
    """A metric, its bound, or None (undefined: R^2 of one true value); InputError otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(
            f"{path}: {model} {metric} is {value!r}, not a finite number; rerun aam predict"
        )
    return float(value)


def models_of(table: pd.DataFrame) -> list[str]:
    """The models of a curve table, in its column order (the model first)."""
    metric = headline_metric(table)
    return [c.removesuffix(f"_{metric}") for c in table.columns if c.endswith(f"_{metric}")]


def headline_metric(table: pd.DataFrame) -> str:
    """The metric a curve is drawn in: the first of the model's (MAE, or accuracy)."""
    first = table.columns[len(FIRST_COLUMNS)]
    return first.removeprefix("model_")


def per_doubling(table: pd.DataFrame, metric: str) -> dict[str, float]:
    """Each model's least-squares slope of ``metric`` against log2 of the training samples:
    its change per doubling of the training set over the measured points."""
    x = np.log2(table["n_train"].to_numpy(dtype=np.float64))
    slopes = {}
    for model in models_of(table):
        y = table[f"{model}_{metric}"].to_numpy(dtype=np.float64)
        known = np.isfinite(y)
        if known.sum() >= 2 and np.ptp(x[known]) > 0:
            slopes[model] = float(np.polyfit(x[known], y[known], 1)[0])
    return slopes


def interval_lines(ax, table: pd.DataFrame, x: str, columns: dict[str, str]) -> None:
    """On ``ax``, one line per ``label -> column`` of ``table`` against column ``x`` (log
    scale, a tick per row), its ``_low``/``_high`` interval as error bars, the lines side by
    side at each x."""
    for k, (label, column) in enumerate(columns.items()):
        values = table[column].astype(float)
        errors = [values - table[f"{column}_low"], table[f"{column}_high"] - values]
        shifted = table[x] * (1 + 0.025 * k)
        ax.errorbar(shifted, values, yerr=errors, marker="o", capsize=3, label=label)
    ax.set_xscale("log")
    ax.set_xticks(table[x], [str(n) for n in table[x]])
    ax.minorticks_off()


def curve_figure(
    table: pd.DataFrame,
    target: str,
    group_column: str | None = None,
    unit: str | None = None,
    dataset: str | None = None,
    run: str | None = None,
):
    """Test metric (in the target's ``unit``) against training samples (log scale), one line
    per model, 95% intervals as error bars; titled with ``dataset`` and ``run``."""
    plt = pyplot()

    metric = headline_metric(table)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    classifier = scores_classes([metric])
    columns = {model_label(m, group_column, classifier): f"{m}_{metric}" for m in models_of(table)}
    interval_lines(ax, table, "n_train", columns)
    ax.set_xlabel("training samples (log scale)")
    ax.set_ylabel(f"test {metric_label(metric, target, unit)}")
    what = f"learning curve ({int(table['n_test'].iloc[0])} test samples, 95% intervals)"
    ax.set_title(title(what, dataset, run))
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
