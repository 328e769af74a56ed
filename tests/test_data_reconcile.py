"""aam.data.reconcile: matching sample IDs across inputs."""

import logging
from pathlib import Path

import pytest

from aam.data.metadata import load_metadata
from aam.data.reconcile import ALLOW_MISSING_FLAG, preview, reconcile_sample_ids
from aam.data.table import load_table
from aam.errors import InputError

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"


def one_line_error(sources, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        reconcile_sample_ids(sources, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_demo_inputs_agree():
    table_ids = load_table(DEMO / "table.biom").ids()
    metadata_ids = load_metadata(DEMO / "metadata.tsv").index
    ids = reconcile_sample_ids({"table.biom": table_ids, "metadata.tsv": metadata_ids})
    assert ids == list(table_ids)
    assert all(type(i) is str for i in ids)


def test_order_of_first_source():
    sources = {"table.biom": ["c", "a", "b"], "metadata.tsv": ["a", "b", "c"]}
    assert reconcile_sample_ids(sources) == ["c", "a", "b"]


def test_missing_ids_error_names_source_and_ids():
    sources = {
        "table.biom": ["s1", "s2", "s3", "s4"],
        "metadata.tsv": ["s1", "s2", "s3", "s9"],
        "unifrac.h5": ["s1", "s2", "s4"],
    }
    message = one_line_error(sources)
    assert "metadata.tsv lacks 1 ID(s) of table.biom (s4)" in message
    assert "unifrac.h5 lacks 1 ID(s) of table.biom (s3)" in message
    assert "s9" not in message  # a row of a sample the table lacks is no gap
    assert ALLOW_MISSING_FLAG in message and "2 shared samples" in message


def test_ids_of_other_samples_are_ignored():
    """A metadata file (or matrix, or split) may list samples the table lacks: QIIME 2 and
    Qiita metadata usually describe more samples than one table holds."""
    sources = {"table.biom": ["c", "a"], "metadata.tsv": ["a", "b", "c", "d"]}
    assert reconcile_sample_ids(sources) == ["c", "a"]


def test_many_missing_ids_are_abbreviated():
    sources = {"table.biom": [f"s{i}" for i in range(20)], "metadata.tsv": ["s0"]}
    message = one_line_error(sources)
    assert "metadata.tsv lacks 19 ID(s)" in message
    assert "(s1, s2, s3, s4, s5, ... (+14 more))" in message


def test_allow_missing_warns_and_intersects(caplog):
    sources = {"table.biom": ["a", "b", "c"], "metadata.tsv": ["c", "b", "z"]}
    with caplog.at_level(logging.WARNING, logger="aam.data.reconcile"):
        assert reconcile_sample_ids(sources, allow_missing=True) == ["b", "c"]
    assert "metadata.tsv lacks 1 ID(s) of table.biom (a)" in caplog.text
    assert "(z)" not in caplog.text


def test_empty_intersection_is_an_error_even_when_allowed():
    message = one_line_error({"table.biom": ["a"], "metadata.tsv": ["b"]}, allow_missing=True)
    assert "table.biom" in message and "metadata.tsv" in message and "no sample" in message


def test_preview():
    assert preview(["a", "b"]) == "a, b"
    assert preview(range(7), limit=3) == "0, 1, 2, ... (+4 more)"
