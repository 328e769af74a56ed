"""`aam new-study`: a new study with few labels, from its points' splits, baseline predictions
and predictions: the test MAE of every model against the labelled samples, a table and a plot."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from aam.analysis.figures import add_label_arguments
from aam.analysis.new_study import PAIRS, new_study_figure, new_study_table
from aam.data.metadata import metadata_column
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.runtime.atomic import atomic_output, check_output_path
from aam.runtime.figures import FORMATS, figure_format, save_figure

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam new-study`."""
    points = {"required": True, "nargs": "+"}
    parser.add_argument("--sizes", type=int, help="each point's labelled samples", **points)
    parser.add_argument("--seeds", type=int, help="each point's seed, in that order", **points)
    parser.add_argument(
        "--splits", type=Path, help="each point's `aam split --new-study-size` file", **points
    )
    parser.add_argument(
        "--baselines", type=Path, help="each point's `aam baselines` predictions", **points
    )
    parser.add_argument(
        "--predictions", type=Path, help="each point's `aam predict` predictions.tsv", **points
    )
    parser.add_argument(
        "--scratch-predictions",
        nargs="+",
        default=[],
        type=Path,
        help="the predictions.tsv of AAM fine-tuned from a random initialisation at each point, "
        "in the same order",
    )
    parser.add_argument(
        "--embedding-forests",
        nargs="+",
        default=[],
        type=Path,
        help="each point's `aam embedding-forest` predictions, in the same order: the forests "
        "on the pretrained sample embeddings beside the baselines",
    )
    parser.add_argument("--metadata", type=Path, help="sample metadata TSV (--group-column's)")
    parser.add_argument(
        "--group-column", help="metadata column of the subjects the intervals resample whole"
    )
    parser.add_argument("--target-column", default="the target", help="the target's name")
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        help=f"table to write ({'/'.join(TSV_SUFFIXES)}): a row per size",
    )
    parser.add_argument(
        "--plot", required=True, type=Path, help=f"figure to write ({', '.join(FORMATS)})"
    )
    add_label_arguments(parser)


def run(args: argparse.Namespace) -> None:
    """Write OUTPUT and PLOT (their names and locations are checked first)."""
    check_output_file(args.output, TSV_SUFFIXES, "new-study table")
    check_output_path(args.plot, "plot")
    figure_format(args.plot)
    subjects = None
    if args.group_column:
        subjects = metadata_column(args.metadata, args.group_column, "--group-column")
    table = new_study_table(
        args.sizes,
        args.seeds,
        args.splits,
        args.baselines,
        args.predictions,
        args.scratch_predictions,
        subjects,
        args.embedding_forests,
    )
    fig = new_study_figure(table, args.target_column, args.target_unit, args.dataset, args.run)
    with atomic_output(args.output) as tmp:
        table.to_csv(tmp, sep="\t", index=False, na_rep="NA", float_format="%.6g")
    save_figure(fig, args.plot)
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
