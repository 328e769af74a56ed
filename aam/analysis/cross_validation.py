"""Cross-validation table: each fold's test metrics, the model's and the baselines', from the
folds' metrics.json (``aam predict``), and their mean and standard deviation over the folds."""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aam.errors import InputError
from aam.runtime.atomic import atomic_output


def fold_table(folds: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: ``fold, n, <model>_<metric>...`` with one row per fold (1..K, in the
    given order), then ``mean`` and ``sd`` (sample standard deviation, K - 1) over the folds.

    Each fold is the content of its metrics.json; its models are the keys of ``intervals``
    (``model``, ``mean_baseline``, ...), in that order, and every fold must have the same
    models and metrics. A metric undefined in a fold (null: R^2 with one true value, AUC with
    one class) is ``NA``, and so are its mean and sd.
    """
    if len(folds) < 2:
        raise InputError(f"{len(folds)} fold(s): cross-validation needs at least 2")
    columns = [_columns(fold) for fold in folds]
    for k, found in enumerate(columns[1:], start=2):
        if found != columns[0]:
            raise InputError(
                f"fold {k}: metrics {found} differ from fold 1's {columns[0]}; "
                "predict every fold with the same baselines"
            )
    if not columns[0]:
        raise InputError("fold 1: metrics.json has no model metrics; predict with known targets")
    header = ["fold", "n", *(f"{model}_{metric}" for model, metric in columns[0])]
    values = [
        [_value(fold, k, model, metric) for model, metric in columns[0]]
        for k, fold in enumerate(folds, start=1)
    ]
    rows = [
        [str(k), str(fold["n"]), *map(_cell, row)]
        for k, (fold, row) in enumerate(zip(folds, values, strict=True), start=1)
    ]
    sizes = [float(fold["n"]) for fold in folds]
    for name, statistic in (("mean", statistics.fmean), ("sd", statistics.stdev)):
        summary = [
            None if None in column else statistic(column) for column in zip(*values, strict=True)
        ]
        rows.append([name, _cell(statistic(sizes)), *map(_cell, summary)])
    return header, rows


def _columns(fold: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(model, metric) of a fold's metrics.json, models in the order of its ``intervals``."""
    models = fold.get("intervals") or {}
    return [(model, metric) for model in models for metric in fold.get(model) or {}]


def _value(fold: Mapping[str, Any], k: int, model: str, metric: str) -> float | None:
    """A fold's metric: a finite number or None (undefined); InputError otherwise."""
    value = fold[model][metric]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(
            f"fold {k}: {model} {metric} is {value!r}, not a finite number; "
            "rerun aam predict for that fold"
        )
    return float(value)


def _cell(value: float | None) -> str:
    return "NA" if value is None else format(value, ".6g")


def read_test_metrics(path: Path, what: str) -> dict[str, Any]:
    """The content of a metrics.json of `aam predict` that has test metrics; InputError naming
    the file and ``what`` it is (``fold 2``, ``point 0.25``) otherwise."""
    try:
        content = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        reason = " ".join(str(err).split())[:120]
        raise InputError(f"{path}: not a metrics.json ({reason}); run aam predict") from None
    if not isinstance(content, dict) or "n" not in content:
        raise InputError(
            f"{path}: no metrics ({what} has no test sample with a known target); "
            "predict with --subset test on its split"
        )
    return content


def write_fold_table(metrics_files: Sequence[Path], output: Path) -> int:
    """Read each fold's metrics.json (fold k = the k-th file) and write the table; rows."""
    folds = [read_test_metrics(path, f"fold {k}") for k, path in enumerate(metrics_files, start=1)]
    header, rows = fold_table(folds)
    with atomic_output(output) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return len(rows)
