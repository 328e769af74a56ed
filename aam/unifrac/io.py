"""Distance-matrix files: HDF5 (``matrix`` + ``order``, as Striped UniFrac writes) or TSV."""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from pathlib import Path

import h5py
import numpy as np

from aam.atomic import atomic_output
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.data.reconcile import preview, printable
from aam.errors import InputError

HDF5_SUFFIXES = (".h5", ".hdf5")
SUFFIXES = HDF5_SUFFIXES + TSV_SUFFIXES
_FIX = "recompute it with `aam unifrac`"
_TSV_BREAKERS = ("\t", "\n", "\r")
_BLOCK = 512  # rows checked at a time


def check_distance_output(path: str | Path) -> Path:
    """``path`` if it names a distance matrix file (.h5, .hdf5, .tsv, .txt) that can be
    written; InputError otherwise. Cheap: call it before computing the matrix."""
    return check_output_file(path, SUFFIXES, "distance matrix")


def write_distance_matrix(
    path: str | Path,
    ids: Sequence[str],
    matrix: np.ndarray,
    attrs: Mapping[str, str | float | int] | None = None,
) -> None:
    """Write atomically: ``.tsv``/``.txt`` as skbio's lsmat TSV, ``.h5``/``.hdf5`` as HDF5."""
    path = check_distance_output(path)
    tsv = path.suffix in TSV_SUFFIXES
    if tsv:
        _check_tsv_ids(path, ids)
    with atomic_output(path) as tmp:
        if tsv:
            import skbio  # 1 s of imports: only for TSV output, not for the training commands

            skbio.DistanceMatrix(matrix, list(ids), validate=False).write(str(tmp), format="lsmat")
            return
        with h5py.File(tmp, "w") as h5:
            h5.create_dataset("matrix", data=matrix)
            h5.create_dataset("order", data=np.array(list(ids), dtype=h5py.string_dtype()))
            for key, value in (attrs or {}).items():
                h5.attrs[key] = value


def read_distance_matrix(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Read (sample IDs, square matrix) from a file written by ``write_distance_matrix`` (or
    Striped UniFrac). A corrupt, truncated or inconsistent file, or distances that are not
    finite and >= 0, raise InputError."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: distance matrix not found; run `aam unifrac` to create it")
    ids, matrix = _read_tsv(path) if path.suffix in TSV_SUFFIXES else _read_hdf5(path)
    _check_matrix(path, ids, matrix)
    return ids, matrix


def _check_tsv_ids(path: Path, ids: Sequence[str]) -> None:
    bad = [sid for sid in ids if any(char in str(sid) for char in _TSV_BREAKERS)]
    if bad:
        raise InputError(
            f"{path}: {len(bad)} sample ID(s) hold a tab or line break (e.g. {printable(bad[0])}) "
            "and cannot be written as TSV; write the matrix as .h5"
        )


def _read_tsv(path: Path) -> tuple[list[str], np.ndarray]:
    """The lsmat layout: a header of IDs after an empty first cell, then one row per ID."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: distance matrix TSV is not UTF-8 text ({err}); {_FIX}") from err
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    rows = [line.split("\t") for line in lines if line]
    if len(rows) < 2:
        raise InputError(f"{path}: distance matrix TSV has no rows; {_FIX}")
    ids = rows[0][1:]
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(ids) + 1:
            raise InputError(
                f"{path}: distance matrix row {number} has {len(row) - 1} values for "
                f"{len(ids)} IDs in the header (truncated or ragged); {_FIX}"
            )
    labels = [row[0] for row in rows[1:]]
    if labels != ids:
        raise InputError(
            f"{path}: the header names {len(ids)} IDs ({preview(ids, 3)}) but the rows are "
            f"labelled {len(labels)} ({preview(labels, 3)}), not the same in the same order; "
            f"{_FIX}"
        )
    try:
        matrix = np.array([row[1:] for row in rows[1:]], dtype=np.float64)
    except ValueError as err:
        raise InputError(f"{path}: non-numeric distance ({printable(err)}); {_FIX}") from err
    return ids, matrix


def _read_hdf5(path: Path) -> tuple[list[str], np.ndarray]:
    if not h5py.is_hdf5(path):
        raise InputError(f"{path}: not an HDF5 file; distance matrices are .h5, .tsv or .txt")
    try:
        with h5py.File(path, "r") as h5:
            order, matrix = _datasets(path, h5)
            ids = [x.decode() if isinstance(x, bytes) else str(x) for x in order[()]]
            return ids, matrix[()]
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        raise InputError(f"{path}: corrupt or truncated HDF5 file ({reason}); {_FIX}") from err


def _datasets(path: Path, h5: h5py.File) -> tuple[h5py.Dataset, h5py.Dataset]:
    """The ``order`` (1-D strings) and ``matrix`` (numbers) datasets."""
    missing = [name for name in ("matrix", "order") if name not in h5]
    if missing:
        raise InputError(
            f"{path}: HDF5 file lacks dataset(s) {', '.join(missing)}; "
            "write it with `aam unifrac` (datasets 'matrix' and 'order')"
        )
    order, matrix = h5["order"], h5["matrix"]
    if not (isinstance(order, h5py.Dataset) and order.ndim == 1 and order.dtype.kind in "SO"):
        raise InputError(f"{path}: 'order' is not a list of sample ID strings; {_FIX}")
    if not (isinstance(matrix, h5py.Dataset) and matrix.dtype.kind in "fiu"):
        raise InputError(f"{path}: 'matrix' does not hold numbers; {_FIX}")
    return order, matrix


def _check_matrix(path: Path, ids: list[str], matrix: np.ndarray) -> None:
    """Square, one row per unique ID, and every distance finite, >= 0 and symmetric."""
    if matrix.shape != (len(ids), len(ids)):
        raise InputError(
            f"{path}: 'matrix' is {matrix.shape} but 'order' has {len(ids)} IDs; "
            "regenerate the file"
        )
    if not ids:
        raise InputError(f"{path}: the distance matrix holds no samples; {_FIX}")
    duplicated = [sid for sid, n in collections.Counter(ids).items() if n > 1]
    if duplicated:
        raise InputError(f"{path}: duplicate sample IDs ({preview(duplicated, 3)}); {_FIX}")
    for start in range(0, len(ids), _BLOCK):  # by row blocks: no N x N temporaries
        rows, columns = matrix[start : start + _BLOCK], matrix[:, start : start + _BLOCK].T
        for problem, bad in (
            ("NaN or infinite", ~np.isfinite(rows)),
            ("negative", rows < 0),
            ("asymmetric", ~np.isclose(rows, columns, rtol=1e-5, atol=1e-8)),
        ):
            if bad.any():
                i, j = np.argwhere(bad)[0]
                raise InputError(
                    f"{path}: {problem} distances (e.g. {rows[i, j]} between "
                    f"{printable(ids[start + i])} and {printable(ids[j])}); {_FIX}"
                )
