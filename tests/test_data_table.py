"""aam.data.table: loading BIOM tables (biom's reader and the lean one) and one-line errors
for bad ones."""

import json
import re
from pathlib import Path

import biom
import h5py
import numpy as np
import pytest
from biom.util import biom_open

from aam.data.table import load_counts, load_table
from aam.errors import InputError

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"


def one_line_error(path: Path) -> str:
    """The lean reader's error (UniFrac's); biom's reader (training's) refuses the file too,
    with the same message up to its details (in parentheses) and the fix."""
    messages = []
    for loader in (load_table, load_counts):
        with pytest.raises(InputError) as info:
            loader(path)
        messages.append(str(info.value))
        assert "\n" not in messages[-1]
        assert path.name in messages[-1]
    assert re.split("[(;]", messages[0])[0].strip() == re.split("[(;]", messages[1])[0].strip()
    return messages[1]


def small_table() -> biom.Table:
    data = np.array([[5, 0, 1], [0, 3, 2]])
    return biom.Table(data, ["ACGT", "GGTA"], ["10317.1", "s2", "s3"])


def write_hdf5(table: biom.Table, path: Path) -> Path:
    with biom_open(str(path), "w") as handle:
        table.to_hdf5(handle, "aam tests")
    return path


def write_json(table: biom.Table, path: Path) -> Path:
    path.write_text(table.to_json("aam tests"))
    return path


def test_demo_table():
    table = load_table(DEMO / "table.biom")
    assert table.shape == (1594, 400)
    assert all(len(seq) == 100 for seq in table.ids(axis="observation")[:10])


@pytest.mark.parametrize("writer", [write_hdf5, write_json])
def test_hdf5_and_json_roundtrip(tmp_path, writer):
    table = writer(small_table(), tmp_path / "t.biom")
    loaded, lean = load_table(table), load_counts(table)
    assert list(loaded.ids()) == lean.sample_ids == ["10317.1", "s2", "s3"]
    assert list(loaded.ids(axis="observation")) == lean.observation_ids == ["ACGT", "GGTA"]
    np.testing.assert_array_equal(loaded.matrix_data.toarray(), small_table().matrix_data.toarray())
    np.testing.assert_array_equal(lean.matrix.toarray(), small_table().matrix_data.toarray())


def test_missing_file(tmp_path):
    assert "not found" in one_line_error(tmp_path / "nope.biom")


def test_directory(tmp_path):
    (tmp_path / "dir.biom").mkdir()
    assert "directory" in one_line_error(tmp_path / "dir.biom")


@pytest.mark.parametrize(
    "content", [bytes(range(256)), b"", b'{"not": "biom"}'], ids=["binary", "empty", "json"]
)
def test_not_biom(tmp_path, content):
    path = tmp_path / "bad.biom"
    path.write_bytes(content)
    assert "not a readable BIOM table" in one_line_error(path)


def test_other_hdf5(tmp_path):
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as handle:
        handle["x"] = np.arange(3)
    assert "HDF5" in one_line_error(path)


def test_truncated_hdf5(tmp_path):
    path = write_hdf5(small_table(), tmp_path / "t.biom")
    path.write_bytes(path.read_bytes()[:2000])
    assert "not a readable BIOM table" in one_line_error(path)


def test_empty_table(tmp_path):
    empty = biom.Table(np.zeros((2, 2)), ["o1", "o2"], ["s1", "s2"])
    message = one_line_error(write_hdf5(empty, tmp_path / "empty.biom"))
    assert "empty" in message and "0 non-zero counts" in message


def test_duplicate_sample_ids_hdf5(tmp_path):
    path = write_hdf5(small_table(), tmp_path / "dup.biom")
    with h5py.File(path, "a") as handle:
        handle["sample/ids"][2] = b"s2"
    assert "duplicate sample IDs" in one_line_error(path)


@pytest.mark.parametrize("axis,key", [("sample", "columns"), ("observation", "rows")])
def test_duplicate_ids_json(tmp_path, axis, key):
    doc = json.loads(small_table().to_json("aam tests"))
    doc[key][1]["id"] = doc[key][0]["id"]
    path = tmp_path / "dup.json"
    path.write_text(json.dumps(doc))
    assert f"duplicate {axis} IDs" in one_line_error(path)


@pytest.mark.parametrize(  # BIOM JSON cannot hold NaN or infinity
    "bad,writer",
    [
        (np.nan, write_hdf5),
        (np.inf, write_hdf5),
        (-np.inf, write_hdf5),
        (-2.0, write_hdf5),
        (-2.0, write_json),
    ],
)
def test_counts_must_be_finite_and_non_negative(tmp_path, bad, writer):
    data = np.array([[5, 0, 1], [0, bad, 2]])
    path = writer(biom.Table(data, ["ACGT", "GGTA"], ["10317.1", "s2", "s3"]), tmp_path / "t.biom")
    message = one_line_error(path)
    assert message == (
        f"{path}: 1 count(s) are NaN, infinite or negative (e.g. {bad} for ASV GGTA in sample "
        "s2); counts must be finite and >= 0: fix them or rebuild the table from the read counts"
    )


def test_bad_counts_are_counted(tmp_path):
    data = np.array([[-1, 0, np.nan], [0, -3, 2]])
    path = write_hdf5(biom.Table(data, ["ACGT", "GGTA"], ["a", "b", "c"]), tmp_path / "t.biom")
    assert "3 count(s) are NaN, infinite or negative (e.g. -1.0 for ASV ACGT in sample a)" in (
        one_line_error(path)
    )


def test_counts_whose_sum_overflows(tmp_path):
    data = np.array([[1e308, 1], [1e308, 2]])
    path = write_hdf5(biom.Table(data, ["ACGT", "GGTA"], ["deep", "s2"]), tmp_path / "t.biom")
    message = one_line_error(path)
    assert "the counts sum past the float64 range (largest sample: deep)" in message


def test_fractional_counts_are_fine(tmp_path):
    data = np.array([[0.5, 0, 1e-3], [0, 2.25, 1e300]])
    path = write_hdf5(biom.Table(data, ["ACGT", "GGTA"], ["a", "b", "c"]), tmp_path / "t.biom")
    np.testing.assert_array_equal(load_table(path).matrix_data.toarray(), data)
    np.testing.assert_array_equal(load_counts(path).matrix.toarray(), data)
