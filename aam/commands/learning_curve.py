"""`aam learning-curve`: the test metrics of a run's learning-curve points against their
training samples, as a table and a plot."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from aam.analysis.figures import METRIC_NAMES, add_label_arguments
from aam.analysis.learning_curve import curve_figure, curve_table, headline_metric, per_doubling
from aam.analysis.prediction_tables import model_label, scores_classes
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.options import add_options, from_args, option
from aam.runtime.atomic import atomic_output, check_output_path
from aam.runtime.figures import FORMATS, figure_format, save_figure

log = logging.getLogger(__name__)


@dataclass
class CurveOptions:
    """The options of `aam learning-curve` but the titles'."""

    fractions: list[float] = option(
        None,
        "each point's fraction of the training samples (1 for the whole set)",
        required=True,
    )
    splits: list[Path] = option(None, "each point's split, in that order", required=True)
    metrics: list[Path] = option(
        None, "each point's metrics.json from aam predict, in that order", required=True
    )
    scratch_metrics: list[Path] = option(
        [],
        "the metrics.json of AAM fine-tuned from a random initialisation at each point, "
        "in the same order: a from-scratch series beside the pretrained one",
    )
    target_column: str = option("the target", "the target's name")
    group_column: str | None = option(None, "the group mean baseline's grouping column")
    output: Path = option(
        None,
        f"table to write ({'/'.join(TSV_SUFFIXES)}): a row per point",
        required=True,
    )
    plot: Path = option(None, f"figure to write ({', '.join(FORMATS)})", required=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam learning-curve`."""
    add_options(parser, CurveOptions)
    add_label_arguments(parser)


def run(args: argparse.Namespace) -> None:
    """Write OUTPUT and PLOT (their names and locations are checked first)."""
    opts = from_args(CurveOptions, args)
    check_output_file(opts.output, TSV_SUFFIXES, "learning-curve table")
    check_output_path(opts.plot, "plot")
    figure_format(opts.plot)
    table = curve_table(opts.fractions, opts.splits, opts.metrics, opts.scratch_metrics)
    fig = curve_figure(
        table, opts.target_column, opts.group_column, args.target_unit, args.dataset, args.run
    )
    with atomic_output(opts.output) as tmp:
        table.to_csv(tmp, sep="\t", index=False, na_rep="NA", float_format="%.6g")
    save_figure(fig, opts.plot)
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
            f"{model_label(m, opts.group_column, scores_classes([metric]))} {v:+.3g}"
            for m, v in slopes.items()
        ),
    )
