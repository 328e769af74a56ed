"""Staging: `aam stage` copies inputs into the work area (VAST) with a sha256 manifest;
``localized`` copies a GPU job's inputs to node-local scratch (NVMe) and verifies them; the
copies of a command killed before it could remove them (SIGKILL, the OOM killer) are removed
by the next command staging into the same scratch.

The manifest (``manifest.sha256``, ``sha256sum`` format: ``<hex>  <name>``) lets a later job
verify its node-local copy before reading it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from aam.errors import InputError
from aam.runtime.atomic import atomic_output, check_output_dir, check_output_path

log = logging.getLogger(__name__)
CHUNK = 1 << 22
STAGE_PREFIX = "aam-stage-"  # a command's scratch directory: STAGE_PREFIX + a random suffix
HELD = ".held"  # in it: this host's name, locked (flock) while its command runs; the OS
# unlocks it at any death of the process
YOUNG_S = 60  # a directory whose HELD file is younger may be between creating and locking it


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def stage_file(source: Path, target: Path, now: bool = False) -> str:
    """Copy ``source`` to ``target`` atomically and verify the copy; return its sha256
    (``now``: published at once, for a copy the command itself reads next)."""
    if not source.is_file():
        raise InputError(f"{source}: input file not found; fix the path in the config")
    expected = sha256_of(source)
    with atomic_output(target, now=now) as tmp:
        shutil.copyfile(source, tmp)
        if sha256_of(tmp) != expected:
            raise InputError(f"{target}: copy of {source} does not match it (sha256); retry")
    return expected


def stage_files(
    output_dir: Path,
    files: dict[str, Path],
    manifest: str,
    writers: dict[str, Callable[[Path], None]] | None = None,
) -> None:
    """Copy each ``files`` path to OUTPUT_DIR/<name> (or, for a name in ``writers``, let the
    writer write that file: a conversion) and write the manifest; the output locations are
    checked before any copying."""
    writers = writers or {}
    check_output_dir(output_dir, "staging")
    check_output_path(output_dir / manifest, "manifest")
    for name in files:
        check_output_path(output_dir / name, "staged file")
    lines = []
    for name, path in files.items():
        if name in writers:
            with atomic_output(output_dir / name) as tmp:
                writers[name](tmp)
                digest = sha256_of(tmp)
        else:
            digest = stage_file(path, output_dir / name)
        lines.append(f"{digest}  {name}")
    with atomic_output(output_dir / manifest) as tmp:
        tmp.write_text("\n".join(lines) + "\n")
    log.info("staged %d files into %s", len(files), output_dir)


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
    remove_stale_stages(_mkdir(root))
    workdir = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=root))
    held = None
    try:
        held = _hold(workdir / HELD)
        local = {}
        for key, source in present.items():
            target = workdir / key / source.name
            digest = stage_file(source, target, now=True)  # read by this command
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
        if held is not None:
            os.close(held)


def _hold(path: Path) -> int:
    """Create ``path`` with this host's name and lock it for as long as this process lives
    (where the file system has locks; without them this directory is never taken for stale)."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.write(fd, socket.gethostname().encode())
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def remove_stale_stages(root: Path) -> None:
    """Remove the scratch directories under ``root`` whose command died on this host without
    removing them: their HELD file is unlocked. A directory without that file, another host's
    (a shared file system may lock per node only), one created in the last YOUNG_S seconds,
    or one on a file system without locks is left alone, and so is a link (its target is not
    this command's to judge)."""
    now, host = time.time(), socket.gethostname()
    for stage in root.glob(f"{STAGE_PREFIX}*"):
        if stage.is_symlink():
            continue
        try:
            held = stage / HELD
            if now - held.stat().st_mtime < YOUNG_S or held.read_text() != host:
                continue
            fd = os.open(held, os.O_RDWR)
        except (OSError, UnicodeDecodeError):
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its command runs (or no locks here)
            os.close(fd)
            continue
        shutil.rmtree(stage, ignore_errors=True)
        os.close(fd)
        if stage.exists():
            log.warning("could not remove all of %s, a killed command's staged inputs", stage)
        else:
            log.info("removed %s: the staged inputs of a command that was killed", stage)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
