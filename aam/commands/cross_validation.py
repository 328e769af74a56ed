"""`aam cross-validation`: per-fold and mean +- sd test metrics of a cross-validated run."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from aam.analysis.cross_validation import write_fold_table
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.options import add_options, from_args, option

log = logging.getLogger(__name__)


@dataclass
class CrossValidationOptions:
    """The options of `aam cross-validation`."""

    metrics: list[Path] = option(
        None, "each fold's metrics.json from aam predict, fold 1 first", required=True
    )
    output: Path = option(
        None,
        f"table to write ({'/'.join(TSV_SUFFIXES)}): a row per fold, then mean and sd",
        required=True,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam cross-validation`."""
    add_options(parser, CrossValidationOptions)


def run(args: argparse.Namespace) -> None:
    """Write OUTPUT from the folds' metrics (its name and location are checked first)."""
    opts = from_args(CrossValidationOptions, args)
    check_output_file(opts.output, TSV_SUFFIXES, "cross-validation table")
    rows = write_fold_table(opts.metrics, opts.output)
    log.info("%s: %d folds, mean and sd", opts.output, rows - 2)
