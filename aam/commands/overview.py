"""`aam overview`: the report's front page, every run's test metrics beside the baselines'
with intervals, AAM minus each baseline with its paired interval and a verdict, and what each
output folder holds (``aam.analysis.overview``)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from aam.analysis.overview import RunMetrics, overview_html
from aam.errors import InputError
from aam.runtime.atomic import atomic_output

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam overview`."""
    parser.add_argument(
        "--run",
        required=True,
        nargs="+",
        metavar="RUN=DATASET=METRICS",
        help="a run, its dataset and the metrics.json `aam predict` wrote for its test split",
    )
    parser.add_argument("--output", required=True, type=Path, help="HTML page to write")


def run(args: argparse.Namespace) -> None:
    """Write the page from each run's metrics.json."""
    if args.output.suffix != ".html":
        raise InputError(f"--output {args.output}: name the page *.html")
    results = []
    for item in args.run:
        name, dataset, path = _run(item)
        try:
            metrics = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise InputError(
                f"--run {item}: cannot read {path} ({error}); rerun aam predict"
            ) from None
        results.append(RunMetrics(name, dataset, metrics))
    with atomic_output(args.output) as tmp:
        tmp.write_text(overview_html(results))
    log.info("wrote %s: %d run(s)", args.output, len(results))


def _run(item: str) -> list[str]:
    """(run, dataset, path) of ``--run RUN=DATASET=METRICS`` (the path may hold '=')."""
    values = item.split("=", 2)
    if len(values) != 3 or not all(values):
        raise InputError(f"--run {item}: expected RUN=DATASET=METRICS")
    return values
