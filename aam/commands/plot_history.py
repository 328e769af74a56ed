"""`aam plot-history`: training curves from a history.tsv (for the workflow report), titled with
the dataset, the run and the stage; the MAE in the target's unit, a classifier's validation
accuracy and AUC in one panel."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from aam.analysis.figures import METRIC_NAMES, add_label_arguments, metric_label, title
from aam.errors import InputError
from aam.options import add_options, check_options, from_args, option
from aam.runtime.atomic import check_output_path
from aam.runtime.figures import FORMATS, figure_format, pyplot, save_figure

# (history key, panel title, y axis label; {mae}: the MAE of the target in its unit,
# {target}: the target's name)
SERIES = (
    ("loss", "objective", "weighted sum of the losses"),
    ("unifrac_loss", "UniFrac fit", "MSE of the UniFrac distances"),
    ("mae", "target", "{mae}"),
    ("accuracy", "target", "accuracy and AUC of {target}"),  # a classifier's
    ("nuc_accuracy", "masked nucleotides", "accuracy of the masked nucleotides"),
)
ALSO = {"accuracy": ("auc",)}  # series drawn in another key's panel, each named in the legend
CHANCE_AUC = 0.5
STYLES = (("o", "-"), ("s", "-."))  # (marker, line) of a panel's first series, its second
# (a split keeps its colour: train C0, validation C1)
STAGES = {"pretrain": "pretraining", "finetune": "fine-tuning"}


@dataclass
class PlotHistoryOptions:
    """The options of `aam plot-history` (``--dataset``, ``--run`` and ``--target-unit``:
    ``add_label_arguments``')."""

    history: Path = option(None, "history.tsv of a stage", required=True)
    output: Path = option(None, f"figure to write ({', '.join(FORMATS)})", required=True)
    summary: Path | None = option(
        None, "the stage's summary.json: marks the chosen epoch and the training mean's MAE"
    )
    target_column: str = option("the target", "the target's name")
    stage: str | None = option(None, "the stage, for the title", choices=sorted(STAGES))

    def __post_init__(self) -> None:
        check_options(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam plot-history`."""
    add_options(parser, PlotHistoryOptions)
    add_label_arguments(parser)


def run(args: argparse.Namespace) -> None:
    """One panel per measured series; train and validation curves per epoch, the chosen epoch
    and the training mean's validation MAE (from --summary) as reference lines."""
    opts = from_args(PlotHistoryOptions, args)
    if not opts.history.is_file():
        raise InputError(f"{opts.history}: history not found; train first")
    check_output_path(opts.output, "plot")
    figure_format(opts.output)
    history = read_history(opts.history)
    panels = [
        series for series in SERIES if {f"train_{series[0]}", f"val_{series[0]}"} & {*history}
    ]
    if history.empty or not panels:
        raise InputError(f"{opts.history}: no epochs recorded; train first")
    summary = _summary(opts.summary) if opts.summary else {}
    stage = STAGES.get(opts.stage, "training")
    heading = title(f"{stage} curves, train and validation", args.dataset, args.run)
    fig = history_figure(history, panels, summary, opts.target_column, args.target_unit, heading)
    save_figure(fig, opts.output)


def history_figure(
    history: pd.DataFrame,
    panels: list,
    summary: dict,
    target: str,
    unit: str | None = None,
    heading: str | None = None,
):
    """The figure: a panel per (key, title, y label) of ``panels`` (``SERIES``), the MAE in
    ``unit``; the series of ``ALSO`` in their key's panel (a classifier's validation accuracy
    and AUC, on 0 to 1 beside the AUC of chance); ``summary``'s ``best_epoch`` as a dotted
    vertical line, its training mean's validation MAE as a dashed one on the MAE; ``heading``
    above them."""
    pyplot()  # the backend, literal text
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    chosen, chooser = summary.get("best_epoch"), summary.get("best_metric")
    baseline = (summary.get("mean_baseline") or {}).get("val_mae")
    fig = Figure(figsize=(3.8 * len(panels), 3.4), layout="tight")
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, (key, name, ylabel) in zip(axes[0], panels, strict=True):
        keys = (key, *ALSO.get(key, ()))
        for each, (marker, line) in zip(keys, STYLES, strict=False):
            for colour, split in enumerate(("train", "val")):
                if f"{split}_{each}" in history:
                    label = split if len(keys) == 1 else f"{split} {METRIC_NAMES[each]}"
                    drawn = {"marker": marker, "linestyle": line, "color": f"C{colour}"}
                    ax.plot(history["epoch"], history[f"{split}_{each}"], label=label, **drawn)
        if key in ALSO:  # shares of 0 to 1
            ax.axhline(CHANCE_AUC, color="grey", linestyle="--", label="AUC of chance")
            ax.set_ylim(-0.02, 1.02)
        if chosen:
            by = f" (best {chooser})" if chooser else " (the last)"
            ax.axvline(chosen, color="grey", linestyle=":", label=f"chosen: epoch {chosen}{by}")
        if key == "mae" and baseline is not None:
            ax.axhline(baseline, color="red", linestyle="--", label="training mean (val)")
        ax.set_title(name)
        ax.set_ylabel(ylabel.format(mae=metric_label("mae", target, unit), target=target))
        ax.set_xlabel("epoch")
        # whole epochs only, whatever their number (one epoch: one tick, not 0.945 ... 1.065)
        ax.set_xlim(history["epoch"].min() - 0.5, history["epoch"].max() + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        ax.legend(fontsize="small")
    if heading:
        fig.suptitle(heading)
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
