"""Load a BIOM feature table (HDF5 or JSON) with one-line errors for bad input."""

from __future__ import annotations

import os
from pathlib import Path

import biom
import numpy as np
from biom.exception import TableException

from aam.data.reconcile import printable
from aam.errors import InputError

_FIX = "provide a BIOM 2.1 HDF5 or BIOM 1.0 JSON table (convert with `biom convert --to-hdf5`)"


def load_table(path: str | os.PathLike[str]) -> biom.Table:
    """Read a BIOM table; missing, unreadable, empty or duplicate-ID tables, and counts that
    are not finite and >= 0, raise InputError."""
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
    check_counts(table, path)
    return table


def check_counts(table: biom.Table, name: str | os.PathLike[str]) -> None:
    """Every count is finite and >= 0 (fractions are fine) and their sum is finite; otherwise
    InputError naming one offending sample (and ASV). Reads the stored entries only."""
    counts = table.matrix_data
    if _bad_counts(counts.data).any():
        entries = counts.tocoo()
        bad = np.flatnonzero(_bad_counts(entries.data))
        first = bad[0]
        asv = printable(table.ids("observation")[entries.row[first]])
        sample = printable(table.ids()[entries.col[first]])
        raise InputError(
            f"{name}: {len(bad)} count(s) are NaN, infinite or negative (e.g. "
            f"{float(entries.data[first])} for ASV {asv} in sample {sample}); counts must be "
            "finite and >= 0: fix them or rebuild the table from the read counts"
        )
    with np.errstate(over="ignore"):
        totals = np.asarray(counts.sum(axis=0), dtype=np.float64).ravel()
        grand_total = totals.sum()
    if not np.isfinite(grand_total):
        raise InputError(
            f"{name}: the counts sum past the float64 range (largest sample: "
            f"{printable(table.ids()[np.argmax(totals)])}); divide the counts by a constant"
        )


def _bad_counts(values: np.ndarray) -> np.ndarray:
    """Which of ``values`` are NaN, infinite or negative."""
    return ~(np.isfinite(values) & (values >= 0))
