"""`MatrixRows` (``--unifrac FILE`` read by rows): any block of rows, in any order and with
repeats, is the full matrix's slice, from HDF5 and lsmat TSV; a corrupt value inside a block
read, and a truncated file, are one InputError line naming the file; and a matrix that lacks
some of the table's samples stops `aam pretrain --unifrac` before its first step."""

from __future__ import annotations

import sys
from pathlib import Path

import biom
import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aam.unifrac.io import MatrixRows, read_distance_matrix, write_distance_matrix

sys.path.insert(0, str(Path(__file__).parent))
from errors import one_line_error  # noqa: E402
from test_cli_training import aam, assert_failed  # noqa: E402

N = 150  # more rows than MatrixRows reads at once (64), so a block takes several reads
IDS = [f"sample.{k}" for k in range(N)]
FORMATS = ["h5", "tsv"]


def random_matrix(n: int, seed: int = 3) -> np.ndarray:
    """A symmetric matrix of distances in (0, 1) with a zero diagonal (full float64 digits)."""
    upper = np.triu(np.random.default_rng(seed).random((n, n)), k=1)
    return upper + upper.T


@pytest.fixture(scope="module")
def matrix() -> np.ndarray:
    return random_matrix(N)


@pytest.fixture(scope="module")
def written(tmp_path_factory, matrix) -> dict[str, Path]:
    """The matrix written by `aam unifrac`'s writer, as .h5 and as lsmat .tsv."""
    root = tmp_path_factory.mktemp("matrix_rows")
    paths = {fmt: root / f"unifrac.{fmt}" for fmt in FORMATS}
    for path in paths.values():
        write_distance_matrix(path, IDS, matrix)
        assert read_distance_matrix(path)[0] == IDS
    return paths


ROW_SETS = {
    "one": [7],
    "sorted": list(range(0, N, 3)),
    "reversed": list(range(N - 1, -1, -1)),
    "shuffled": list(np.random.default_rng(0).permutation(N)),
    "repeats": [5, 140, 5, 64, 63, 140, 0, 5],
    "last rows": [N - 1, N - 2],
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rows", ROW_SETS.values(), ids=ROW_SETS.keys())
def test_a_block_is_the_full_matrix_slice(written, matrix, fmt, rows):
    source = MatrixRows(written[fmt])
    assert source.ids == IDS
    block = source.block(np.array(rows))
    assert block.dtype == np.float64
    assert np.array_equal(block, matrix[np.ix_(rows, rows)])


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.integers(0, N - 1), min_size=1, max_size=80), fmt=st.sampled_from(FORMATS))
def test_any_rows_in_any_order(written, matrix, rows, fmt):
    block = MatrixRows(written[fmt]).block(np.array(rows))
    assert np.array_equal(block, matrix[np.ix_(rows, rows)])


# --- corrupt values -------------------------------------------------------------------------

BAD_I, BAD_J = 70, 12  # the corrupt cell, in the second read of 64 rows and the first


def corrupt(matrix: np.ndarray, how: str) -> np.ndarray:
    bad = matrix.copy()
    if how == "NaN or infinite":
        bad[BAD_I, BAD_J] = bad[BAD_J, BAD_I] = np.nan
    elif how == "negative":
        bad[BAD_I, BAD_J] = bad[BAD_J, BAD_I] = -0.25
    else:  # asymmetric: one side changed only
        bad[BAD_I, BAD_J] += 0.25
    return bad


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("how", ["NaN or infinite", "negative", "asymmetric"])
def test_a_corrupt_value_in_a_block_is_one_line_naming_the_file(tmp_path, matrix, fmt, how):
    path = tmp_path / f"bad.{fmt}"
    write_distance_matrix(path, IDS, corrupt(matrix, how))
    source = MatrixRows(path)  # the IDs only: the values are checked as blocks are read
    clean = np.array([0, 1, 99, 149, 30])  # neither row of the corrupt cell
    assert np.array_equal(source.block(clean), matrix[np.ix_(clean, clean)])
    for rows in ([BAD_I, BAD_J], [3, BAD_J, 80, BAD_I, 100], [BAD_J, BAD_I, BAD_J]):
        message = one_line_error(source.block, np.array(rows))
        assert str(path) in message and f"{how} distances" in message, message
        assert "sample.70" in message and "sample.12" in message, message


def test_hdf5_values_changed_after_opening_are_checked_when_read(tmp_path, matrix):
    """The rows are read when a block needs them, not cached at opening."""
    path = tmp_path / "later.h5"
    write_distance_matrix(path, IDS, matrix)
    source = MatrixRows(path)
    rows = np.array([BAD_I, BAD_J])
    assert np.array_equal(source.block(rows), matrix[np.ix_(rows, rows)])
    with h5py.File(path, "r+") as h5:
        h5["matrix"][BAD_I, BAD_J] = -1.0
    assert "negative distances" in one_line_error(source.block, rows)


# --- truncated files ------------------------------------------------------------------------


def test_a_tsv_missing_its_last_rows_is_refused_at_opening(tmp_path, written):
    path = tmp_path / "short.tsv"
    lines = written["tsv"].read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-3]))
    message = one_line_error(MatrixRows, path)
    assert str(path) in message and f"names {N} IDs but the file has {N - 3} rows" in message


def test_a_tsv_cut_inside_its_last_row_is_refused_when_that_row_is_read(tmp_path, written):
    path = tmp_path / "cut.tsv"
    text = written["tsv"].read_bytes()
    path.write_bytes(text[: len(text) - 40])  # the last row loses its last values
    source = MatrixRows(path)
    rows = np.array([0, 1, 2])
    assert source.block(rows).shape == (3, 3)
    message = one_line_error(source.block, np.array([4, N - 1]))
    assert str(path) in message and f"row {N + 1}" in message and "truncated" in message


def test_a_truncated_hdf5_file_is_one_line(tmp_path, written):
    path = tmp_path / "cut.h5"
    data = written["h5"].read_bytes()
    path.write_bytes(data[: len(data) // 2])
    message = one_line_error(MatrixRows, path)  # HDF5 knows its length: refused at opening
    assert str(path) in message and "corrupt or truncated HDF5 file" in message


# --- a matrix without some of the table's samples ---------------------------------------


def pretrain_on(table: Path, matrix: Path, out: Path) -> int:
    """`aam pretrain` of a tiny model on ``table`` with the distances of ``matrix``."""
    return aam(
        *("pretrain", "--table", table, "--unifrac", matrix, "--output-dir", out),
        *"--epochs 1 --batch-size 4 --embedding-dim 16 --attention-heads 2 --layers 1".split(),
        *"--max-bp 100 --token-limit 64 --threads 2 --device cpu --no-progress".split(),
    )


def test_pretrain_with_a_matrix_lacking_samples_stops_before_the_first_step(
    small_study, tmp_path, capsys
):
    table = biom.load_table(str(small_study / "table.biom"))
    ids = [str(s) for s in table.ids()]
    full_ids, full = read_distance_matrix(small_study / "unifrac.h5")
    assert full_ids == ids
    kept = np.arange(3, len(ids))  # the first 3 samples lack
    lacking = tmp_path / "lacking.h5"
    write_distance_matrix(lacking, [ids[k] for k in kept], full[np.ix_(kept, kept)])
    out = tmp_path / "out"
    rc = pretrain_on(small_study / "table.biom", lacking, out)
    line = assert_failed(rc, capsys, "pretrain", out, str(lacking), "lacks 3 ID(s)", ids[0])
    assert "--allow-missing-samples" in line


# --- the whole matrix, checked before training -------------------------------------------

PROBLEMS = ["NaN or infinite", "negative", "asymmetric", "nonzero self-"]


def spoil(matrix: np.ndarray, how: str, i: int, j: int) -> np.ndarray:
    """``matrix`` with cell (i, j) made bad in way ``how`` (both sides, but for asymmetric;
    the diagonal cell (i, i) for a nonzero self-distance)."""
    bad = matrix.copy()
    value = {"NaN or infinite": np.inf, "negative": -0.5, "nonzero self-": 0.25}.get(how)
    if how == "asymmetric":
        bad[i, j] += 0.3
    elif how == "nonzero self-":
        bad[i, i] = value
    else:
        bad[i, j] = bad[j, i] = value
    return bad


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("how", PROBLEMS)
def test_check_whole_names_the_bad_cell_that_no_block_would_meet(tmp_path, matrix, fmt, how):
    """Bands of 7 rows: the bad cell lies in a tile below the diagonal, read as a tile."""
    path = tmp_path / f"bad.{fmt}"
    write_distance_matrix(path, IDS, spoil(matrix, how, BAD_I, BAD_J))
    source = MatrixRows(path)
    clean = np.array([0, 1, 99, 149, 30])
    assert np.array_equal(source.block(clean), matrix[np.ix_(clean, clean)])  # pairs unmet
    message = one_line_error(source.check_whole, band_bytes=8 * N * 7)
    said = f"{how}distances" if how.endswith("-") else f"{how} distances"
    assert str(path) in message and said in message, message
    row = BAD_I if how == "nonzero self-" else min(BAD_I, BAD_J)
    assert f"sample.{row}" in message and f"row {row + 1} " in message, message


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    height=st.integers(1, 45),
    cell=st.tuples(st.integers(0, 39), st.integers(0, 39)),
    how=st.sampled_from([None, *PROBLEMS]),
)
def test_check_whole_finds_any_bad_cell_with_any_band_height(
    tmp_path_factory, n, height, cell, how
):
    """A clean matrix passes, a spoiled one is refused, whatever the bands and tiles."""
    i, j = cell[0] % n, cell[1] % n
    if how in ("asymmetric", "negative", "NaN or infinite") and i == j:
        how = "nonzero self-" if how != "NaN or infinite" else how
    path = tmp_path_factory.mktemp("whole") / "m.h5"
    clean = random_matrix(n, seed=n)
    write_distance_matrix(path, IDS[:n], clean if how is None else spoil(clean, how, i, j))
    if how is None:
        MatrixRows(path).check_whole(band_bytes=8 * n * height)
    else:
        message = one_line_error(MatrixRows(path).check_whole, band_bytes=8 * n * height)
        assert "distances" in message and str(path) in message


def test_check_whole_streams_in_bands_of_flat_memory(tmp_path):
    """A 2,000-sample matrix (32 MB) checked in 1 MB bands peaks at a few MB of arrays."""
    import tracemalloc

    n = 2000
    path = tmp_path / "big.h5"
    write_distance_matrix(path, [f"s{k}" for k in range(n)], random_matrix(n))
    source = MatrixRows(path)
    tracemalloc.start()
    source.check_whole(band_bytes=1 << 20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 << 20, peak  # not the 32 MB matrix


def test_pretrain_with_a_bad_cell_in_its_matrix_stops_before_the_first_step(
    small_study, tmp_path, capsys
):
    """The defect of issue 39: a NaN pair that may never share a batch trained to exit 0."""
    ids, full = read_distance_matrix(small_study / "unifrac.h5")
    bad = tmp_path / "nan.h5"
    write_distance_matrix(bad, ids, spoil(full, "NaN or infinite", 0, 1))
    out = tmp_path / "out"
    rc = pretrain_on(small_study / "table.biom", bad, out)
    assert_failed(rc, capsys, "pretrain", out, str(bad), "NaN or infinite distances", ids[0])
