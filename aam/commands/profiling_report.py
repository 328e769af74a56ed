"""`aam profiling-report`: one HTML page from `aam profile` output and the workflow's
benchmark TSVs (``aam.profiling.report``)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from aam.profiling.report import write_report

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam profiling-report`."""
    parser.add_argument(
        "--profile-dir",
        required=True,
        type=Path,
        help="`aam profile` output (or a rocprof output dir)",
    )
    parser.add_argument(
        "--benchmarks",
        nargs="*",
        type=Path,
        default=[],
        help="Snakemake benchmark: TSVs (rule name from the path)",
    )
    parser.add_argument("--output", required=True, type=Path, help="HTML file to write")
    parser.add_argument(
        "--memory-budget-gb",
        type=float,
        help="memory a batch may use (default: 80%% of the device memory)",
    )
    parser.add_argument(
        "--memory-fraction",
        type=float,
        default=0.8,
        help="without --memory-budget-gb: this fraction of the device memory",
    )


def run(args: argparse.Namespace) -> None:
    """`aam profiling-report`: the HTML page of a profile dir + benchmark TSVs."""
    write_report(
        args.profile_dir,
        args.benchmarks,
        args.output,
        memory_budget_gb=args.memory_budget_gb,
        memory_fraction=args.memory_fraction,
    )
    log.info("wrote %s", args.output)
