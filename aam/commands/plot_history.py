"""`aam plot-history`: training curves from a history.tsv (for the workflow report)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from aam.atomic import atomic_output, check_output_path
from aam.errors import InputError

SERIES = (
    ("loss", "loss"),
    ("unifrac_loss", "UniFrac fit (MSE)"),
    ("mae", "MAE"),
    ("nuc_accuracy", "masked-nucleotide accuracy"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam plot-history`."""
    parser.add_argument("--history", required=True, type=Path, help="history.tsv of a stage")
    parser.add_argument("--output", required=True, type=Path, help="PNG to write")


def run(args: argparse.Namespace) -> None:
    """One panel per measured series; train and validation curves per epoch."""
    if not args.history.is_file():
        raise InputError(f"{args.history}: history not found; train first")
    check_output_path(args.output, "plot")
    history = read_history(args.history)
    panels = [
        (key, title)
        for key, title in SERIES
        if f"train_{key}" in history or f"val_{key}" in history
    ]
    if history.empty or not panels:
        raise InputError(f"{args.history}: no epochs recorded; train first")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.2), squeeze=False)
    for ax, (key, title) in zip(axes[0], panels, strict=True):
        for split in ("train", "val"):
            if f"{split}_{key}" in history:
                ax.plot(history["epoch"], history[f"{split}_{key}"], marker="o", label=split)
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.legend()
    fig.tight_layout()
    with atomic_output(args.output) as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)


def read_history(path: Path) -> pd.DataFrame:
    """The history table; InputError when it is not a tab-separated table with an epoch column."""
    try:
        history = pd.read_csv(path, sep="\t")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        reason = " ".join(str(err).split())[:120]
        raise InputError(f"{path}: not a history table ({reason}); train again") from None
    if "epoch" not in history.columns:
        raise InputError(f"{path}: no epoch column; give the history.tsv of a training run")
    return history
