"""importance.png of `aam importance`: the top ASVs' abundances in the test samples, ordered
by the target, with the target above them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from aam.analysis.baselines import relative_abundances
from aam.runtime.atomic import atomic_output
from aam.training.study import Study

FLOOR = 1e-4  # relative abundance shown for an absent ASV (log scale)


def plot_importance(
    path: Path, study: Study, test: np.ndarray, table: pd.DataFrame, top: int, spearman: float
) -> None:
    """Heatmap: rows the ``top`` ASVs by AAM's importance, columns the test samples sorted by
    the target (class index for classes), log10 relative abundance."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = table.head(top)
    column = {asv: k for k, asv in enumerate(study.samples.asv_ids)}
    order = test[np.argsort(study.targets[test], kind="stable")]
    abundances = relative_abundances(study.samples, order)[:, [column[a] for a in rows["asv"]]]
    values = np.log10(np.maximum(abundances.toarray().T, FLOOR))
    fig, (strip, heat) = plt.subplots(
        2,
        1,
        figsize=(10, 1.2 + 0.3 * len(rows)),
        sharex=True,
        gridspec_kw={"height_ratios": [1, max(len(rows), 1) / 3]},
    )
    strip.imshow(study.targets[order][None, :].astype(float), aspect="auto", cmap="viridis")
    strip.set_yticks([0], ["target"])
    image = heat.imshow(values, aspect="auto", cmap="magma", vmin=np.log10(FLOOR), vmax=0)
    labels = [
        f"{asv[:12]}... AAM #{a}, forest #{f}" if len(asv) > 15 else f"{asv} AAM #{a}, forest #{f}"
        for asv, a, f in zip(rows["asv"], rows["aam_rank"], rows["forest_rank"], strict=True)
    ]
    heat.set_yticks(range(len(rows)), labels, fontsize=7)
    heat.set_xlabel(f"{len(order)} test samples, by increasing target")
    fig.colorbar(image, ax=heat, label="log10 relative abundance", fraction=0.03)
    agreement = "undefined" if not np.isfinite(spearman) else f"{spearman:.2f}"
    strip.set_title(
        f"top {len(rows)} ASVs by AAM's importance; Spearman of AAM's and the forest's "
        f"importance (the forest's candidate ASVs): {agreement}"
    )
    with atomic_output(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
