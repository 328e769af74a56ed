"""Atomic file output: write to a temporary name in the target directory, then rename.

Every file aam writes goes through ``atomic_output``. Its temporaries are named
``.<name>.<random>.tmp`` next to the target, which is what ``remove_stale_temporaries``
deletes after a killed run.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from aam.errors import DiskFullError, InputError, NonFiniteError

log = logging.getLogger(__name__)
TEMP_SUFFIX = ".tmp"


def _temp_prefix(name: str) -> str:
    return f".{name}."


def _temp_pattern(name: str) -> str:
    """The glob of the temporaries of file ``name`` (its own characters matched literally)."""
    return f"{glob.escape(_temp_prefix(name))}*{TEMP_SUFFIX}"


def check_output_path(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Fail before any work if ``path`` cannot be written: it is a directory, or its directory
    cannot be created or written to. Creates nothing (``atomic_output`` creates the directory
    at the first write), so a run refused later for bad input leaves no directory behind."""
    target = Path(path)
    if target.is_dir():
        raise InputError(f"{target}: {what} path is a directory; give a file name")
    check_output_dir(target.parent, what)
    return target


def check_output_dir(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Fail before any work if the directory ``path`` is not writable, or could not be created:
    an existing file is in the way, or its nearest existing ancestor is not a writable
    directory. Creates nothing: the directory is made at the first write (``atomic_output``)."""
    directory = Path(path)
    existing = _existing_ancestor(directory)
    if existing == directory and os.path.lexists(directory) and not directory.is_dir():
        raise InputError(
            f"{directory}: {what} directory is an existing file; choose another location"
        )
    if not existing.is_dir():
        raise InputError(
            f"{directory}: cannot create the {what} directory ({existing}: "
            f"{os.strerror(errno.ENOTDIR)}); choose another location"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        if existing == directory:
            raise InputError(
                f"{directory}: {what} directory is not writable; choose a writable location"
            )
        raise InputError(
            f"{directory}: cannot create the {what} directory ({existing} is not writable); "
            "choose a writable location"
        )
    return directory


def _existing_ancestor(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (as a file, directory or link)."""
    while not os.path.lexists(path) and path.parent != path:
        path = path.parent
    return path


def make_output_dir(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Create the directory ``path`` (and its parents) for a write; one-line errors."""
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise InputError(
            f"{directory}: cannot create the {what} directory (a file is in the way); "
            "choose another location"
        ) from None
    except OSError as err:
        if _space_errno(err) is not None:
            raise DiskFullError(
                f"{directory}: cannot create the {what} directory ({err.strerror}); {_SPACE_FIX}"
            ) from err
        raise InputError(
            f"{directory}: cannot create the {what} directory ({err.strerror}); "
            "choose a writable location"
        ) from None
    return directory


# The open output sets (``output_set``), innermost last: target -> (temporary, keep_previous).
_SETS: list[dict[Path, tuple[Path, Path | None]]] = []


@contextlib.contextmanager
def output_set() -> Iterator[None]:
    """Publish the files ``atomic_output`` writes inside the block together (`aam` runs every
    command in one). Each file is written and fsynced under its temporary name as the block
    runs; the renames onto the final names happen only when the whole block succeeds. A failure
    anywhere in the block (a full disk, an I/O error, bad input found late, a non-finite value)
    removes the new temporaries and leaves the previous outputs as they were: never some new
    files beside old ones. Only a kill during the final renames (microseconds) can leave whole
    files of two runs side by side; a rerun replaces them all. A file written twice in one set
    is published once, its last version. Writes made with ``now=True`` are published at once:
    checkpoints, node-local copies of inputs the command reads, a failed check's report."""
    pending: dict[Path, tuple[Path, Path | None]] = {}
    _SETS.append(pending)
    try:
        yield
    except BaseException:
        for tmp, _ in pending.values():
            tmp.unlink(missing_ok=True)
        raise
    finally:
        _SETS.pop()
    if _SETS:  # a set inside a set: published with the enclosing one
        for target, entry in pending.items():
            _defer(target, *entry)
        return
    for target, (tmp, keep_previous) in pending.items():
        if keep_previous is not None and target.exists():
            os.replace(target, keep_previous)
        os.replace(tmp, target)
    for directory in {target.parent for target in pending}:
        _fsync_directory(directory)


@contextlib.contextmanager
def own_output_set() -> Iterator[None]:
    """``output_set`` published at the end of its own block even inside another set: a
    command run inside a command (a search trial's stages, whose files the next stage reads)."""
    enclosing = _SETS[:]
    _SETS.clear()
    try:
        with output_set():
            yield
    finally:
        _SETS[:] = enclosing


def _defer(target: Path, tmp: Path, keep_previous: Path | None) -> None:
    """Hand the written temporary of ``target`` to the innermost open set (replacing a
    version written before in the same set)."""
    earlier = _SETS[-1].get(target)
    if earlier is not None:
        earlier[0].unlink(missing_ok=True)
    _SETS[-1][target] = (tmp, keep_previous)


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike[str],
    keep_previous: str | os.PathLike[str] | None = None,
    what: str = "output",
    need: int | None = None,
    now: bool = False,
) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only on success.

    The temporary file is fsynced before the rename and removed if the body raises, so a
    failed or interrupted run never leaves a partial file under the final name. With
    ``keep_previous``, the file being replaced is first renamed there: a crash between the two
    renames leaves a complete file under one of the two names. The directory is created here.

    Running out of space while writing (a full file system, a used-up quota, the file size
    limit) raises ``DiskFullError``, one line naming ``path`` (described as ``what``), the bytes
    written and free, and the fix; the temporary is removed and the file under ``path`` kept.
    With ``need`` (the bytes the file will take, about), that is checked first
    (``check_space``): for writers such as HDF5 that cannot fail cleanly half-way. Inside an
    ``output_set`` the rename waits for the end of the set, unless ``now``.
    """
    target = check_output_path(path, what)
    make_output_dir(target.parent, what)
    _remove_debris(target)
    if need is not None:
        check_space(target, need, what)
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=_temp_prefix(target.name), suffix=TEMP_SUFFIX, dir=target.parent
        )
    except OSError as err:
        if _space_errno(err) is None:
            raise
        raise DiskFullError(_disk_full_line(target, what, err, 0)) from err
    os.close(fd)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file normal permissions
    deferred = False
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        if _SETS and not now:
            _defer(target, tmp, None if keep_previous is None else Path(keep_previous))
            deferred = True
            return
        if keep_previous is not None and target.exists():
            os.replace(target, keep_previous)
        os.replace(tmp, target)
    except (InputError, NonFiniteError):
        raise
    except Exception as err:
        written = _size(tmp)
        if _space_errno(err) is not None or _out_of_space(err, target.parent, written):
            raise DiskFullError(_disk_full_line(target, what, err, written)) from err
        if isinstance(err, OSError) and err.filename in (None, str(tmp)):  # the write failed
            raise InputError(_write_failed_line(target, what, err)) from err
        raise
    finally:
        if not deferred:
            tmp.unlink(missing_ok=True)
    _fsync_directory(target.parent)  # make the renames themselves durable


def _write_failed_line(target: Path, what: str, err: OSError) -> str:
    """One line for a write that failed for another reason than space (EIO, EROFS, ...)."""
    kept = f"the previous {target.name} is kept; " if target.exists() else ""
    return (
        f"{target}: cannot write the {what}: {err.strerror or err}; {kept}check the file "
        "system (mount, permissions, hardware) or choose another location, then rerun"
    )


# What a write that ran out of space raises: OSErrors with these errnos somewhere in the
# exception chain, or (torch.save to a path, HDF5 internals) an errno only in the message.
_SPACE_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EFBIG: "file too large"}
if hasattr(errno, "EDQUOT"):
    _SPACE_ERRNOS[errno.EDQUOT] = "disk quota exceeded"
_ERRNO_IN_TEXT = re.compile(r"\berrno\s*=\s*(\d+)")
_SPACE_FIX = "free space there or choose an output location on another file system"
_NEARLY_FULL = 16 << 20  # bytes free below which a writer's failure is taken for a full disk


def _chain(err: BaseException) -> Iterator[BaseException]:
    """``err`` and the exceptions it was raised from or while handling, each once."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [err]
    while pending:
        exc = pending.pop()
        if exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            yield exc
            pending += [exc.__cause__, exc.__context__]


def _space_errno(err: BaseException) -> int | None:
    """The out-of-space errno (ENOSPC, EDQUOT, EFBIG) in ``err``'s chain, if any."""
    for exc in _chain(err):
        if isinstance(exc, OSError) and exc.errno in _SPACE_ERRNOS:
            return exc.errno
        for match in _ERRNO_IN_TEXT.finditer(str(exc)):
            if int(match.group(1)) in _SPACE_ERRNOS:
                return int(match.group(1))
    return None


def _out_of_space(err: Exception, directory: Path, written: int | None) -> bool:
    """A writer failed without an errno (torch.save to a path says only "PytorchStreamWriter
    failed writing file"): was it for lack of space? True when the file reached the file size
    limit or the file system is (nearly) full."""
    if not isinstance(err, OSError | RuntimeError):  # a bug in the body, not a failed write
        return False
    if any(isinstance(exc, OSError) and exc.errno is not None for exc in _chain(err)):
        return False  # the system said why, and it was not space
    if written is not None and written >= _file_size_limit() > 0:
        return True
    free = _free_space(directory)
    return free is not None and (free[0] < _NEARLY_FULL or free[1] == 0)


def _file_size_limit() -> int:
    """The soft RLIMIT_FSIZE (`ulimit -f`) in bytes; 0 when unlimited or unknown."""
    try:
        import resource
    except ImportError:  # not on this platform
        return 0
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return 0 if soft == resource.RLIM_INFINITY or soft < 0 else soft


def _free_space(directory: Path) -> tuple[int, int] | None:
    """Bytes and inodes this process may still use on ``directory``'s file system."""
    try:
        stat = os.statvfs(directory)
    except (OSError, AttributeError):
        return None
    root = hasattr(os, "geteuid") and os.geteuid() == 0  # root may use the reserved blocks
    blocks, inodes = (stat.f_bfree, stat.f_ffree) if root else (stat.f_bavail, stat.f_favail)
    return blocks * stat.f_frsize, inodes if stat.f_files else 1


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _bytes(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError  # unreachable


def check_space(path: str | os.PathLike[str], need: int, what: str = "output") -> None:
    """``DiskFullError`` if ``need`` bytes cannot be written to ``path``: more than the file
    size limit (`ulimit -f`) or than is free on its file system. Creates nothing."""
    target = Path(path)
    limit = _file_size_limit()
    if limit and need > limit:
        reason = (
            f"file too large (it needs about {_bytes(need)}; the file size limit (ulimit -f) "
            f"is {_bytes(limit)})"
        )
        raise DiskFullError(_space_line(target, what, reason, _LIMIT_FIX))
    free = _free_space(_existing_ancestor(target.parent))
    if free is not None and need > free[0]:
        reason = f"not enough space (it needs about {_bytes(need)}, {_bytes(free[0])} free there)"
        raise DiskFullError(_space_line(target, what, reason, _SPACE_FIX))


_LIMIT_FIX = "raise the limit (ulimit -f unlimited) or make the output smaller"


def _space_line(target: Path, what: str, reason: str, fix: str) -> str:
    kept = f"the previous {target.name} is kept; " if target.exists() else ""
    return f"{target}: cannot write the {what}: {reason}; {kept}{fix}"


def _disk_full_line(target: Path, what: str, err: BaseException, written: int | None) -> str:
    """One line: what was written where, why it stopped, how much space, what to do."""
    code = _space_errno(err)
    limit = _file_size_limit()
    if code is None:  # a writer error without errno: say which condition was found
        over_limit = written is not None and written >= limit > 0
        code = errno.EFBIG if over_limit else errno.ENOSPC
    facts = [] if written is None else [f"{_bytes(written)} written"]
    fix = _SPACE_FIX
    if code == errno.EFBIG and limit:
        facts.append(f"the file size limit (ulimit -f) is {_bytes(limit)}")
        fix = _LIMIT_FIX
    elif code == errno.ENOSPC and (free := _free_space(target.parent)) is not None:
        facts.append(f"{_bytes(free[0])} free there" if free[1] else "no inodes free there")
    details = f" ({', '.join(facts)})" if facts else ""
    return _space_line(target, what, f"{_SPACE_ERRNOS[code]}{details}", fix)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_debris(target: Path) -> None:
    """Delete temporaries of ``target`` that a killed run left (not those of this process's
    open sets): a rerun leaves no debris. Two processes never write one output at once:
    Snakemake gives each output one job, and training directories are locked (run_lock)."""
    pending = {tmp for entries in _SETS for tmp, _ in entries.values()}
    for tmp in target.parent.glob(_temp_pattern(target.name)):
        if tmp not in pending and tmp.is_file():
            tmp.unlink(missing_ok=True)
            log.info("removed %s left by an interrupted run", tmp)


def remove_stale_temporaries(directory: str | os.PathLike[str], names: Iterable[str]) -> list[Path]:
    """Delete the temporaries ``atomic_output`` left in ``directory`` while writing one of
    ``names`` when its run was killed; return them. Nothing else is touched."""
    directory = Path(directory)
    stale = [tmp for name in names for tmp in directory.glob(_temp_pattern(name)) if tmp.is_file()]
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


def write_json(
    path: str | os.PathLike[str], data: Any, now: bool = False, **dumps_options: Any
) -> None:
    """Write ``data`` atomically as strict JSON: non-finite floats become ``null``, never
    the bare ``NaN``/``Infinity`` that other JSON readers reject (``now``: as ``atomic_output``)."""
    text = json.dumps(json_safe(data), indent=2, allow_nan=False, **dumps_options)
    with atomic_output(path, now=now) as tmp:
        tmp.write_text(text + "\n")
