"""One writer per run: an exclusive lock on a directory, held by the process that writes it.

``lock_directories([OUTPUT_DIR, CHECKPOINT_DIR], "aam pretrain")`` takes ``<dir>/.aam.lock`` in
each directory (``flock``, released by the OS when the process dies, even by SIGKILL) and
writes into it who holds it: ``{"pid", "host", "started", "command", ...}``. A second writer
gets one line (an ``InputError``) naming that process. ``release()`` (or leaving the ``with``
block, or the end of the process) unlocks and removes the file, so a finished run leaves
nothing behind; a killed one leaves the file, whose lock is free: the next run takes it over.

Where the file system has no locks (``flock`` fails with ENOLCK/EOPNOTSUPP/ENOSYS: some NFS,
VAST or Lustre mounts), the record decides: the file is created exclusively (O_EXCL); a record of
this host is stale when its process is gone (PID and its start time), a record of another host
when its file has not been touched for ``STALE_AFTER_S`` (the holder touches it every
``HEARTBEAT_S``). Standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from aam.errors import InputError

log = logging.getLogger(__name__)
LOCK_NAME = ".aam.lock"
HEARTBEAT_S = 30.0  # the holder touches its lock file this often
STALE_AFTER_S = 300.0  # without locks: another host's record untouched this long is stale
NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS}
BUSY = {errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES}
_HELD: set[RunLock] = set()  # released at exit if still held


def process_start(pid: int) -> int | None:
    """Start time of process ``pid`` (clock ticks since boot, /proc/PID/stat field 22); None if
    there is no such live process (a zombie counts as gone). Where /proc is missing: 0 for a
    process that exists, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        return 0 if _exists(pid) else None
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after "pid (comm)": state is field 3
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: what ``.aam.lock`` records."""

    pid: int
    host: str
    started: str
    command: str
    pid_start: int | None = None
    slurm_job: str | None = None

    @classmethod
    def this_process(cls, command: str) -> Holder:
        return cls(
            pid=os.getpid(),
            host=socket.gethostname(),
            started=datetime.now().astimezone().isoformat(timespec="seconds"),
            command=command,
            pid_start=process_start(os.getpid()),
            slurm_job=os.environ.get("SLURM_JOB_ID"),
        )

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        try:
            data = json.loads(text)
            return cls(
                pid=int(data["pid"]),
                host=str(data["host"]),
                started=str(data["started"]),
                command=str(data["command"]),
                pid_start=data.get("pid_start"),
                slurm_job=data.get("slurm_job"),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        job = f", SLURM job {self.slurm_job}" if self.slurm_job else ""
        return f"pid {self.pid} on host {self.host}{job}, since {self.started}"

    def alive_here(self) -> bool:
        """Whether this record's process (of this host) still runs: same PID, same start."""
        start = process_start(self.pid)
        return start is not None and (self.pid_start in (None, 0) or start in (0, self.pid_start))


def _read(path: Path) -> tuple[Holder | None, float | None]:
    """The record at ``path`` and the age of its last touch in seconds (None, None if gone)."""
    try:
        text, age = path.read_text(), time.time() - path.stat().st_mtime
    except (FileNotFoundError, UnicodeDecodeError):
        return None, None
    return Holder.parse(text), age


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), path.stat()
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


class RunLock:
    """The lock of one directory (``acquire`` / ``release``; a context manager)."""

    def __init__(self, directory: str | os.PathLike[str], command: str, doing: str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self.command, self.doing = command, doing
        self._fd: int | None = None
        self._owner = 0  # the pid that took it (a forked child must not remove it)
        self._created: list[Path] = []  # directories the lock made, deepest first
        self._stop = threading.Event()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunLock:
        """Take the lock or raise InputError naming its holder (one line)."""
        if not self.directory.is_dir():  # e.g. OUTPUT_DIR/checkpoints before the first save
            missing = [d for d in (self.directory, *self.directory.parents) if not d.exists()]
            self.directory.mkdir(parents=True)
            self._created = missing
        try:
            for _ in range(5):  # a holder releasing as we open: its file is gone, try again
                try:
                    fd, created = (
                        os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644),
                        True,
                    )
                except FileExistsError:
                    try:
                        fd, created = os.open(self.path, os.O_RDWR), False
                    except FileNotFoundError:
                        continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as err:
                    if err.errno in NO_LOCKS and created:  # created exclusively: it is ours
                        self._note_no_locks(err)
                        self._hold(fd)
                        return self
                    os.close(fd)
                    if err.errno in NO_LOCKS:
                        self._note_no_locks(err)
                        return self._acquire_without_locks()
                    if err.errno not in BUSY:
                        raise
                    holder, _ = _read(self.path)
                    raise InputError(self._busy(holder)) from None
                if not _same_file(fd, self.path):
                    os.close(fd)
                    continue
                previous = Holder.parse(os.pread(fd, 1 << 16, 0).decode(errors="replace"))
                if previous is not None:
                    log.warning(
                        "%s: taking over the lock of %s %s: its lock was free (that process "
                        "is gone)",
                        self.path,
                        previous.command,
                        previous.describe(),
                    )
                self._hold(fd)
                return self
            raise InputError(f"{self.path}: could not take the lock (it keeps changing); retry")
        except BaseException:
            self._remove_created_dir()
            raise

    def _note_no_locks(self, err: OSError) -> None:
        log.info(
            "%s: this file system has no file locks (%s); the lock file's record decides",
            self.path,
            os.strerror(err.errno or 0),
        )

    def _acquire_without_locks(self) -> RunLock:
        """No locks on this file system: an exclusively created file and its record decide."""
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder, age = _read(self.path)
                if age is None:
                    continue  # removed meanwhile
                if self._alive(holder, age):
                    raise InputError(self._busy(holder, age)) from None
                gone = "its process is gone" if holder else "unreadable and untouched"
                who = f"{holder.command} {holder.describe()}" if holder else "?"
                log.warning("%s: taking over the stale lock of %s (%s)", self.path, who, gone)
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                continue
            self._hold(fd)
            return self
        raise InputError(f"{self.path}: could not take the lock (it keeps changing); retry")

    @staticmethod
    def _alive(holder: Holder | None, age: float) -> bool:
        if holder is not None and holder.host == socket.gethostname():
            return holder.alive_here()
        return age < STALE_AFTER_S  # another host (or a record being written): its heartbeat

    def _busy(self, holder: Holder | None, age: float | None = None) -> str:
        """The one line for a lock held by ``holder``."""
        who = f"another {holder.command} ({holder.describe()})" if holder else "another process"
        line = f"{self.directory}: {who} is {self.doing}; wait for it or stop it (scancel/kill)"
        if age is not None:  # no locks here: the record may outlive its process
            line += (
                f"; this file system has no file locks and the lock file was touched "
                f"{age:.0f} s ago: if that process is gone, remove {self.path}"
            )
        return line

    def _hold(self, fd: int) -> None:
        record = json.dumps(asdict(Holder.this_process(self.command))) + "\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, record.encode(), 0)
        os.fsync(fd)
        self._fd, self._owner = fd, os.getpid()
        self._stop = threading.Event()
        threading.Thread(
            target=self._heartbeat, args=(self._stop,), daemon=True, name="aam-lock"
        ).start()
        _HELD.add(self)

    def _heartbeat(self, stop: threading.Event) -> None:
        """Touch the lock file: without file locks, another host judges the record by it."""
        while not stop.wait(HEARTBEAT_S):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def release(self) -> None:
        """Remove the lock file (if it is still this one) and unlock."""
        fd, self._fd = self._fd, None
        _HELD.discard(self)
        if fd is None:
            return
        self._stop.set()
        mine = self._owner == os.getpid()
        if mine:
            with contextlib.suppress(OSError):
                if _same_file(fd, self.path):
                    self.path.unlink()  # before unlocking: a waiter then finds no file
        os.close(fd)
        if mine:
            self._remove_created_dir()

    def _remove_created_dir(self) -> None:
        """Remove the directories the lock made, those still empty (nothing was saved)."""
        created, self._created = self._created, []
        for directory in created:
            try:
                directory.rmdir()
            except OSError:
                return  # not empty: it and its parents hold the run's files

    def __enter__(self) -> RunLock:
        return self if self.held else self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class RunLocks:
    """The locks of several directories, released together (a context manager)."""

    def __init__(self, locks: list[RunLock]) -> None:
        self.locks = locks

    def release(self) -> None:
        for lock in reversed(self.locks):
            lock.release()

    def __enter__(self) -> RunLocks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_directories(
    directories: Iterable[str | os.PathLike[str]],
    command: str,
    doing: str = "writing this run",
) -> RunLocks:
    """Lock each directory (each existing or creatable; duplicates once) for ``command``, or
    raise InputError naming the holder; the ones taken are released on failure."""
    taken: list[RunLock] = []
    seen: set[str] = set()
    try:
        for directory in directories:
            key = os.path.realpath(directory)
            if key not in seen:
                seen.add(key)
                taken.append(RunLock(directory, command, doing).acquire())
    except BaseException:
        RunLocks(taken).release()
        raise
    return RunLocks(taken)


_WORKFLOW: list[RunLocks] = []


def lock_workflow(work: str | os.PathLike[str]) -> None:
    """Hold the lock of a workflow's work directory in this (Snakemake) process until
    ``unlock_workflow`` or the process's end; InputError names the other Snakemake."""
    if not _WORKFLOW:
        Path(work).mkdir(parents=True, exist_ok=True)  # its jobs write there anyway
        _WORKFLOW.append(lock_directories([work], "snakemake", "running this workflow"))


def unlock_workflow() -> None:
    while _WORKFLOW:
        _WORKFLOW.pop().release()


@atexit.register
def _release_all() -> None:
    for lock in list(_HELD):
        lock.release()
