"""Distance-matrix files: HDF5 (``matrix`` + ``order``, as Striped UniFrac writes) or TSV."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import h5py
import numpy as np
import skbio

from aam.atomic import atomic_output
from aam.errors import InputError

TSV_SUFFIXES = (".tsv", ".txt")


def write_distance_matrix(
    path: str | Path,
    ids: Sequence[str],
    matrix: np.ndarray,
    attrs: Mapping[str, str | float | int] | None = None,
) -> None:
    """Write atomically: ``.tsv``/``.txt`` as skbio's lsmat TSV, anything else as HDF5."""
    path = Path(path)
    with atomic_output(path) as tmp:
        if path.suffix in TSV_SUFFIXES:
            skbio.DistanceMatrix(matrix, list(ids), validate=False).write(str(tmp), format="lsmat")
            return
        with h5py.File(tmp, "w") as h5:
            h5.create_dataset("matrix", data=matrix)
            h5.create_dataset("order", data=np.array(list(ids), dtype=h5py.string_dtype()))
            for key, value in (attrs or {}).items():
                h5.attrs[key] = value


def read_distance_matrix(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Read (sample IDs, square matrix) from a file written by ``write_distance_matrix``."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: distance matrix not found; run `aam unifrac` to create it")
    if path.suffix in TSV_SUFFIXES:
        dm = skbio.DistanceMatrix.read(str(path), format="lsmat")
        return list(dm.ids), dm.data
    if not h5py.is_hdf5(path):
        raise InputError(f"{path}: not an HDF5 file; distance matrices are .h5, .tsv or .txt")
    with h5py.File(path, "r") as h5:
        missing = [name for name in ("matrix", "order") if name not in h5]
        if missing:
            raise InputError(
                f"{path}: HDF5 file lacks dataset(s) {', '.join(missing)}; "
                "write it with `aam unifrac` (datasets 'matrix' and 'order')"
            )
        order = [x.decode() if isinstance(x, bytes) else str(x) for x in h5["order"][()]]
        matrix = h5["matrix"][()]
    if matrix.shape != (len(order), len(order)):
        raise InputError(
            f"{path}: 'matrix' is {matrix.shape} but 'order' has {len(order)} IDs; "
            "regenerate the file"
        )
    return order, matrix
