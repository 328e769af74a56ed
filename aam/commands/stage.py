"""`aam stage`: copy inputs into the work area, verified, with a sha256 manifest
(``aam.runtime.staging``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aam.errors import InputError
from aam.runtime.staging import stage_files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam stage`."""
    parser.add_argument(
        "--output-dir", required=True, type=Path, help="work area the files are copied to"
    )
    parser.add_argument("--manifest", default="manifest.sha256", help="manifest file name")
    parser.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="copy PATH to OUTPUT_DIR/NAME (repeat)",
    )
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="like --file, for a newick tree: checked first (readable, named unique tips, "
        "branch lengths), so a bad tree stops here, named by PATH, before any job reads it",
    )


def run(args: argparse.Namespace) -> None:
    """Check every --tree, then stage every --file and --tree and write the manifest (default
    OUTPUT_DIR/manifest.sha256)."""
    files, trees = _named(args.file, "--file"), _named(args.tree, "--tree")
    if not files and not trees:
        raise InputError("nothing to stage; give --file NAME=PATH or --tree NAME=PATH")
    if trees:
        from aam.unifrac.tree import check_tree

        for path in trees.values():
            check_tree(path)
    stage_files(args.output_dir, {**files, **trees}, args.manifest)


def _named(items: list[str], flag: str) -> dict[str, Path]:
    """NAME -> PATH of ``flag NAME=PATH`` arguments."""
    files = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or "/" in name:
            raise InputError(f"{flag} {item}: expected NAME=PATH with a plain file NAME")
        files[name] = Path(path)
    return files
