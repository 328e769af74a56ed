"""aam.data.rarefy: seeded rarefaction."""

import logging
from pathlib import Path

import biom
import numpy as np
import pytest
from biom.util import biom_open
from errors import one_line_error

from aam.cli import main
from aam.data.rarefy import rarefy
from aam.data.table import load_table
from aam.errors import InputError

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"


def small_table() -> biom.Table:
    data = np.array(
        [[10, 0, 3, 50], [5, 1, 0, 50], [0, 0, 2, 0], [7, 2, 0, 0]]
    )  # sample depths 22, 3, 5, 100
    return biom.Table(data, ["o1", "o2", "o3", "o4"], ["s1", "s2", "s3", "s4"])


def matrix(table: biom.Table) -> np.ndarray:
    return table.matrix_data.toarray()


def test_demo_rarefaction():
    table = load_table(DEMO / "table.biom")
    rarefied, dropped = rarefy(table, 500, seed=1)
    assert dropped == []
    assert list(rarefied.ids()) == list(table.ids())
    np.testing.assert_array_equal(rarefied.sum(axis="sample"), 500)


def test_drops_shallow_samples_and_empty_observations(caplog):
    with caplog.at_level(logging.INFO, logger="aam.data.rarefy"):
        rarefied, dropped = rarefy(small_table(), 20, seed=0)
    assert dropped == ["s2", "s3"]
    assert list(rarefied.ids()) == ["s1", "s4"]
    np.testing.assert_array_equal(rarefied.sum(axis="sample"), 20)
    assert "o3" not in rarefied.ids(axis="observation")  # only s3 had it
    assert (matrix(rarefied).sum(axis=1) > 0).all()
    assert "dropped 2 of 4 samples" in caplog.text and "s2, s3" in caplog.text


def test_subsample_never_exceeds_original_counts():
    original = small_table()
    rarefied, _ = rarefy(original, 20, seed=3)
    before = original.filter(rarefied.ids(axis="observation"), axis="observation", inplace=False)
    before = before.filter(rarefied.ids(), inplace=False)
    assert (matrix(rarefied) <= matrix(before)).all()


def test_deterministic_for_a_seed():
    table = load_table(DEMO / "table.biom")
    first, _ = rarefy(table, 100, seed=7)
    second, _ = rarefy(table, 100, seed=7)
    other, _ = rarefy(table, 100, seed=8)
    assert first == second
    assert first != other


def test_no_sample_reaches_depth():
    with pytest.raises(InputError) as info:
        rarefy(small_table(), 101, seed=0)
    message = str(info.value)
    assert "\n" not in message
    assert "--rarefy-depth 101" in message and "deepest has 100" in message
    assert "lower --rarefy-depth" in message


@pytest.mark.parametrize("depth", [0, -5])
def test_depth_must_be_positive(depth):
    with pytest.raises(InputError, match="--rarefy-depth must be a positive"):
        rarefy(small_table(), depth, seed=0)


def test_fractional_counts_cannot_be_rarefied():
    # Before: biom truncated them to whole reads, silently (here: an empty table).
    table = biom.Table(np.array([[1.5, 0], [2.7, 3]]), ["o1", "o2"], ["s1", "s2"])
    message = one_line_error(rarefy, table, 4, seed=1)
    assert message.startswith("--rarefy-depth 4: rarefaction draws whole reads, but 2 counts")
    assert "(e.g. 1.5)" in message and "drop --rarefy-depth" in message


def test_counts_beyond_int64_cannot_be_rarefied():
    table = biom.Table(np.array([[2.0**62, 1], [2.0**62, 3]]), ["o1", "o2"], ["s1", "s2"])
    assert "a sample has 9.22e+18 reads" in one_line_error(rarefy, table, 4, seed=1)


# --- `aam rarefy`: rule rarefy's command -------------------------------------------------------


def _write(table: biom.Table, path: Path) -> Path:
    with biom_open(str(path), "w") as handle:
        table.to_hdf5(handle, "test")
    return path


def test_the_command_writes_the_seeded_draw_without_the_shallow_samples(tmp_path, caplog):
    source = _write(small_table(), tmp_path / "raw.biom")
    out = tmp_path / "out" / "rarefied.biom"
    args = ["rarefy", "--table", str(source), "--rarefy-depth", "20", "--seed", "3"]
    with caplog.at_level(logging.INFO):
        assert main([*args, "--output", str(out)]) == 0
    written = load_table(out)
    expected, dropped = rarefy(small_table(), 20, seed=3)
    assert dropped == ["s2", "s3"] and list(written.ids()) == list(expected.ids())
    np.testing.assert_array_equal(matrix(written), matrix(expected))
    assert list(written.ids("observation")) == list(expected.ids("observation"))
    assert "2 samples at 20 reads (seed 3), 2 dropped" in caplog.text
    again = tmp_path / "again.biom"
    assert main([*args[:-1], "4", "--output", str(again)]) == 0  # another seed, another draw
    assert not np.array_equal(matrix(load_table(again)), matrix(written))


@pytest.mark.parametrize(
    ("depth", "message"),
    [("0", "--rarefy-depth 0: "), ("101", "--rarefy-depth 101: no sample has that many reads")],
)
def test_the_command_refuses_a_depth_with_one_line_and_writes_nothing(
    tmp_path, capsys, depth, message
):
    source = _write(small_table(), tmp_path / "raw.biom")
    out = tmp_path / "rarefied.biom"
    args = ["rarefy", "--table", str(source), "--rarefy-depth", depth, "--output", str(out)]
    try:
        code = main(args)
    except SystemExit as err:  # argparse: a flag's own bounds
        code = err.code
    assert code == 2 and sorted(tmp_path.iterdir()) == [source]
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("aam rarefy: ") and message in line, line
