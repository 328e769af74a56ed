"""Distance-matrix files: HDF5 (``matrix`` + ``order``, as Striped UniFrac writes) or TSV."""

from __future__ import annotations

import collections
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import h5py
import numpy as np

from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.data.reconcile import preview, printable
from aam.errors import InputError
from aam.runtime.atomic import atomic_output

HDF5_SUFFIXES = (".h5", ".hdf5")
SUFFIXES = HDF5_SUFFIXES + TSV_SUFFIXES
_FIX = "recompute it with `aam unifrac`"
# Characters a sample ID of an lsmat TSV cannot hold: tabs and line breaks split its cells and
# lines; scikit-bio finds the format with csv.Sniffer on the header line, which takes quotes
# for quoting and prefers ',' to a tab as the delimiter (the file is then "not lsmat").
_TSV_BREAKERS = {"\t": "a tab", "\n": "a line break", "\r": "a line break"}
_SNIFFER_BREAKERS = {'"': "a double quote", "'": "a single quote", ",": "a comma"}
_BLOCK = 512  # rows checked at a time
CHECK_BAND_BYTES = 128 << 20  # rows MatrixRows.check_whole holds at once (a band of float64)


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
        check_tsv_ids(path, ids)
    need = None if tsv else hdf5_bytes(ids, matrix)  # HDF5 cannot fail cleanly half-way
    with atomic_output(path, what="distance matrix", need=need) as tmp:
        if tsv:
            import skbio  # 1 s of imports: only for TSV output, not for the training commands

            skbio.DistanceMatrix(matrix, list(ids), validate=False).write(str(tmp), format="lsmat")
            return
        with h5py.File(tmp, "w") as h5:
            h5.create_dataset("matrix", data=matrix)
            h5.create_dataset("order", data=np.array(list(ids), dtype=h5py.string_dtype()))
            for key, value in (attrs or {}).items():
                h5.attrs[key] = value
            h5.flush()  # a write error (a full disk) raises here, not lost in the close


def hdf5_bytes(ids: Sequence[str], *arrays: np.ndarray) -> int:
    """About the bytes of an HDF5 file of ``arrays`` and the string dataset ``ids``, for the
    space check before writing it (HDF5 may crash the process when a write fails half-way)."""
    strings = sum(len(str(sid).encode()) + 32 for sid in ids)  # global heap + reference
    return sum(array.nbytes for array in arrays) + strings + (16 << 10)


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


def check_distance_ids(path: str | Path, ids: Sequence[str]) -> None:
    """For a TSV ``path``: ``check_tsv_ids``; HDF5 holds any ID. Call it before computing."""
    if Path(path).suffix in TSV_SUFFIXES:
        check_tsv_ids(Path(path), ids)


def check_tsv_ids(path: Path, ids: Sequence[str]) -> None:
    """InputError naming the first sample ID that an lsmat TSV cannot carry so that
    ``skbio.DistanceMatrix.read(path)`` reads it back as written: a tab or line break, a quote
    or comma (they derail scikit-bio's format sniffing), an empty ID or surrounding whitespace
    (stripped on reading), or a leading ``#`` on the first ID (its header reads as a comment)."""
    bad = [(k, sid, why) for k, sid in enumerate(map(str, ids)) if (why := _tsv_id_problem(sid, k))]
    if bad:
        _, sid, why = bad[0]
        raise InputError(
            f"{path}: sample ID {sid!r} {why}, so an lsmat TSV cannot hold it as written "
            f"({len(bad)} such ID(s)); write the matrix as .h5 (any ID), or rename the samples"
        )


def _tsv_id_problem(sid: str, position: int) -> str:
    """Why ``sid`` (at ``position`` in the header) cannot be written to an lsmat TSV, or ''."""
    for chars in (_TSV_BREAKERS, _SNIFFER_BREAKERS):
        for char, name in chars.items():
            if char in sid:
                return f"holds {name}"
    if not sid:
        return "is empty"
    if sid != sid.strip():
        return "starts or ends with whitespace"
    if position == 0 and sid.startswith("#"):
        return "starts with '#' and comes first (the header line would read as a comment)"
    return ""


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
    with _hdf5_datasets(path) as (order, matrix):
        return _ids(order), matrix[()]


@contextmanager
def _hdf5_datasets(path: Path) -> Iterator[tuple[h5py.Dataset, h5py.Dataset]]:
    """The ``order`` and ``matrix`` datasets of an HDF5 matrix file, open in the block; a file
    that is not HDF5, lacks them or fails to read (in the block too) is one InputError line."""
    if not h5py.is_hdf5(path):
        raise InputError(f"{path}: not an HDF5 file; distance matrices are .h5, .tsv or .txt")
    try:
        with h5py.File(path, "r") as h5:
            yield _datasets(path, h5)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        raise InputError(f"{path}: corrupt or truncated HDF5 file ({reason}); {_FIX}") from err


def _ids(order: h5py.Dataset) -> list[str]:
    return [x.decode() if isinstance(x, bytes) else str(x) for x in order[()]]


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
            ("asymmetric", ~np.isclose(rows, columns, rtol=_RTOL, atol=_ATOL)),
        ):
            if bad.any():
                i, j = np.argwhere(bad)[0]
                raise InputError(
                    f"{path}: {problem} distances (e.g. {rows[i, j]} between "
                    f"{printable(ids[start + i])} and {printable(ids[j])}); {_FIX}"
                )


class MatrixRows:
    """A distance matrix file read by rows: the sample IDs up front, then only the rows a
    block of samples needs (HDF5 row reads in sorted order; a TSV's rows by their byte
    offsets), a few rows at a time, never the whole N x N matrix. Every block read is
    checked: finite, >= 0 and symmetric."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"{path}: distance matrix not found; run `aam unifrac` to create it")
        self.tsv = self.path.suffix in TSV_SUFFIXES
        self.ids, self._offsets = _tsv_index(self.path) if self.tsv else _hdf5_ids(self.path)
        if not self.ids:
            raise InputError(f"{self.path}: the distance matrix holds no samples; {_FIX}")
        duplicated = [sid for sid, n in collections.Counter(self.ids).items() if n > 1]
        if duplicated:
            raise InputError(
                f"{self.path}: duplicate sample IDs ({preview(duplicated, 3)}); {_FIX}"
            )

    def block(self, rows: np.ndarray) -> np.ndarray:
        """The (B, B) float64 distances among matrix rows ``rows`` (in that order)."""
        rows = np.asarray(rows, dtype=np.int64)
        wanted, inverse = np.unique(rows, return_inverse=True)
        out = np.empty((len(wanted), len(wanted)), dtype=np.float64)
        for lo in range(0, len(wanted), _ROWS_PER_READ):
            part = wanted[lo : lo + _ROWS_PER_READ]
            out[lo : lo + len(part)] = self._read_rows(part)[:, wanted]
        self._check_block(out, wanted)
        return out[np.ix_(inverse, inverse)]

    def check_whole(self, band_bytes: int = CHECK_BAND_BYTES) -> None:
        """Check every distance once (finite, >= 0, symmetric within the tolerance of
        ``block``, zero diagonal), streamed by bands of rows of ``band_bytes``: band I is read
        whole and its tiles right of the diagonal are compared with the tiles [J, I] below it,
        read one at a time. Memory stays about two bands; an HDF5 file is read about 1.5 times
        (a TSV's rows are parsed once per band above them). InputError names the first bad
        cell found, its sample IDs and row/column numbers."""
        n = len(self.ids)
        height = max(1, min(n, band_bytes // (8 * n)))
        for lo in range(0, n, height):
            rows = np.arange(lo, min(lo + height, n))
            band = self._read_tile(rows, np.arange(n))
            for problem, bad in (("NaN or infinite ", ~np.isfinite(band)), ("negative ", band < 0)):
                self._refuse_first(problem, bad, band, rows, np.arange(n))
            self_distance = np.zeros(band.shape, dtype=bool)
            self_distance[np.arange(len(rows)), rows] = ~np.isclose(
                band[np.arange(len(rows)), rows], 0, rtol=0, atol=_ATOL
            )
            self._refuse_first("nonzero self-", self_distance, band, rows, np.arange(n))
            for top in range(lo, n, height):
                columns = np.arange(top, min(top + height, n))
                mirror = band[:, columns] if top == lo else self._read_tile(columns, rows)
                asymmetric = ~np.isclose(band[:, columns], mirror.T, rtol=_RTOL, atol=_ATOL)
                self._refuse_first("asymmetric ", asymmetric, band[:, columns], rows, columns)

    def _read_tile(self, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """The distances of consecutive ``rows`` x consecutive ``columns``."""
        if self.tsv:
            return self._read_rows(rows)[:, columns]
        with _hdf5_datasets(self.path) as (_, matrix):
            tile = matrix[rows[0] : rows[-1] + 1, columns[0] : columns[-1] + 1]
        return np.asarray(tile, dtype=np.float64)

    def _read_rows(self, rows: np.ndarray) -> np.ndarray:
        """Full rows ``rows`` (sorted, unique) of the matrix."""
        if self.tsv:
            return np.stack([self._tsv_row(r) for r in rows])
        with _hdf5_datasets(self.path) as (_, matrix):
            return np.asarray(matrix[rows, :], dtype=np.float64)

    def _tsv_row(self, row: int) -> np.ndarray:
        with self.path.open("rb") as handle:
            handle.seek(self._offsets[row])
            cells = handle.readline().rstrip(b"\r\n").split(b"\t")
        if cells[0].decode("utf-8", "replace") != self.ids[row] or len(cells) != len(self.ids) + 1:
            raise InputError(
                f"{self.path}: distance matrix row {row + 2} is not the row of "
                f"{printable(self.ids[row])} with {len(self.ids)} values (changed, truncated or "
                f"ragged); {_FIX}"
            )
        try:
            return np.array(cells[1:], dtype=np.float64)
        except ValueError as err:
            raise InputError(
                f"{self.path}: non-numeric distance ({printable(err)}); {_FIX}"
            ) from err

    def _check_block(self, block: np.ndarray, rows: np.ndarray) -> None:
        for problem, bad in (
            ("NaN or infinite ", ~np.isfinite(block)),
            ("negative ", block < 0),
            ("asymmetric ", ~np.isclose(block, block.T, rtol=_RTOL, atol=_ATOL)),
        ):
            self._refuse_first(problem, bad, block, rows, rows)

    def _refuse_first(
        self,
        problem: str,
        bad: np.ndarray,
        values: np.ndarray,
        rows: np.ndarray,
        columns: np.ndarray,
    ) -> None:
        """InputError naming the first True cell of ``bad`` (over ``values``, whose rows and
        columns are matrix rows ``rows`` and columns ``columns``), if any."""
        if not bad.any():
            return
        i, j = np.argwhere(bad)[0]
        raise InputError(
            f"{self.path}: {problem}distances (e.g. {values[i, j]} between "
            f"{printable(self.ids[rows[i]])} and {printable(self.ids[columns[j]])}, row "
            f"{rows[i] + 1} column {columns[j] + 1}); {_FIX}"
        )


_ROWS_PER_READ = 64  # rows read at once: 64 x N float64 (51 MB at N = 100,000)
_RTOL, _ATOL = 1e-5, 1e-8  # symmetric within np.isclose of these; a self-distance within _ATOL of 0


def _hdf5_ids(path: Path) -> tuple[list[str], None]:
    """The sample IDs of an HDF5 matrix, with its layout checked (the matrix is not read)."""
    with _hdf5_datasets(path) as (order, matrix):
        ids, shape = _ids(order), matrix.shape
    if shape != (len(ids), len(ids)):
        raise InputError(
            f"{path}: 'matrix' is {shape} but 'order' has {len(ids)} IDs; regenerate the file"
        )
    return ids, None


def _tsv_index(path: Path) -> tuple[list[str], np.ndarray]:
    """The IDs of an lsmat TSV's header and the byte offset of each row (one streaming pass)."""
    offsets = []
    with path.open("rb") as handle:
        header = handle.readline()
        try:
            ids = header.rstrip(b"\r\n").decode("utf-8").split("\t")[1:]
        except UnicodeDecodeError as err:
            raise InputError(
                f"{path}: distance matrix TSV is not UTF-8 text ({err}); {_FIX}"
            ) from err
        while True:
            offset = handle.tell()
            line = handle.readline()
            if not line:
                break
            if line.strip(b"\r\n"):
                offsets.append(offset)
    if len(offsets) != len(ids):
        raise InputError(
            f"{path}: the header names {len(ids)} IDs but the file has {len(offsets)} rows "
            f"(truncated or ragged); {_FIX}"
        )
    return ids, np.array(offsets, dtype=np.int64)
