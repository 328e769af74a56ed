"""predicted_vs_true.<format> of `aam predict`: one panel per model (the model and its baselines).

A regression target gets predicted-vs-true scatter plots on shared axes, coloured by group when
groups are given, above the residuals (predicted - true) against the truth; a categorical target
gets confusion matrices (true class by row, predicted class by column) above one-vs-rest ROC
curves. When no predicted sample can be scored, the figure says why, so the file a run declares
always exists. Axis labels give the target's unit, the title the dataset and the run.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from aam.analysis.figures import target_label, title
from aam.analysis.prediction_tables import model_label
from aam.runtime.figures import pyplot, save_figure


def plot_predictions(
    path: Path,
    models: dict[str, np.ndarray],
    truth: pd.Series | None,
    target: dict,
    no_metrics: str | None = None,
    groups: pd.Series | None = None,
    *,
    unit: str | None = None,
    dataset: str | None = None,
    run: str | None = None,
) -> None:
    """Write ``path`` (its suffix the format): scatter and residual panels (regression, the
    target in ``unit``; coloured by ``groups``), confusion matrices (``target["classes"]``), or
    the reason there is nothing to plot (``no_metrics``); titled with ``dataset`` and ``run``."""
    plt = pyplot()

    column, classes = target["column"], target["classes"]
    if no_metrics is not None or truth is None:
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, f"no metrics:\n{no_metrics}", ha="center", va="center", wrap=True)
    elif classes:
        fig = _confusion_panels(plt, models, truth, classes, column)
    else:
        fig = _scatter_panels(plt, models, truth, column, groups, unit)
    fig.suptitle(title(f"AAM and the baselines on {column}, test samples", dataset, run))
    fig.tight_layout()
    save_figure(fig, path)


def _scatter_panels(
    plt,
    models: dict[str, np.ndarray],
    truth: pd.Series,
    column: str,
    groups: pd.Series | None,
    unit: str | None = None,
):
    """Predicted vs true of the samples with a known value, one column per model, and below
    each its residuals against the truth; a colour per group (the largest ``MAX_GROUPS``
    named in the legend, the others grey)."""
    known = truth.notna().to_numpy()
    y = truth[known].to_numpy(dtype=np.float64)
    panels = {name: values[known] for name, values in models.items()}
    fig, axes = plt.subplots(
        2,
        len(panels),
        figsize=(4 * len(panels), 7.6),
        sharex=True,
        sharey="row",
        squeeze=False,
        gridspec_kw={"height_ratios": [3, 2]},
    )
    colours = _group_colours(plt, None if groups is None else groups[known], len(y))
    values = np.concatenate([y, *panels.values()])
    pad = 0.03 * (float(values.max()) - float(values.min()) or 1.0)
    lo, hi = float(values.min()) - pad, float(values.max()) + pad
    for k, (name, predicted) in enumerate(panels.items()):
        top, bottom = axes[0][k], axes[1][k]
        for label, (mask, colour) in colours.items():
            top.scatter(y[mask], predicted[mask], s=10, alpha=0.7, color=colour, label=label)
            bottom.scatter(y[mask], predicted[mask] - y[mask], s=8, alpha=0.7, color=colour)
        top.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
        bottom.axhline(0, color="grey", linewidth=1)
        top.set_xlim(lo, hi)
        top.set_ylim(lo, hi)
        bottom.set_xlabel(f"true {target_label(column, unit)}")
        mae = float(np.abs(y - predicted).mean())
        in_unit = f" {unit}" if unit else ""
        label = textwrap.fill(model_label(name, _name(groups)), TITLE_WIDTH)
        top.set_title(f"{label}\nn={len(y)}, MAE {mae:.2f}{in_unit}", fontsize=9)
    axes[0][0].set_ylabel(f"predicted {target_label(column, unit)}")
    axes[1][0].set_ylabel(f"residual: predicted - true{f' ({unit})' if unit else ''}")
    if groups is not None:
        axes[0][-1].legend(title=groups.name, fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    return fig


MAX_GROUPS = 10  # groups named in a legend; the others share one grey
TITLE_WIDTH = 34  # characters of a panel title's line: a 4-inch panel at 9 points holds them


def _group_colours(plt, groups: pd.Series | None, n: int) -> dict[str, tuple[np.ndarray, object]]:
    """Legend label -> (mask over the ``n`` samples, colour): one entry without groups; else
    the largest ``MAX_GROUPS`` groups by size, then the rest as "other"."""
    if groups is None:
        return {"": (np.ones(n, dtype=bool), "C0")}
    labels = groups.to_numpy()
    names, counts = np.unique(labels, return_counts=True)
    largest = [str(n) for n in names[np.argsort(-counts, kind="stable")][:MAX_GROUPS]]
    palette = plt.get_cmap("tab10")
    colours = {g: (labels == g, palette(k)) for k, g in enumerate(largest)}
    rest = ~np.isin(labels, largest)
    if rest.any():
        colours["other"] = (rest, "lightgrey")
    return colours


def _name(groups: pd.Series | None) -> str | None:
    return None if groups is None else str(groups.name)


def _confusion_panels(
    plt, models: dict[str, np.ndarray], truth: pd.Series, classes: list[str], column: str
):
    """Confusion matrix of the samples whose class the model knows, one column per model
    (``models`` hold log-probabilities over ``classes``), each cell's count (0 too) in black or
    white as its shade needs (``text_colour``), and below it the one-vs-rest ROC
    curve of each class with positive and negative samples (the largest ``MAX_GROUPS``)."""
    from sklearn.metrics import roc_auc_score, roc_curve

    lookup = {label: k for k, label in enumerate(classes)}
    true_index = truth.astype(str).map(lookup)
    known = truth.notna().to_numpy() & true_index.notna().to_numpy()
    y = true_index[known].to_numpy(dtype=np.int64)
    k = len(classes)
    size = max(4.0, 0.5 * k + 2)
    fig, axes = plt.subplots(2, len(models), figsize=(size * len(models), 2 * size), squeeze=False)
    counts_of = np.bincount(y, minlength=k)
    curves = [c for c in np.argsort(-counts_of, kind="stable") if 0 < counts_of[c] < len(y)]
    for ax, roc, (name, values) in zip(axes[0], axes[1], models.items(), strict=True):
        predicted = values[known].argmax(axis=1)
        counts = np.zeros((k, k), dtype=np.int64)
        np.add.at(counts, (y, predicted), 1)
        image = ax.imshow(counts, cmap="Blues", vmin=0, vmax=max(int(counts.max()), 1))
        for (row, col), count in np.ndenumerate(counts):
            colour = text_colour(image.cmap(image.norm(count)))
            ax.text(col, row, str(count), ha="center", va="center", fontsize=8, color=colour)
        ax.set_xticks(range(k), classes, rotation=90, fontsize=7)
        ax.set_yticks(range(k), classes, fontsize=7)
        ax.set_xlabel(f"predicted {column}")
        accuracy = float((predicted == y).mean())
        label = textwrap.fill(model_label(name, classifier=True), TITLE_WIDTH)
        ax.set_title(f"{label}\nn={len(y)}, accuracy {accuracy:.2f}", fontsize=9)
        for c in curves[:MAX_GROUPS]:
            scores = values[known][:, c]
            fpr, tpr, _ = roc_curve(y == c, scores)
            auc = roc_auc_score(y == c, scores)
            roc.plot(fpr, tpr, linewidth=1, label=f"{classes[c]} (AUC {auc:.2f})")
        roc.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
        roc.set_xlabel("false positive rate")
        roc.set_title("one-vs-rest ROC", fontsize=9)
        roc.legend(fontsize=6, loc="lower right")
    axes[1][0].set_ylabel("true positive rate")
    axes[0][0].set_ylabel(f"true {column}")
    return fig


def text_colour(background: tuple[float, ...]) -> str:
    """Black on a light cell, white on a dark one (``background``: RGBA, its relative
    luminance below one half is dark)."""
    red, green, blue = background[:3]
    return "white" if 0.2126 * red + 0.7152 * green + 0.0722 * blue < 0.5 else "black"
