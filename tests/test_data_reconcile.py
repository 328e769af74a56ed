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
        "unifrac.h5": ["s1", "s2", "s3", "s4"],
    }
    message = one_line_error(sources)
    assert "table.biom lacks 1 ID(s) present elsewhere (s9)" in message
    assert "metadata.tsv lacks 1 ID(s) present elsewhere (s4)" in message
    assert "unifrac.h5 lacks 1 ID(s) present elsewhere (s9)" in message
    assert ALLOW_MISSING_FLAG in message and "3 shared samples" in message


def test_many_missing_ids_are_abbreviated():
    sources = {"table.biom": [f"s{i}" for i in range(20)], "metadata.tsv": ["s0"]}
    message = one_line_error(sources)
    assert "metadata.tsv lacks 19 ID(s)" in message
    assert "(s1, s2, s3, s4, s5, ... (+14 more))" in message


def test_allow_missing_warns_and_intersects(caplog):
    sources = {"table.biom": ["a", "b", "c"], "metadata.tsv": ["c", "b", "z"]}
    with caplog.at_level(logging.WARNING, logger="aam.data.reconcile"):
        assert reconcile_sample_ids(sources, allow_missing=True) == ["b", "c"]
    assert "metadata.tsv lacks 1 ID(s) present elsewhere (a)" in caplog.text
    assert "table.biom lacks 1 ID(s) present elsewhere (z)" in caplog.text


def test_empty_intersection_is_an_error_even_when_allowed():
    message = one_line_error({"table.biom": ["a"], "metadata.tsv": ["b"]}, allow_missing=True)
    assert "table.biom" in message and "metadata.tsv" in message and "no sample" in message


def test_preview():
    assert preview(["a", "b"]) == "a, b"
    assert preview(range(7), limit=3) == "0, 1, 2, ... (+4 more)"
