"""A directory nobody may write to, for the tests of read-only outputs and installs."""

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def read_only_dir(path: Path) -> Iterator[Path]:
    """``path`` as a directory nobody may write to: mode 0500 for a normal user; for root (who
    writes through any mode) a read-only tmpfs mounted there, as a read-only file system."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o500)
        try:
            yield path
        finally:
            path.chmod(0o700)
        return
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)
