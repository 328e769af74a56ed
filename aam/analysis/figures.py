"""The words of figures and table headers: the target with its unit ("age (years)"), a metric
of it ("MAE of age (years)"), titles that name the dataset and the run, never a file; and the
flags that give them (``add_label_arguments``). How figures are written:
``aam.runtime.figures``."""

from __future__ import annotations

import argparse

IN_TARGET_UNITS = frozenset({"mae", "rmse"})  # metrics measured in the target's unit
METRIC_NAMES = {  # metrics.json's key -> a reader's name
    "mae": "MAE",
    "rmse": "RMSE",
    "r2": "R²",
    "accuracy": "accuracy",
    "f1": "macro F1",  # the mean of the classes' F1
    "auc": "AUC",
}


def target_label(target: str, unit: str | None = None) -> str:
    """The target with its unit: ``age (years)``; the name alone without a unit."""
    return f"{target} ({unit})" if unit else target


def metric_label(metric: str, target: str, unit: str | None = None) -> str:
    """A metric of the target: ``MAE of age (years)``; R², accuracy, F1 and AUC have no unit."""
    name = METRIC_NAMES.get(metric, metric)
    return f"{name} of {target_label(target, unit if metric in IN_TARGET_UNITS else None)}"


def title(what: str, dataset: str | None = None, run: str | None = None) -> str:
    """A figure's title: ``demo, run tiny: what`` (the run left out when named as its
    dataset, both when not given)."""
    names = [dataset] if dataset else []
    if run and run != dataset:
        names.append(f"run {run}")
    return f"{', '.join(names)}: {what}" if names else what


def add_label_arguments(parser: argparse.ArgumentParser, unit: bool = True) -> None:
    """``--dataset`` and ``--run`` (named in titles) and, with ``unit``, ``--target-unit``."""
    parser.add_argument("--dataset", help="the dataset's name, for titles")
    parser.add_argument("--run", help="the run's name, for titles")
    if unit:
        parser.add_argument(
            "--target-unit", help="the target's unit (e.g. years), in axis labels and headers"
        )
