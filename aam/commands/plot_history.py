"""`aam plot-history`: training curves from a history.tsv (for the workflow report)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from aam.errors import InputError
from aam.runtime.atomic import atomic_output, check_output_path

SERIES = (
    ("loss", "objective: the weighted sum of the losses"),
    ("unifrac_loss", "UniFrac fit (MSE of the distances)"),
    ("mae", "MAE of {target} (its units)"),
    ("nuc_accuracy", "masked-nucleotide accuracy"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam plot-history`."""
    parser.add_argument("--history", required=True, type=Path, help="history.tsv of a stage")
    parser.add_argument("--output", required=True, type=Path, help="PNG to write")
    parser.add_argument(
        "--summary",
        type=Path,
        help="the stage's summary.json: marks the chosen epoch and the training mean's MAE",
    )
    parser.add_argument("--target-column", default="the target", help="the target's name")


def run(args: argparse.Namespace) -> None:
    """One panel per measured series; train and validation curves per epoch, the chosen epoch
    and the training mean's validation MAE (from --summary) as reference lines."""
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
    summary = _summary(args.summary) if args.summary else {}
    fig = history_figure(history, panels, summary, args.target_column)
    with atomic_output(args.output) as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    fig.clear()


def history_figure(history: pd.DataFrame, panels: list, summary: dict, target: str):
    """The figure: a panel per (key, title) of ``panels``; ``summary``'s ``best_epoch`` as a
    dotted vertical line, its training mean's validation MAE as a dashed one on the MAE."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    chosen = summary.get("best_epoch")
    baseline = (summary.get("mean_baseline") or {}).get("val_mae")
    fig = Figure(figsize=(3.8 * len(panels), 3.4), layout="tight")
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, (key, title) in zip(axes[0], panels, strict=True):
        for split in ("train", "val"):
            if f"{split}_{key}" in history:
                ax.plot(history["epoch"], history[f"{split}_{key}"], marker="o", label=split)
        if chosen:
            ax.axvline(chosen, color="grey", linestyle=":", label=f"chosen: epoch {chosen}")
        if key == "mae" and baseline is not None:
            ax.axhline(baseline, color="red", linestyle="--", label="training mean (val)")
        ax.set_title(title.format(target=target), fontsize=9)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=7)
    return fig


def _summary(path: Path) -> dict:
    """The stage's summary.json; InputError when it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: not a summary.json ({err}); train again") from None


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
