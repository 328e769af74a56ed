"""`aam profiling-report`: one HTML page from `aam profile` output and the workflow's
benchmark TSVs (``aam.profiling.report``)."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from aam.options import add_options, check_options, from_args, option
from aam.profiling.report import write_report

log = logging.getLogger(__name__)


@dataclass
class ProfilingReportOptions:
    """The options of `aam profiling-report`."""

    profile_dir: Path = option(
        None, "`aam profile` output (or a rocprof output dir)", required=True
    )
    benchmarks: list[Path] = option([], "Snakemake benchmark: TSVs (rule name from the path)")
    output: Path = option(None, "HTML file to write", required=True)
    memory_budget_gb: float | None = option(
        None, "memory a batch may use (default: 80%% of the device memory)"
    )
    memory_fraction: float = option(
        0.8, "without --memory-budget-gb: this fraction of the device memory"
    )

    def __post_init__(self) -> None:
        check_options(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam profiling-report`."""
    add_options(parser, ProfilingReportOptions)


def run(args: argparse.Namespace) -> None:
    """`aam profiling-report`: the HTML page of a profile dir + benchmark TSVs."""
    opts = from_args(ProfilingReportOptions, args)
    write_report(
        opts.profile_dir,
        opts.benchmarks,
        opts.output,
        memory_budget_gb=opts.memory_budget_gb,
        memory_fraction=opts.memory_fraction,
    )
    log.info("wrote %s", opts.output)
