"""`aam cross-validation`: per-fold and mean +- sd test metrics of a cross-validated run."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from aam.analysis.cross_validation import write_fold_table
from aam.data.outputs import TSV_SUFFIXES, check_output_file

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam cross-validation`."""
    parser.add_argument(
        "--metrics",
        required=True,
        nargs="+",
        type=Path,
        help="each fold's metrics.json from aam predict, fold 1 first",
    )
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        help=f"table to write ({'/'.join(TSV_SUFFIXES)}): a row per fold, then mean and sd",
    )


def run(args: argparse.Namespace) -> None:
    """Write OUTPUT from the folds' metrics (its name and location are checked first)."""
    check_output_file(args.output, TSV_SUFFIXES, "cross-validation table")
    rows = write_fold_table(args.metrics, args.output)
    log.info("%s: %d folds, mean and sd", args.output, rows - 2)
