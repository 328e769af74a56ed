"""`aam lint-def`: check Singularity/Apptainer definition files (``aam.workflow.containers``)."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from aam.errors import InputError
from aam.options import add_options, from_args, option
from aam.workflow.containers import lint_def

log = logging.getLogger(__name__)


@dataclass
class LintDefOptions:
    """The options of `aam lint-def`."""

    files: list[Path] = option(
        None, ".def files to check", positional=True, required=True, metavar="FILE"
    )
    check_paths: bool = option(
        False,
        "also require the From: path of localimage/docker-archive builds to exist here "
        "(use on the cluster that builds the image)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam lint-def`."""
    add_options(parser, LintDefOptions)


def run(args: argparse.Namespace) -> None:
    """Print every problem as FILE:LINE: message; InputError (exit 2) if there is any."""
    opts = from_args(LintDefOptions, args)
    bad_files = 0
    total = 0
    for path in opts.files:
        problems = lint_def(path, check_paths=opts.check_paths)
        for problem in problems:
            print(problem)
        bad_files += bool(problems)
        total += len(problems)
    if total:
        raise InputError(
            f"{total} problem(s) in {bad_files} of {len(opts.files)} definition file(s); "
            "see the FILE:LINE lines above"
        )
    log.info("%d definition file(s) clean", len(opts.files))
