"""PCoA of a UniFrac matrix (scikit-bio's ``pcoa``) for the report, and the files QIIME 2 reads:
the ordination (scikit-bio's ``ordination`` format, importable as ``PCoAResults``) and the
matrix as an lsmat TSV (importable as ``DistanceMatrix``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from aam.runtime.atomic import atomic_output
from aam.runtime.figures import pyplot, save_figure
from aam.unifrac.io import write_distance_matrix

DIMENSIONS = 10  # axes kept: a plot needs 2, QIIME 2's Emperor shows 3
EXACT_UP_TO = 5000  # samples; above, the fast SVD of the leading axes (``method="fsvd"``)
MAX_GROUPS = 10  # groups named in the legend; the others share one grey


def ordinate(ids: Sequence[str], matrix: np.ndarray):
    """scikit-bio OrdinationResults of the leading ``DIMENSIONS`` axes (negative eigenvalues of a
    non-Euclidean matrix are kept out of the explained proportions by scikit-bio)."""
    from skbio import DistanceMatrix
    from skbio.stats.ordination import pcoa

    method = "eigh" if len(ids) <= EXACT_UP_TO else "fsvd"
    dims = min(DIMENSIONS, len(ids) - 1)
    distances = DistanceMatrix(matrix, list(ids), validate=False)
    return pcoa(distances, method=method, dimensions=dims, warn_neg_eigval=False, seed=0)


def plot_ordination(path: Path, result, groups: pd.Series | None, title: str) -> None:
    """PC1 against PC2, each axis with its share of the variance; a colour per group (the
    largest ``MAX_GROUPS``, then "other"); ``path``'s suffix is its format."""
    plt = pyplot()

    coords = result.samples
    explained = result.proportion_explained
    fig, ax = plt.subplots(figsize=(6.5, 5))
    if groups is None:
        ax.scatter(coords.iloc[:, 0], coords.iloc[:, 1], s=10, alpha=0.7)
    else:
        labels = groups.reindex(coords.index).fillna("unknown").astype(str).to_numpy()
        names, counts = np.unique(labels, return_counts=True)
        largest = list(names[np.argsort(-counts, kind="stable")][:MAX_GROUPS])
        for k, name in enumerate(largest):
            mask = labels == name
            ax.scatter(
                coords.iloc[mask, 0],
                coords.iloc[mask, 1],
                s=10,
                alpha=0.7,
                color=plt.get_cmap("tab10")(k),
                label=f"{name} ({mask.sum()})",
            )
        rest = ~np.isin(labels, largest)
        if rest.any():
            ax.scatter(
                coords.iloc[rest, 0],
                coords.iloc[rest, 1],
                s=10,
                alpha=0.7,
                color="lightgrey",
                label=f"other ({rest.sum()})",
            )
        ax.legend(title=groups.name, fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_xlabel(f"PC1 ({100 * explained.iloc[0]:.1f}% of the variance)")
    ax.set_ylabel(f"PC2 ({100 * explained.iloc[1]:.1f}% of the variance)")
    ax.set_title(title)
    fig.tight_layout()
    save_figure(fig, path)


def write_ordination(path: Path, result) -> None:
    """The ordination in scikit-bio's text format, atomically."""
    with atomic_output(path) as tmp:
        result.write(str(tmp), format="ordination")


def write_lsmat(path: Path, ids: Sequence[str], matrix: np.ndarray) -> None:
    """The matrix as the lsmat TSV QIIME 2 imports (``qiime tools import --type
    DistanceMatrix``)."""
    write_distance_matrix(path, ids, matrix)
