"""`aam lint-def`: check Singularity/Apptainer definition files (``aam.workflow.containers``)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from aam.errors import InputError
from aam.workflow.containers import lint_def

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help=".def files to check")
    parser.add_argument(
        "--check-paths",
        action="store_true",
        help="also require the From: path of localimage/docker-archive builds to exist here "
        "(use on the cluster that builds the image)",
    )


def run(args: argparse.Namespace) -> None:
    """Print every problem as FILE:LINE: message; InputError (exit 2) if there is any."""
    bad_files = 0
    total = 0
    for path in args.files:
        problems = lint_def(path, check_paths=args.check_paths)
        for problem in problems:
            print(problem)
        bad_files += bool(problems)
        total += len(problems)
    if total:
        raise InputError(
            f"{total} problem(s) in {bad_files} of {len(args.files)} definition file(s); "
            "see the FILE:LINE lines above"
        )
    log.info("%d definition file(s) clean", len(args.files))
