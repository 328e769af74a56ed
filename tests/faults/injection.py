"""Faults at the write points of `aam`: each fsync of a temporary that ``atomic_output``
(aam/runtime/atomic.py) writes, the point where a real write-back error surfaces (ENOSPC or
EIO from a full or failing file system, NFS/VAST included) and where a SIGKILL finds the file
written but not yet published.

In the test process ``WritePoints`` replaces ``os.fsync`` (monkeypatch); for a kill the command
runs in a child: ``python tests/faults/injection.py kill K -- <aam arguments>`` kills itself at
its K-th write point.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
from pathlib import Path

# atomic_output's temporaries: .<name>.<random>.tmp next to the target
TEMPORARY = re.compile(r"/\.[^/]+\.[^/.]+\.tmp$")
FAULTS = ("enospc", "eio", "kill")
_fsync = os.fsync
INJECTION = Path(__file__)


class WritePoints:
    """An ``os.fsync`` that counts the fsyncs of atomic_output temporaries (``targets``: the
    final names, in order) and applies ``fault`` at the ``at``-th (1-based; 0: none)."""

    def __init__(self, fault: str | None = None, at: int = 0) -> None:
        assert fault is None or fault in FAULTS, fault
        self.fault, self.at = fault, at
        self.targets: list[Path] = []

    def __call__(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if TEMPORARY.search(path):
            name = Path(path).name
            target = Path(path).with_name(name[1 : name.rindex(".", 0, -4)])
            self.targets.append(target)
            if len(self.targets) == self.at:
                self._inject()
        _fsync(fd)

    def _inject(self) -> None:
        if self.fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        code = errno.ENOSPC if self.fault == "enospc" else errno.EIO
        raise OSError(code, os.strerror(code))


def published(directory: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``directory`` but temporaries: relative path -> (inode, bytes). An
    output replaced by a rename has a new inode, even with the same bytes."""
    return {
        str(p.relative_to(directory)): (p.stat().st_ino, p.read_bytes())
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not TEMPORARY.search(str(p))
    }


def temporaries(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if TEMPORARY.search(str(p))]


if __name__ == "__main__":  # python injection.py FAULT K -- aam arguments
    fault, at, separator, *argv = sys.argv[1:]
    assert separator == "--", sys.argv
    os.fsync = WritePoints(fault, int(at))
    from aam.cli import main

    sys.exit(main(argv))
