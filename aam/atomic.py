"""Atomic file output: write to a temporary name in the target directory, then rename.

Every file aam writes goes through ``atomic_output``. Its temporaries are named
``.<name>.<random>.tmp`` next to the target, which is what ``remove_stale_temporaries``
deletes after a killed run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from aam.errors import InputError

log = logging.getLogger(__name__)
TEMP_SUFFIX = ".tmp"


def _temp_prefix(name: str) -> str:
    return f".{name}."


def check_output_path(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Fail before any work if ``path`` cannot be written: it is a directory, or its directory
    cannot be created or written to. Creates the parent directory."""
    target = Path(path)
    if target.is_dir():
        raise InputError(f"{target}: {what} path is a directory; give a file name")
    check_output_dir(target.parent, what)
    return target


def check_output_dir(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Create ``path`` (a directory) if needed and fail before any work if it is not writable."""
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(
            f"{directory}: {what} directory is an existing file; choose another location"
        ) from None
    except OSError as err:
        raise InputError(
            f"{directory}: cannot create the {what} directory ({err.strerror}); "
            "choose a writable location"
        ) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InputError(
            f"{directory}: {what} directory is not writable; choose a writable location"
        )
    return directory


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike[str], keep_previous: str | os.PathLike[str] | None = None
) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only on success.

    The temporary file is fsynced before the rename and removed if the body raises, so a
    failed or interrupted run never leaves a partial file under the final name. With
    ``keep_previous``, the file being replaced is first renamed there: a crash between the two
    renames leaves a complete file under one of the two names.
    """
    target = check_output_path(path)
    fd, tmp_name = tempfile.mkstemp(
        prefix=_temp_prefix(target.name), suffix=TEMP_SUFFIX, dir=target.parent
    )
    os.close(fd)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file normal permissions
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        if keep_previous is not None and target.exists():
            os.replace(target, keep_previous)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_directory(target.parent)  # make the renames themselves durable


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temporaries(directory: str | os.PathLike[str], names: Iterable[str]) -> list[Path]:
    """Delete the temporaries ``atomic_output`` left in ``directory`` while writing one of
    ``names`` when its run was killed; return them. Nothing else is touched."""
    directory = Path(directory)
    stale = [
        tmp
        for name in names
        for tmp in directory.glob(f"{_temp_prefix(name)}*{TEMP_SUFFIX}")
        if tmp.is_file()
    ]
    for tmp in stale:
        tmp.unlink(missing_ok=True)
        log.info("removed %s left by an interrupted run", tmp)
    return stale


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, +-inf) replaced by None (JSON ``null``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def write_json(path: str | os.PathLike[str], data: Any, **dumps_options: Any) -> None:
    """Write ``data`` atomically as strict JSON: non-finite floats become ``null``, never
    the bare ``NaN``/``Infinity`` that other JSON readers reject."""
    text = json.dumps(json_safe(data), indent=2, allow_nan=False, **dumps_options)
    with atomic_output(path) as tmp:
        tmp.write_text(text + "\n")
