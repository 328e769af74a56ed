"""`aam learning-curve`: the test metrics of a run's learning-curve points against their
training samples, as a table and a plot."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from aam.analysis.figures import METRIC_NAMES, add_label_arguments
from aam.analysis.learning_curve import curve_figure, curve_table, headline_metric, per_doubling
from aam.analysis.predictions import model_label, scores_classes
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.runtime.atomic import atomic_output, check_output_path
from aam.runtime.figures import FORMATS, figure_format, save_figure

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam learning-curve`."""
    parser.add_argument(
        "--fractions",
        required=True,
        nargs="+",
        type=float,
        help="each point's fraction of the training samples (1 for the whole set)",
    )
    parser.add_argument(
        "--splits", required=True, nargs="+", type=Path, help="each point's split, in that order"
    )
    parser.add_argument(
        "--metrics",
        required=True,
        nargs="+",
        type=Path,
        help="each point's metrics.json from aam predict, in that order",
    )
    parser.add_argument(
        "--scratch-metrics",
        nargs="+",
        default=[],
        type=Path,
        help="the metrics.json of AAM fine-tuned from a random initialisation at each point, "
        "in the same order: a from-scratch series beside the pretrained one",
    )
    parser.add_argument("--target-column", default="the target", help="the target's name")
    parser.add_argument("--group-column", help="the group mean baseline's grouping column")
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        help=f"table to write ({'/'.join(TSV_SUFFIXES)}): a row per point",
    )
    parser.add_argument(
        "--plot", required=True, type=Path, help=f"figure to write ({', '.join(FORMATS)})"
    )
    add_label_arguments(parser)


def run(args: argparse.Namespace) -> None:
    """Write OUTPUT and PLOT (their names and locations are checked first)."""
    check_output_file(args.output, TSV_SUFFIXES, "learning-curve table")
    check_output_path(args.plot, "plot")
    figure_format(args.plot)
    table = curve_table(args.fractions, args.splits, args.metrics, args.scratch_metrics)
    fig = curve_figure(
        table, args.target_column, args.group_column, args.target_unit, args.dataset, args.run
    )
    with atomic_output(args.output) as tmp:
        table.to_csv(tmp, sep="\t", index=False, na_rep="NA", float_format="%.6g")
    save_figure(fig, args.plot)
    metric = headline_metric(table)
    name = METRIC_NAMES.get(metric, metric)
    for _, row in table.iterrows():
        log.info(
            "%d training samples (%g): AAM %s %.4g [%.4g, %.4g]",
            row["n_train"],
            row["fraction"],
            name,
            row[f"model_{metric}"],
            row[f"model_{metric}_low"],
            row[f"model_{metric}_high"],
        )
    slopes = per_doubling(table, metric)
    log.info(
        "%s per doubling of the training samples (least squares over the points): %s",
        name,
        ", ".join(
            f"{model_label(m, args.group_column, scores_classes([metric]))} {v:+.3g}"
            for m, v in slopes.items()
        ),
    )
