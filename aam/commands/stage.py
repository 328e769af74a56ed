"""`aam stage`: copy inputs into the work area, verified, with a sha256 manifest
(``aam.staging``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aam.errors import InputError
from aam.staging import stage_files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam stage`."""
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument("--manifest", default="manifest.sha256", help="manifest file name")
    parser.add_argument(
        "--file",
        action="append",
        required=True,
        metavar="NAME=PATH",
        help="copy PATH to OUTPUT_DIR/NAME (repeat)",
    )


def run(args: argparse.Namespace) -> None:
    """Stage every --file and write the manifest (default OUTPUT_DIR/manifest.sha256)."""
    files = {}
    for item in args.file:
        name, sep, path = item.partition("=")
        if not sep or not name or "/" in name:
            raise InputError(f"--file {item}: expected NAME=PATH with a plain file NAME")
        files[name] = Path(path)
    stage_files(args.output_dir, files, args.manifest)
