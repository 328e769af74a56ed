"""predicted_vs_true.png of `aam predict`: one panel per model (the model and its baselines).

A regression target gets predicted-vs-true scatter plots on shared axes; a categorical target
gets confusion matrices (true class by row, predicted class by column). When no predicted sample
can be scored, the figure says why, so the file a run declares always exists.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from aam.atomic import atomic_output


def plot_predictions(
    path: Path,
    models: dict[str, np.ndarray],
    truth: pd.Series | None,
    target: dict,
    no_metrics: str | None = None,
) -> None:
    """Write ``path``: scatter panels (regression), confusion matrices (``target["classes"]``),
    or the reason there is nothing to plot (``no_metrics``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    column, classes = target["column"], target["classes"]
    if no_metrics is not None or truth is None:
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, f"no metrics:\n{no_metrics}", ha="center", va="center", wrap=True)
    elif classes:
        fig = _confusion_panels(plt, models, truth, classes, column)
    else:
        fig = _scatter_panels(plt, models, truth, column)
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)


def _scatter_panels(plt, models: dict[str, np.ndarray], truth: pd.Series, column: str):
    """Predicted vs true of the samples with a known value, one panel per model."""
    known = truth.notna().to_numpy()
    y = truth[known].to_numpy(dtype=np.float64)
    panels = {name: values[known] for name, values in models.items()}
    fig, axes = plt.subplots(
        1, len(panels), figsize=(4 * len(panels), 4.2), sharex=True, sharey=True, squeeze=False
    )
    values = np.concatenate([y, *panels.values()])
    lo, hi = float(values.min()), float(values.max())
    for ax, (name, predicted) in zip(axes[0], panels.items(), strict=True):
        ax.scatter(y, predicted, s=10, alpha=0.7)
        ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
        ax.set_xlabel(f"true {column}")
        mae = float(np.abs(y - predicted).mean())
        ax.set_title(f"{_label(name)}: n={len(y)}, MAE {mae:.2f}")
    axes[0][0].set_ylabel(f"predicted {column}")
    return fig


def _confusion_panels(
    plt, models: dict[str, np.ndarray], truth: pd.Series, classes: list[str], column: str
):
    """Confusion matrix of the samples whose class the model knows, one panel per model
    (``models`` hold log-probabilities over ``classes``)."""
    lookup = {label: k for k, label in enumerate(classes)}
    true_index = truth.astype(str).map(lookup)
    known = truth.notna().to_numpy() & true_index.notna().to_numpy()
    y = true_index[known].to_numpy(dtype=np.int64)
    k = len(classes)
    size = max(4.0, 0.5 * k + 2)
    fig, axes = plt.subplots(1, len(models), figsize=(size * len(models), size), squeeze=False)
    for ax, (name, values) in zip(axes[0], models.items(), strict=True):
        predicted = values[known].argmax(axis=1)
        counts = np.zeros((k, k), dtype=np.int64)
        np.add.at(counts, (y, predicted), 1)
        ax.imshow(counts, cmap="Blues")
        for (row, col), count in np.ndenumerate(counts):
            if count:
                ax.text(col, row, str(count), ha="center", va="center", fontsize=8)
        ax.set_xticks(range(k), classes, rotation=90, fontsize=7)
        ax.set_yticks(range(k), classes, fontsize=7)
        ax.set_xlabel(f"predicted {column}")
        accuracy = float((predicted == y).mean())
        ax.set_title(f"{_label(name)}: n={len(y)}, accuracy {accuracy:.2f}")
    axes[0][0].set_ylabel(f"true {column}")
    return fig


def _label(model: str) -> str:
    return model.removesuffix("_baseline")
