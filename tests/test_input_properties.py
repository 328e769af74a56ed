"""Adversarial inputs to the data layer and the UniFrac input path (hypothesis).

Every call either succeeds with finite outputs or raises the project's InputError whose
message is one line; any other exception, or a non-finite result, is a bug.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path

import biom
import h5py
import numpy as np
import pytest
from biom.util import biom_open
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aam.data.metadata import load_metadata, numeric_column
from aam.data.rarefy import rarefy
from aam.data.reconcile import reconcile_sample_ids
from aam.data.table import load_counts, load_table
from aam.errors import InputError
from aam.unifrac.engines import compute_unifrac
from aam.unifrac.io import read_distance_matrix, write_distance_matrix
from aam.unifrac.pair_sums import METRICS
from aam.unifrac.tree import load_tree

# A warning would print extra stderr lines next to the one-line error: make it a failure.
pytestmark = pytest.mark.filterwarnings("error")
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TREE = "((A:1,B:2)x:1,(C:1,D:3)y:2)root;"
ODD = [
    "$(touch pwned)",
    "`id`",
    '"',
    "'",
    "a b",
    " ",
    "",
    "é",
    "😀",
    "NaN",
    "inf",
    "-inf",
    "nan",
    "1e999",
    "#q2:types",
    "# c",
    "1",
    "2.5",
    "-0",
    "\u2028",
    "\x0c",
    "\r",
    "\x85",
    "a\tb",
    "id",
    "sample_id",
    "#SampleID",
    ";",
    "(",
    ")",
    ":",
    ",",
    "[x]",
    "_",
]
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
LABELS = st.one_of(st.sampled_from(ODD), TEXT)
READS = st.one_of(st.integers(0, 1000).map(float), st.integers(0, 3).map(float), st.floats(0, 1e6))
COUNTS = st.one_of(  # mostly plausible counts, so that many examples get through to UniFrac
    READS,
    READS,
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 0.0, 0.5, 1e308, 5e-324, 1e-300]),
)


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    """A fresh directory per example (pytest's tmp_path is shared by all examples)."""
    with tempfile.TemporaryDirectory(prefix="aam-prop-") as tmp:
        yield Path(tmp)


def rarely(draw, one_in: int) -> bool:
    """True about once in ``one_in`` draws (hypothesis favours small integers, so the
    common case must be the small one)."""
    return draw(st.integers(1, one_in)) == one_in


def outcome(func, *args, **kwargs):
    """``func(...)``, or None when it raised InputError, whose message must be one line."""
    try:
        return func(*args, **kwargs)
    except InputError as err:
        lines = str(err).splitlines()
        assert len(lines) == 1 and lines[0].strip(), repr(str(err))
        return None


def refused(func, *args, **kwargs) -> bool:
    """Whether ``func(...)`` (which returns nothing) raised a one-line InputError."""
    return outcome(lambda: func(*args, **kwargs) or True) is None


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def write_biom(table: biom.Table, path: Path, as_json: bool) -> Path:
    if as_json:
        path.write_text(table.to_json("aam property tests"))
    else:
        with biom_open(str(path), "w") as handle:
            table.to_hdf5(handle, "aam property tests")
    return path


def assert_distances(matrix: np.ndarray, n: int) -> None:
    assert matrix.shape == (n, n)
    assert np.isfinite(matrix).all(), matrix
    assert (matrix >= 0).all(), matrix


# --- tables ---------------------------------------------------------------------------------


@st.composite
def tables(draw) -> biom.Table:
    """A small table whose ASVs are mostly tips of TREE; counts may be anything."""
    ids = LABELS.filter(lambda s: "\x00" not in s)  # HDF5 strings cannot hold NUL
    asvs = draw(st.lists(st.sampled_from("ABCD") | ids, min_size=1, max_size=5, unique=True))
    samples = draw(st.lists(ids, min_size=1, max_size=4, unique=True))
    counts = draw(
        st.lists(COUNTS, min_size=len(asvs) * len(samples), max_size=len(asvs) * len(samples))
    )
    data = np.array(counts, dtype=np.float64).reshape(len(asvs), len(samples))
    return biom.Table(data, asvs, samples)


@pytest.mark.slow
@FAST
@given(table=tables(), as_json=st.booleans(), alpha=st.sampled_from([0.0, 0.5, 1.0, 0.3]))
def test_table_to_unifrac(table, as_json, alpha):
    with workdir() as tmp:
        path = write_biom(table, tmp / "t.biom", as_json)
        loaded, lean = outcome(load_table, path), outcome(load_counts, path)
        assert (loaded is None) == (lean is None)  # the lean reader refuses what biom's does
        if loaded is None:
            return
        assert lean.sample_ids == [str(x) for x in loaded.ids()]
        assert lean.observation_ids == [str(x) for x in loaded.ids("observation")]
        assert (lean.matrix != loaded.matrix_data).nnz == 0
        assert np.isfinite(loaded.matrix_data.data).all() and (loaded.matrix_data.data >= 0).all()
        tree = load_tree(write_text(tmp / "t.nwk", TREE))
        result = outcome(
            compute_unifrac,
            loaded,
            tree,
            list(METRICS),
            alpha=alpha,
            prune_missing=True,
            threads=1,
            table_name="t.biom",
            tree_name="t.nwk",
        )
        if result is None:
            return
        ids = [str(x) for x in loaded.ids()]
        for suffix, (metric, matrix) in zip(
            (".h5", ".tsv", ".txt", ".hdf5"), result.items(), strict=True
        ):
            assert_distances(matrix, len(ids))
            path = tmp / f"dm{suffix}"
            if refused(write_distance_matrix, path, ids, matrix, {"metric": metric}):
                assert not path.exists()
                continue
            read_ids, read_matrix = read_distance_matrix(path)
            assert read_ids == ids
            np.testing.assert_array_equal(read_matrix, matrix)


@pytest.mark.slow
@FAST
@given(table=tables(), depth=st.integers(1, 50), seed=st.integers(0, 3))
def test_rarefy(table, depth, seed):
    with workdir() as tmp:
        loaded = outcome(load_table, write_biom(table, tmp / "t.biom", False))
    if loaded is None:
        return
    result = outcome(rarefy, loaded, depth, seed)
    if result is not None:
        rarefied, dropped = result
        assert (np.asarray(rarefied.sum(axis="sample")) == depth).all()
        assert len(dropped) + rarefied.shape[1] == loaded.shape[1]


# --- trees ----------------------------------------------------------------------------------

GOOD_LENGTHS = st.floats(0, 10).map(repr)
LENGTHS = st.one_of(
    st.none(),
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "-0", "1e308", "5e-324", "1e-300", "x"]),
    *[GOOD_LENGTHS] * 4,
)


def quoted(label: str) -> str:
    return "'" + label.replace("'", "''") + "'"


def newick_node(children: list[str] | None, label: str | None, length: str | None) -> str:
    text = "" if children is None else "(" + ",".join(children) + ")"
    text += "" if label is None else quoted(label)
    return text + ("" if length is None else f":{length}")


SHAPES = st.recursive(
    st.none(), lambda inner: st.lists(inner, min_size=1, max_size=3), max_leaves=7
)


@st.composite
def newick_texts(draw) -> str:
    """A newick tree: plain or odd labels, unique or duplicate tip names, good or bad lengths
    (each chosen per tree, so some trees are clean); a quarter of them damaged."""
    shape = draw(st.lists(SHAPES, min_size=1, max_size=3))
    n_tips = str(shape).count("None")
    labels = draw(st.sampled_from([st.from_regex(r"[A-Za-z0-9.]{1,3}", fullmatch=True), LABELS]))
    unique = not rarely(draw, 4)
    names = iter(draw(st.lists(labels, min_size=n_tips, max_size=n_tips, unique=unique)))
    lengths = draw(st.sampled_from([GOOD_LENGTHS, LENGTHS]))
    inner_labels = st.none() | labels

    def render(node: list | None) -> str:
        if node is None:
            return newick_node(None, next(names), draw(lengths))
        return newick_node([render(child) for child in node], draw(inner_labels), draw(lengths))

    root = newick_node([render(child) for child in shape], draw(inner_labels), draw(LENGTHS))
    text = root + ";"
    if not rarely(draw, 4):
        return text
    cut = draw(st.integers(0, len(text)))  # damaged: cut short, or a character dropped
    return text[:cut] + (text[cut + 1 :] if draw(st.booleans()) else "")


@pytest.mark.slow
@FAST
@given(text=newick_texts(), midpoint=st.booleans(), seed=st.integers(0, 2**16))
@example(text="('0':5e-324,'1':5e-324);", midpoint=False, seed=0)  # generalized gave -1
def test_tree_to_unifrac(text, midpoint, seed):
    with workdir() as tmp:
        tree = outcome(load_tree, write_text(tmp / "t.nwk", text), midpoint_root=midpoint)
    if tree is None:
        return
    assert np.count_nonzero(tree.parent == len(tree.parent) - 1) <= 2  # a rooted tree
    assert np.isfinite(tree.length).all() and (tree.length >= 0).all()
    tips = list(tree.tip_index)
    counts = np.random.default_rng(seed).integers(0, 4, size=(len(tips), 3)).astype(float)
    counts[0] += 1  # every sample has reads
    table = biom.Table(counts, tips, ["s1", "s2", "s3"])
    result = outcome(compute_unifrac, table, tree, list(METRICS), threads=1)
    if result is not None:
        for matrix in result.values():
            assert_distances(matrix, 3)


# --- metadata -------------------------------------------------------------------------------

CELLS = st.one_of(st.sampled_from(ODD), TEXT, st.floats().map(repr))
PRELUDES = ["", "# comment", "\t\t", "# a\u2028# b", "#\x0c#", "# q\x85"]


@st.composite
def metadata_texts(draw) -> tuple[str, list[str]]:
    """A metadata TSV and the IDs in its first column (some of them a table's sample IDs)."""
    header = draw(st.lists(CELLS, min_size=1, max_size=4))
    if not rarely(draw, 4):
        header.insert(0, draw(st.sampled_from(["id", "#SampleID", "sample-id"])))
    ragged = draw(st.integers(0, 1))
    cells = st.lists(CELLS, min_size=len(header) - ragged, max_size=len(header) + ragged)
    rows = draw(st.lists(cells, max_size=6))
    lines = [draw(st.sampled_from(PRELUDES))] if draw(st.booleans()) else []
    lines += ["\t".join(header), *("\t".join(row) for row in rows)]
    text = draw(st.sampled_from(["\n", "\r\n", "\r"])).join(lines) + "\n"
    return text, [row[0] for row in rows if row]


@FAST
@given(drawn=metadata_texts(), extra=st.lists(CELLS, max_size=2), keep=st.integers(0, 6))
def test_metadata(drawn, extra, keep):
    text, first_cells = drawn
    table_ids = list(dict.fromkeys([cell.strip() for cell in first_cells[:keep]] + extra))
    with workdir() as tmp:
        path = tmp / "m.tsv"
        path.write_text(text, encoding="utf-8", newline="")
        frame = outcome(load_metadata, path)
    if frame is None:
        return
    assert frame.index.is_unique and all(isinstance(i, str) and i for i in frame.index)
    for column in frame.columns:
        values = outcome(numeric_column, frame, column, path)
        if values is not None:
            assert not np.isinf(values).any()
    sources = {"m.tsv": list(frame.index), "t.biom": table_ids}
    shared = outcome(reconcile_sample_ids, sources, allow_missing=True)
    if shared is not None:
        assert shared and set(shared) <= set(table_ids)


# --- distance matrices ----------------------------------------------------------------------


IDS = CELLS.filter(lambda s: "\x00" not in s)  # HDF5 strings cannot hold NUL


@st.composite
def square_matrices(draw, n: int) -> np.ndarray:
    """An n x n matrix, symmetric more often than not, of counts-like values."""
    matrix = np.array(draw(st.lists(COUNTS, min_size=n * n, max_size=n * n))).reshape(n, n)
    return matrix if rarely(draw, 3) else np.triu(matrix) + np.triu(matrix, 1).T


@st.composite
def tsv_matrices(draw) -> str:
    """A matrix in lsmat TSV layout, then perhaps damaged: a cell replaced, a row label
    changed, a cell dropped or added, or the text cut short."""
    ids = draw(st.lists(IDS, min_size=1, max_size=4))
    matrix = draw(square_matrices(len(ids)))
    rows = [["", *ids]] + [
        [ident, *map(repr, row)] for ident, row in zip(ids, matrix.tolist(), strict=True)
    ]
    for _ in range(draw(st.integers(0, 2))):
        row = draw(st.sampled_from(rows))
        column = draw(st.integers(0, len(row) - 1))
        action = draw(st.sampled_from(["replace", "drop", "add"]))
        if action == "replace":
            row[column] = draw(CELLS)
        elif action == "drop":
            del row[column]
        else:
            row.insert(column, draw(CELLS))
    text = "\n".join("\t".join(row) for row in rows) + "\n"
    return text[: draw(st.integers(0, len(text)))] if rarely(draw, 5) else text


@FAST
@given(text=tsv_matrices())
def test_read_tsv_matrix(text):
    with workdir() as tmp:
        result = outcome(read_distance_matrix, write_text(tmp / "dm.tsv", text))
    if result is not None:
        ids, matrix = result
        assert_distances(matrix, len(ids))
        assert len(set(ids)) == len(ids)
        np.testing.assert_allclose(matrix, matrix.T, rtol=1e-5, atol=1e-8)


@st.composite
def hdf5_contents(draw) -> tuple[np.ndarray, np.ndarray]:
    """(matrix, order) datasets, usually of matching sizes; order may hold numbers."""
    n = draw(st.integers(0, 3))
    order = draw(
        st.one_of(
            st.lists(IDS, min_size=n, max_size=n),
            st.lists(IDS, max_size=3),
            st.lists(st.floats(), max_size=3),
        )
    )
    strings = all(isinstance(x, str) for x in order)
    return draw(square_matrices(n)), np.array(order, dtype=h5py.string_dtype() if strings else None)


@FAST
@given(
    contents=hdf5_contents(),
    cut=st.one_of(st.none(), st.integers(0, 4000)),
)
def test_read_hdf5_matrix(contents, cut):
    # Truncated, not bit-flipped: libhdf5 itself can crash (SIGSEGV) on some flipped bytes.
    with workdir() as tmp:
        path = tmp / "dm.h5"
        with h5py.File(path, "w") as h5:
            h5.create_dataset("matrix", data=contents[0])
            h5.create_dataset("order", data=contents[1])
        path.write_bytes(path.read_bytes()[:cut])
        result = outcome(read_distance_matrix, path)
    if result is not None:
        ids, read = result
        assert_distances(read, len(ids))
