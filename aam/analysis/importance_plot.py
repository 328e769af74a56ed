"""importance.png of `aam importance`: the top ASVs' abundances in the test samples, ordered
by the target, with the target above them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from aam.analysis.baselines import relative_abundances
from aam.analysis.taxonomy import asv_labels
from aam.runtime.figures import pyplot, save_figure
from aam.training.inputs.study import Study

FLOOR = 1e-4  # relative abundance shown for an absent ASV (log scale)


def plot_importance(
    path: Path,
    study: Study,
    test: np.ndarray,
    table: pd.DataFrame,
    top: int,
    spearman: float,
    target: str = "target",
    heading: str = "ASV importance",
) -> None:
    """Heatmap: rows the ``top`` ASVs by AAM's importance (``row_labels``), columns the test
    samples sorted by the target (grouped by class for classes), log10 relative abundance; above
    it the target (``target``: its label, with the unit), with its colour scale; ``heading``
    opens the title (it names the dataset and run)."""
    plt = pyplot()

    rows = table.head(top)
    column = {asv: k for k, asv in enumerate(study.samples.asv_ids)}
    order = test[np.argsort(study.targets[test], kind="stable")]
    abundances = relative_abundances(study.samples, order)[:, [column[a] for a in rows["asv"]]]
    values = np.log10(np.maximum(abundances.toarray().T, FLOOR))
    fig, (strip, heat) = plt.subplots(
        2,
        1,
        figsize=(10, 1.4 + 0.3 * len(rows)),
        sharex=True,
        gridspec_kw={"height_ratios": [1, max(len(rows), 1) / 3]},
    )
    _target_strip(fig, strip, study, study.targets[order], target)
    image = heat.imshow(values, aspect="auto", cmap="magma", vmin=np.log10(FLOOR), vmax=0)
    scored = int(table["forest_scored"].sum())
    heat.set_yticks(range(len(rows)), row_labels(rows, scored, bool(study.classes)))
    heat.tick_params(axis="y", labelsize=7)
    heat.set_xlabel(samples_axis(study.classes, len(order), target))
    label = f"log10 relative abundance (black: absent, drawn at {FLOOR:g})"
    fig.colorbar(image, ax=heat, label=label, fraction=0.03, pad=0.02)
    agreement = "undefined" if not np.isfinite(spearman) else f"{spearman:.2f}"
    strip.set_title(
        f"{heading}: top {len(rows)} ASVs by AAM's; Spearman of AAM's and the forest's "
        f"importance (the forest's candidate ASVs) {agreement}"
    )
    save_figure(fig, path)
    plt.close(fig)


def samples_axis(classes: list[str], n: int, target: str) -> str:
    """The heatmap's x label: the ``n`` test samples ranked by a regression target, grouped by
    a classifier's true class (in the order of ``classes``)."""
    if classes:
        return f"the {n} test samples grouped by their true {target}: {', '.join(classes)}"
    return f"test samples ranked by the target above (1 = lowest, of {n})"


def _target_strip(fig, strip, study: Study, values: np.ndarray, target: str) -> None:
    """The samples' target as one row of colours, with its scale: a colour bar, or one colour
    per class named on it."""
    import matplotlib.pyplot as plt

    if study.classes:
        n = len(study.classes)
        image = strip.imshow(
            values[None, :].astype(float),
            aspect="auto",
            cmap=plt.get_cmap("tab10" if n <= 10 else "viridis", n),
            vmin=-0.5,
            vmax=n - 0.5,
        )
        bar = fig.colorbar(image, ax=strip, fraction=0.03, pad=0.02, ticks=range(n))
        bar.ax.set_yticklabels(study.classes, fontsize=6)
    else:
        image = strip.imshow(values[None, :].astype(float), aspect="auto", cmap="viridis")
        bar = fig.colorbar(image, ax=strip, fraction=0.03, pad=0.02)
        bar.ax.tick_params(labelsize=6)
    bar.set_label(target, fontsize=7)
    strip.set_yticks([0], [target])


def row_labels(rows: pd.DataFrame, scored: int, classifier: bool = False) -> list[str]:
    """Each ASV's name (``aam.analysis.taxonomy.asv_labels``: its deepest confident rank where
    a taxonomy names it, and its short ID), AAM's rank, and the forest's: its rank among the
    ``scored`` ASVs it measured with the score itself, the drop of the forest's test R^2 (its
    accuracy for a ``classifier``) when the ASV is shuffled (negative: shuffling helped), or
    that it was not measured."""
    drop = "accuracy" if classifier else "R²"
    taxa = rows["taxon"].tolist() if rows["taxon"].notna().any() else None
    names = asv_labels(rows["asv_id"].tolist(), taxa)
    labels = []
    for name, (_, row) in zip(names, rows.iterrows(), strict=True):
        if row["forest_scored"]:
            forest = (
                f"forest #{row['forest_rank']} of {scored} ({drop} drop {row['forest_score']:+.2g})"
            )
        else:
            forest = "forest: not measured"
        labels.append(f"{name}  AAM #{row['aam_rank']}, {forest}")
    return labels
