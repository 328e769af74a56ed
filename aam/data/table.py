"""Load a BIOM feature table (HDF5 or JSON) with one-line errors for bad input."""

from __future__ import annotations

import os
from pathlib import Path

import biom
from biom.exception import TableException

from aam.errors import InputError

_FIX = "provide a BIOM 2.1 HDF5 or BIOM 1.0 JSON table (convert with `biom convert --to-hdf5`)"


def load_table(path: str | os.PathLike[str]) -> biom.Table:
    """Read a BIOM table; missing, unreadable, empty or duplicate-ID tables raise InputError."""
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "not found"
        raise InputError(f"{path}: BIOM table {what}; check the path")
    try:
        table = biom.load_table(str(path))
    except (TableException, OSError, ValueError, TypeError, KeyError, IndexError) as err:
        if isinstance(err, TableException) and "Duplicate" in str(err):
            axis = "sample" if "sample" in str(err) else "observation"
            raise InputError(
                f"{path}: duplicate {axis} IDs in the BIOM table; make every {axis} ID unique "
                "(rename or merge the duplicates) and rewrite the table"
            ) from err
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        raise InputError(f"{path}: not a readable BIOM table ({reason}); {_FIX}") from err
    n_obs, n_samples = table.shape
    if n_obs == 0 or n_samples == 0 or table.nnz == 0:
        raise InputError(
            f"{path}: BIOM table is empty or not a BIOM table ({n_obs} observations x "
            f"{n_samples} samples, {table.nnz} non-zero counts); {_FIX} with your read counts"
        )
    return table
