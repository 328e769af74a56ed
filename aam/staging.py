"""Staging: `aam stage` copies inputs into the work area (VAST) with a sha256 manifest;
``localized`` copies a GPU job's inputs to node-local scratch (NVMe) and verifies them.

The manifest (``manifest.sha256``, ``sha256sum`` format: ``<hex>  <name>``) lets a later job
verify its node-local copy before reading it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from aam.atomic import atomic_output, check_output_dir, check_output_path
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
    """Stage every --file and write the manifest (default OUTPUT_DIR/manifest.sha256); the
    output locations are checked before any copying."""
    check_output_dir(args.output_dir, "staging")
    check_output_path(args.output_dir / args.manifest, "manifest")
    pairs = []
    for item in args.file:
        name, sep, path = item.partition("=")
        if not sep or not name or "/" in name:
            raise InputError(f"--file {item}: expected NAME=PATH with a plain file NAME")
        check_output_path(args.output_dir / name, "staged file")
        pairs.append((name, Path(path)))
    lines = [f"{stage_file(path, args.output_dir / name)}  {name}" for name, path in pairs]
    with atomic_output(args.output_dir / args.manifest) as tmp:
        tmp.write_text("\n".join(lines) + "\n")
    log.info("staged %d files into %s", len(pairs), args.output_dir)


def scratch_root(requested: str | None) -> Path | None:
    """Node-local scratch for this job: ``requested`` (env vars expanded, e.g.
    /scratch/$USER/job_$SLURM_JOB_ID), else $TMPDIR, else None (read inputs in place)."""
    for candidate in (requested, os.environ.get("TMPDIR")):
        if candidate:
            path = Path(os.path.expandvars(os.path.expanduser(candidate)))
            if "$" not in str(path):
                return path
            log.warning("scratch %s has unset variables; trying the next choice", candidate)
    return None


def _manifest_digest(path: Path) -> str | None:
    """The digest recorded for ``path`` in a ``manifest.sha256`` beside it, if any."""
    manifest = path.parent / "manifest.sha256"
    if not manifest.is_file():
        return None
    for line in manifest.read_text().splitlines():
        digest, _, name = line.partition("  ")
        if name == path.name:
            return digest
    return None


@contextlib.contextmanager
def localized(paths: dict[str, Path | None], scratch: str | None) -> Iterator[dict[str, Path]]:
    """Copy input files to node-local scratch, verify them, yield their local paths, and
    delete the copies on exit. Files are verified against the work area's manifest when it
    lists them, else against the source. Without scratch the original paths are yielded."""
    root = scratch_root(scratch)
    present = {key: Path(p) for key, p in paths.items() if p is not None}
    if root is None:
        yield present
        return
    workdir = Path(tempfile.mkdtemp(prefix="aam-stage-", dir=_mkdir(root)))
    try:
        local = {}
        for key, source in present.items():
            target = workdir / key / source.name
            digest = stage_file(source, target)
            expected = _manifest_digest(source)
            if expected is not None and expected != digest:
                raise InputError(
                    f"{source}: does not match {source.parent / 'manifest.sha256'}; the work "
                    "area copy changed since staging: rerun the stage rule"
                )
            local[key] = target
        log.info("staged %d inputs to %s", len(local), workdir)
        yield local
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def inputs_on_scratch(args: argparse.Namespace, *names: str) -> Iterator[None]:
    """While inputs are read, point ``args.<name>`` at verified node-local copies
    (``args.scratch``, see ``localized``); the attributes are restored afterwards."""
    original = {name: getattr(args, name) for name in names}
    with localized(original, args.scratch) as local:
        for name in names:
            setattr(args, name, local.get(name))
        try:
            yield
        finally:
            for name, value in original.items():
                setattr(args, name, value)
