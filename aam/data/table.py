"""Load a BIOM feature table (HDF5 or JSON, or a QIIME 2 ``table.qza``) with one-line errors
for bad input.

``load_table`` gives a ``biom.Table`` (the training commands). ``load_counts`` gives the lean
``Counts`` (IDs and a CSR matrix) that UniFrac needs: a BIOM 2.x HDF5 file is read straight
into CSR with h5py, without importing biom (0.6 s) or building a Table.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from aam.data.qiime2 import is_artifact, read_artifact
from aam.data.reconcile import preview, printable
from aam.errors import InputError
from aam.runtime.atomic import atomic_output

if TYPE_CHECKING:
    import biom

_FIX = (
    "provide a BIOM 2.1 HDF5 or BIOM 1.0 JSON table (convert with `biom convert --to-hdf5`) "
    "or a QIIME 2 table.qza"
)
# Training and prediction read counts as float32 (batches, log1p, relative abundances): every
# sample's total must stay below its largest value, or counts and their sums overflow to inf.
TRAINING_DTYPE = np.float32


@dataclass(frozen=True)
class Counts:
    """A feature table: ``matrix[k, i]`` is the count of observation ``k`` in sample ``i``."""

    observation_ids: list[str]
    sample_ids: list[str]
    matrix: sp.csr_matrix  # observations x samples, float64, canonical (sorted, no duplicates)

    @property
    def shape(self) -> tuple[int, int]:
        return self.matrix.shape


def counts_of(table: Counts | biom.Table) -> Counts:
    """``table`` as ``Counts`` (a ``biom.Table`` is converted; ``Counts`` pass through)."""
    if isinstance(table, Counts):
        return table
    matrix = sp.csr_matrix(table.matrix_data, dtype=np.float64)
    if not matrix.has_canonical_format:
        matrix = matrix.copy()  # the table's own matrix stays as it is
        matrix.sum_duplicates()
    return Counts([str(x) for x in table.ids("observation")], [str(x) for x in table.ids()], matrix)


def load_table(path: str | os.PathLike[str]) -> biom.Table:
    """Read a BIOM table (or a QIIME 2 FeatureTable[Frequency] artifact); missing, unreadable,
    empty or duplicate-ID tables, and counts that are not finite and >= 0, raise InputError."""
    import biom
    from biom.exception import TableException

    path = _existing(path)
    try:
        table = _artifact_table(path) if is_artifact(path) else biom.load_table(str(path))
    except (TableException, OSError, ValueError, TypeError, KeyError, IndexError) as err:
        if isinstance(err, TableException) and "Duplicate" in str(err):
            axis = "sample" if "sample" in str(err) else "observation"
            raise InputError(_duplicates_message(path, axis)) from err
        raise InputError(_unreadable(path, err)) from err
    _check_not_empty(path, *table.shape, table.nnz)
    check_counts(counts_of(table), path)
    return table


def write_table(
    path: str | os.PathLike[str], table: biom.Table, generated_by: str, what: str
) -> None:
    """Write ``table`` to ``path`` as BIOM HDF5 atomically (nothing written on an error),
    ``generated_by`` recorded in the file."""
    import biom

    with atomic_output(path, what=what) as tmp:
        with biom.util.biom_open(str(tmp), "w") as handle:
            table.to_hdf5(handle, generated_by)


def _artifact_table(path: Path) -> biom.Table:
    """The BIOM table inside a ``table.qza`` (always BIOM 2.1 HDF5), read from memory."""
    import biom
    import h5py

    with h5py.File(io.BytesIO(read_artifact(path, "table")), "r") as h5:
        return biom.Table.from_hdf5(h5)


def load_counts(path: str | os.PathLike[str]) -> Counts:
    """``load_table``'s result as ``Counts``, with its checks; HDF5 is read without biom."""
    import h5py

    path = _existing(path)
    if not h5py.is_hdf5(path):
        return counts_of(load_table(path))
    try:
        with h5py.File(path, "r") as h5:
            observation_ids = list(h5["observation/ids"].asstr()[()])
            sample_ids = list(h5["sample/ids"].asstr()[()])
            group = h5["observation/matrix"]
            data, indices, indptr = (group[name][()] for name in ("data", "indices", "indptr"))
        shape = (len(observation_ids), len(sample_ids))
        matrix = sp.csr_matrix((data.astype(np.float64), indices, indptr), shape=shape)
        matrix.check_format(full_check=True)
    except (OSError, ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError) as err:
        raise InputError(_unreadable(path, err, "HDF5 without a valid BIOM layout")) from err
    for axis, ids in (("observation", observation_ids), ("sample", sample_ids)):
        if len(set(ids)) < len(ids):
            raise InputError(_duplicates_message(path, axis, ids))
    matrix.sum_duplicates()
    _check_not_empty(path, *shape, matrix.count_nonzero())
    counts = Counts(observation_ids, sample_ids, matrix)
    check_counts(counts, path)
    return counts


def check_counts(counts: Counts, name: str | os.PathLike[str]) -> None:
    """Every count is finite and >= 0 (fractions are fine) and their sum is finite; otherwise
    InputError naming one offending sample (and ASV). Reads the stored entries only."""
    matrix = counts.matrix
    if _bad_counts(matrix.data).any():
        entries = matrix.tocoo()
        bad = np.flatnonzero(_bad_counts(entries.data))
        first = bad[0]
        asv = printable(counts.observation_ids[entries.row[first]])
        sample = printable(counts.sample_ids[entries.col[first]])
        raise InputError(
            f"{name}: {len(bad)} count(s) are NaN, infinite or negative (e.g. "
            f"{float(entries.data[first])} for ASV {asv} in sample {sample}); counts must be "
            "finite and >= 0: fix them or rebuild the table from the read counts"
        )
    with np.errstate(over="ignore"):
        totals = np.asarray(matrix.sum(axis=0), dtype=np.float64).ravel()
        grand_total = totals.sum()
    if not np.isfinite(grand_total):
        raise InputError(
            f"{name}: the counts sum past the float64 range (largest sample: "
            f"{printable(counts.sample_ids[np.argmax(totals)])}); divide the counts by a constant"
        )


def check_training_counts(table: Counts | biom.Table, name: str | os.PathLike[str]) -> None:
    """Every sample's reads sum below the largest float32 (``TRAINING_DTYPE``): training and
    prediction read counts, and their per-sample sums, in float32. Otherwise InputError naming
    the sample, its largest count and ASV, and the fix."""
    limit = float(np.finfo(TRAINING_DTYPE).max)
    matrix = table.matrix if isinstance(table, Counts) else table.matrix_data
    with np.errstate(over="ignore"):
        totals = np.asarray(matrix.sum(axis=0, dtype=np.float64)).ravel()
    over = np.flatnonzero(totals > limit)
    if not len(over):
        return
    counts = counts_of(table)
    sample = over[0]
    column = counts.matrix[:, sample].tocoo()
    top = int(np.argmax(column.data))
    asv = printable(counts.observation_ids[column.row[top]])
    raise InputError(
        f"{name}: {len(over)} sample(s) hold more reads than float32, the training precision, "
        f"can sum (e.g. sample {printable(counts.sample_ids[sample])}: {totals[sample]:.4g} reads, "
        f"{column.data[top]:.4g} of them ASV {asv}; float32 max {limit:.4g}); counts must be "
        "finite, >= 0 and sum below that per sample: divide the counts by a constant (relative "
        "abundances stay the same)"
    )


def _existing(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "not found"
        raise InputError(f"{path}: BIOM table {what}; check the path")
    return path


def _unreadable(path: Path, err: Exception, what: str = "") -> str:
    reason = " ".join(f"{type(err).__name__}: {err}".split())
    return f"{path}: not a readable BIOM table ({what + ': ' if what else ''}{reason}); {_FIX}"


def _duplicates_message(path: Path, axis: str, ids: Sequence[str] = ()) -> str:
    repeated = [x for x, n in Counter(ids).items() if n > 1]
    example = f" ({preview(repeated, 3)})" if repeated else ""
    return (
        f"{path}: duplicate {axis} IDs in the BIOM table{example}; make every {axis} ID unique "
        "(rename or merge the duplicates) and rewrite the table"
    )


def _check_not_empty(path: Path, n_obs: int, n_samples: int, nnz: int) -> None:
    if n_obs == 0 or n_samples == 0 or nnz == 0:
        raise InputError(
            f"{path}: BIOM table is empty or not a BIOM table ({n_obs} observations x "
            f"{n_samples} samples, {nnz} non-zero counts); {_FIX} with your read counts"
        )


def _bad_counts(values: np.ndarray) -> np.ndarray:
    """Which of ``values`` are NaN, infinite or negative."""
    return ~(np.isfinite(values) & (values >= 0))
