"""aam.unifrac.io: distance-matrix files (HDF5 as Striped UniFrac writes them, and TSV)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import skbio
from errors import one_line_error

from aam.unifrac.io import read_distance_matrix, write_distance_matrix

IDS = ["10317.000003995", "s-2", "é sample 3", "4"]


def matrix(dtype=np.float64) -> np.ndarray:
    rng = np.random.default_rng(0)
    m = rng.random((len(IDS), len(IDS)))
    m = m + m.T
    np.fill_diagonal(m, 0.0)
    return m.astype(dtype)


def only_file(directory: Path) -> Path:
    """The single file in ``directory`` (so no temporary file was left behind)."""
    files = list(directory.iterdir())
    assert len(files) == 1, files
    return files[0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_hdf5_round_trip(tmp_path, dtype):
    path = tmp_path / "out" / "dm.h5"  # the directory is created
    attrs = {"metric": "generalized", "alpha": 0.5, "aam_version": "0.1.0"}
    write_distance_matrix(path, IDS, matrix(dtype), attrs)
    assert only_file(tmp_path / "out") == path
    ids, data = read_distance_matrix(path)
    assert ids == IDS and all(type(x) is str for x in ids)
    assert data.dtype == dtype
    np.testing.assert_array_equal(data, matrix(dtype))
    with h5py.File(path, "r") as h5:
        assert set(h5) == {"matrix", "order"}
        assert dict(h5.attrs) == attrs


def test_overwrite_replaces(tmp_path):
    path = tmp_path / "dm.h5"
    write_distance_matrix(path, ["a", "b"], np.array([[0.0, 1.0], [1.0, 0.0]]))
    write_distance_matrix(path, IDS, matrix())
    assert only_file(tmp_path) == path
    assert read_distance_matrix(path)[0] == IDS


@pytest.mark.parametrize("suffix", [".tsv", ".txt"])
def test_tsv_readable_by_skbio(tmp_path, suffix):
    path = tmp_path / f"dm{suffix}"
    write_distance_matrix(path, IDS, matrix(), {"metric": "unweighted"})
    assert only_file(tmp_path) == path
    dm = skbio.DistanceMatrix.read(str(path), format="lsmat")
    assert list(dm.ids) == IDS
    np.testing.assert_array_equal(dm.data, matrix())
    ids, data = read_distance_matrix(path)
    assert ids == IDS
    np.testing.assert_array_equal(data, matrix())


def test_reads_striped_unifrac_hdf5(tmp_path):
    # Striped UniFrac's ssu writes `order` as fixed-length bytes and `matrix` as float.
    path = tmp_path / "striped.h5"
    with h5py.File(path, "w") as h5:
        h5.create_dataset("order", data=np.array([x.encode() for x in IDS]))
        h5.create_dataset("matrix", data=matrix())
        h5.attrs["format"] = "Striped UniFrac"
    with h5py.File(path, "r") as h5:
        assert h5["order"].dtype.kind == "S"
    ids, data = read_distance_matrix(path)
    assert ids == IDS
    np.testing.assert_array_equal(data, matrix())


@pytest.mark.parametrize("present", [["matrix"], ["order"], []])
def test_missing_datasets(tmp_path, present):
    path = tmp_path / "partial.h5"
    with h5py.File(path, "w") as h5:
        if "matrix" in present:
            h5.create_dataset("matrix", data=matrix())
        if "order" in present:
            h5.create_dataset("order", data=np.array([x.encode() for x in IDS]))
    message = one_line_error(read_distance_matrix, path)
    missing = [name for name in ("matrix", "order") if name not in present]
    assert message.startswith(f"{path}: HDF5 file lacks dataset(s) {', '.join(missing)}")


def test_shape_mismatch(tmp_path):
    path = tmp_path / "bad.h5"
    with h5py.File(path, "w") as h5:
        h5.create_dataset("matrix", data=matrix())
        h5.create_dataset("order", data=np.array([b"a", b"b"]))
    assert "'order' has 2 IDs" in one_line_error(read_distance_matrix, path)


def test_not_hdf5_and_not_found(tmp_path):
    path = tmp_path / "dm.h5"
    path.write_text("not hdf5\n")
    assert "not an HDF5 file" in one_line_error(read_distance_matrix, path)
    message = one_line_error(read_distance_matrix, tmp_path / "none.h5")
    assert "none.h5: distance matrix not found" in message


# --- refused outputs ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dm.csv", "dm.npy", "dm", "dm.H5"])
def test_unknown_suffix_is_refused_before_writing(tmp_path, name):
    message = one_line_error(write_distance_matrix, tmp_path / name, IDS, matrix())
    assert message == (
        f"{tmp_path / name}: unsupported distance matrix file name "
        f"({'no extension' if name == 'dm' else 'extension ' + repr(Path(name).suffix)}); "
        "name it one of *.h5, *.hdf5, *.tsv, *.txt"
    )
    assert list(tmp_path.iterdir()) == []


def test_hdf5_suffix(tmp_path):
    write_distance_matrix(tmp_path / "dm.hdf5", IDS, matrix())
    assert read_distance_matrix(tmp_path / "dm.hdf5")[0] == IDS


@pytest.mark.parametrize("bad_id", ["a\tb", "a\nb", "a\rb"])
def test_tsv_refuses_ids_it_cannot_hold(tmp_path, bad_id):
    message = one_line_error(write_distance_matrix, tmp_path / "dm.tsv", ["s1", bad_id], np.eye(2))
    assert f"sample ID {bad_id!r} holds a " in message
    assert (
        "an lsmat TSV cannot hold it as written (1 such ID(s)); write the matrix as .h5" in message
    )
    assert list(tmp_path.iterdir()) == []


# --- corrupt or inconsistent matrices: one line naming the file and the fix ----------------

FIX = "recompute it with `aam unifrac`"


def test_truncated_hdf5(tmp_path):
    path = tmp_path / "dm.h5"
    write_distance_matrix(path, IDS * 50, np.zeros((200, 200)))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    message = one_line_error(read_distance_matrix, path)
    assert message.startswith(f"{path}: corrupt or truncated HDF5 file (") and FIX in message


@pytest.mark.parametrize(
    "order,data,phrase",
    [
        (np.arange(4.0), matrix(), "'order' is not a list of sample ID strings"),
        (np.array([b"a b"]), np.array([[b"0"]]), "'matrix' does not hold numbers"),
        (np.array([b"a", b"b"]), np.zeros(4), "'matrix' is (4,) but 'order' has 2 IDs"),
        (np.array([b"a", b"a"]), np.zeros((2, 2)), "duplicate sample IDs (a)"),
        (np.array([], dtype="S1"), np.zeros((0, 0)), "the distance matrix holds no samples"),
    ],
    ids=["numeric_order", "string_matrix", "flat_matrix", "duplicate_ids", "empty"],
)
def test_hdf5_with_wrong_datasets(tmp_path, order, data, phrase):
    path = tmp_path / "dm.h5"
    with h5py.File(path, "w") as h5:
        h5.create_dataset("order", data=order)
        h5.create_dataset("matrix", data=data)
    assert phrase in one_line_error(read_distance_matrix, path)


def bad_values(kind: str) -> np.ndarray:
    m = matrix()
    if kind == "asymmetric":
        m[0, 1] += 0.5
    else:
        m[1, 2] = m[2, 1] = {"nan": np.nan, "inf": np.inf, "negative": -0.25}[kind]
    return m


@pytest.mark.parametrize("suffix", [".h5", ".tsv"])
@pytest.mark.parametrize(
    "kind,phrase",
    [
        ("nan", "NaN or infinite distances (e.g. nan between s-2 and é sample 3)"),
        ("inf", "NaN or infinite distances (e.g. inf between s-2 and é sample 3)"),
        ("negative", "negative distances (e.g. -0.25 between s-2 and é sample 3)"),
        ("asymmetric", "asymmetric distances (e.g. "),
    ],
)
def test_bad_distances_are_refused(tmp_path, suffix, kind, phrase):
    path = tmp_path / f"dm{suffix}"
    write_distance_matrix(path, IDS, bad_values(kind))  # the writer does not judge values
    message = one_line_error(read_distance_matrix, path)
    assert message.startswith(f"{path}: {phrase}") and message.endswith(FIX)


TSV_CASES = {
    "ragged": ("\ta\tb\na\t0\t1\nb\t1\n", "row 3 has 1 values for 2 IDs in the header"),
    "truncated": ("\ta\tb\na\t0\t1\n", "the header names 2 IDs (a, b) but the rows are labelled 1"),
    "non_numeric": ("\ta\tb\na\t0\tx\nb\tx\t0\n", "non-numeric distance (could not convert"),
    "other_ids": ("\ta\tb\na\t0\t1\nc\t1\t0\n", "the header names 2 IDs (a, b) but the rows"),
    "empty": ("", "distance matrix TSV has no rows"),
    "header_only": ("\ta\tb\n", "distance matrix TSV has no rows"),
    "duplicate_ids": ("\ta\ta\na\t0\t1\na\t1\t0\n", "duplicate sample IDs (a)"),
}


@pytest.mark.parametrize("case", sorted(TSV_CASES))
def test_corrupt_tsv(tmp_path, case):
    text, phrase = TSV_CASES[case]
    path = tmp_path / "dm.tsv"
    path.write_text(text)
    message = one_line_error(read_distance_matrix, path)
    assert message.startswith(f"{path}: ") and phrase in message and message.endswith(FIX)


def test_tsv_not_utf8(tmp_path):
    path = tmp_path / "dm.tsv"
    path.write_bytes(b"\ta\xff\n")
    assert "distance matrix TSV is not UTF-8 text" in one_line_error(read_distance_matrix, path)
