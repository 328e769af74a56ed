"""aam.unifrac.io: distance-matrix files (HDF5 as Striped UniFrac writes them, and TSV)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import skbio

from aam.errors import InputError
from aam.unifrac.io import read_distance_matrix, write_distance_matrix

IDS = ["10317.000003995", "s-2", "é sample 3", "4"]


def matrix(dtype=np.float64) -> np.ndarray:
    rng = np.random.default_rng(0)
    m = rng.random((len(IDS), len(IDS)))
    m = m + m.T
    np.fill_diagonal(m, 0.0)
    return m.astype(dtype)


def one_line_error(func, *args) -> str:
    with pytest.raises(InputError) as info:
        func(*args)
    message = str(info.value)
    assert "\n" not in message
    return message


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
