"""`aam stage`: copy inputs into the work area with sha256 verification and a manifest.

The manifest (``manifest.sha256``, ``sha256sum`` format: ``<hex>  <name>``) lets a later job
verify its node-local copy (``sha256sum -c``) before reading it.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import shutil
from pathlib import Path

from aam.atomic import atomic_output
from aam.errors import InputError

log = logging.getLogger(__name__)
CHUNK = 1 << 22


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def stage_file(source: Path, target: Path) -> str:
    """Copy ``source`` to ``target`` atomically and verify the copy; return its sha256."""
    if not source.is_file():
        raise InputError(f"{source}: input file not found; fix the path in the config")
    expected = sha256_of(source)
    with atomic_output(target) as tmp:
        shutil.copyfile(source, tmp)
        if sha256_of(tmp) != expected:
            raise InputError(f"{target}: copy of {source} does not match it (sha256); retry")
    return expected


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam stage`."""
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument("--manifest", default="manifest.sha256", help="manifest file name")
    parser.add_argument(
        "--file", action="append", required=True, metavar="NAME=PATH",
        help="copy PATH to OUTPUT_DIR/NAME (repeat)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> None:
    """Stage every --file and write the manifest (default OUTPUT_DIR/manifest.sha256)."""
    pairs = []
    for item in args.file:
        name, sep, path = item.partition("=")
        if not sep or not name or "/" in name:
            raise InputError(f"--file {item}: expected NAME=PATH with a plain file NAME")
        pairs.append((name, Path(path)))
    lines = [f"{stage_file(path, args.output_dir / name)}  {name}" for name, path in pairs]
    with atomic_output(args.output_dir / args.manifest) as tmp:
        tmp.write_text("\n".join(lines) + "\n")
    log.info("staged %d files into %s", len(pairs), args.output_dir)
