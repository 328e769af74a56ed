"""Output file names: refused before any work when the writer would not honour the suffix
or the location cannot be written."""

from __future__ import annotations

import os
from pathlib import Path

from aam.errors import InputError
from aam.runtime.atomic import check_output_path

TSV_SUFFIXES = (".tsv", ".txt")


def check_output_file(path: str | os.PathLike[str], suffixes: tuple[str, ...], what: str) -> Path:
    """``path`` if it ends in one of ``suffixes`` and can be written, else InputError."""
    target = Path(path)
    if target.suffix not in suffixes:
        found = f"extension {target.suffix!r}" if target.suffix else "no extension"
        names = ", ".join(f"*{suffix}" for suffix in suffixes)
        raise InputError(
            f"{target}: unsupported {what} file name ({found}); name it one of {names}"
        )
    return check_output_path(target, what)
