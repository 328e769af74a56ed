"""`aam new-study`: a new study with few labels, from its points' splits, baseline predictions
and predictions: the test MAE of every model against the labelled samples, a table and a plot."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from aam.analysis.figures import add_label_arguments
from aam.analysis.new_study import PAIRS, new_study_figure, new_study_table
from aam.data.metadata import metadata_column
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.options import add_options, check_options, from_args, option
from aam.runtime.atomic import atomic_output, check_output_path
from aam.runtime.figures import FORMATS, figure_format, save_figure

log = logging.getLogger(__name__)


@dataclass
class NewStudyOptions:
    """The options of `aam new-study` (one value per point for the point lists, in the same
    order; ``--dataset``, ``--run`` and ``--target-unit``: ``add_label_arguments``')."""

    sizes: list[int] = option(None, "each point's labelled samples", required=True)
    seeds: list[int] = option(None, "each point's seed, in that order", required=True)
    splits: list[Path] = option(
        None, "each point's `aam split --new-study-size` file", required=True
    )
    baselines: list[Path] = option(None, "each point's `aam baselines` predictions", required=True)
    predictions: list[Path] = option(
        None, "each point's `aam predict` predictions.tsv", required=True
    )
    scratch_predictions: list[Path] = option(
        [],
        "the predictions.tsv of AAM fine-tuned from a random initialisation at each point, "
        "in the same order",
    )
    embedding_forests: list[Path] = option(
        [],
        "each point's `aam embedding-forest` predictions, in the same order: the forests "
        "on the pretrained sample embeddings beside the baselines",
    )
    metadata: Path | None = option(None, "sample metadata TSV (--group-column's)")
    group_column: str | None = option(
        None, "metadata column of the subjects the intervals resample whole"
    )
    target_column: str = option("the target", "the target's name")
    output: Path = option(
        None, f"table to write ({'/'.join(TSV_SUFFIXES)}): a row per size", required=True
    )
    plot: Path = option(None, f"figure to write ({', '.join(FORMATS)})", required=True)

    def __post_init__(self) -> None:
        check_options(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam new-study`."""
    add_options(parser, NewStudyOptions)
    add_label_arguments(parser)


def run(args: argparse.Namespace) -> None:
    """Write OUTPUT and PLOT (their names and locations are checked first)."""
    opts = from_args(NewStudyOptions, args)
    check_output_file(opts.output, TSV_SUFFIXES, "new-study table")
    check_output_path(opts.plot, "plot")
    figure_format(opts.plot)
    subjects = None
    if opts.group_column:
        subjects = metadata_column(opts.metadata, opts.group_column, "--group-column")
    table = new_study_table(
        opts.sizes,
        opts.seeds,
        opts.splits,
        opts.baselines,
        opts.predictions,
        opts.scratch_predictions,
        subjects,
        opts.embedding_forests,
    )
    fig = new_study_figure(table, opts.target_column, args.target_unit, args.dataset, args.run)
    with atomic_output(opts.output) as tmp:
        table.to_csv(tmp, sep="\t", index=False, na_rep="NA", float_format="%.6g")
    save_figure(fig, opts.plot)
    for _, row in table.iterrows():
        pairs = [f"{a}_minus_{b}" for a, b in PAIRS if f"{a}_minus_{b}" in row]
        log.info(
            "%d labelled (%d seeds): AAM MAE %.4g; %s",
            row["size"],
            row["seeds"],
            row["model_mae"],
            ", ".join(
                f"{p} {row[p]:+.3g} [{row[f'{p}_low']:+.3g}, {row[f'{p}_high']:+.3g}]"
                for p in pairs
            ),
        )
        if row["draws"] < row["seeds"]:
            log.warning(
                "%d labelled: its %d seeds drew %d distinct set(s) of labelled samples (a size "
                "equal to the pool labels the whole pool): they differ in validation samples and "
                "fine-tuning, not in what is labelled; a larger new_study.pool redraws them",
                row["size"],
                row["seeds"],
                row["draws"],
            )
