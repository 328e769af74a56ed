"""`aam unifrac`: outputs, one-line errors with exit status 2, and the Striped UniFrac adapter."""

from __future__ import annotations

import io
import sys
import time
import types
from pathlib import Path

import biom
import h5py
import numpy as np
import pytest
import skbio
import torch
from biom.util import biom_open

from aam.cli import main
from aam.errors import InputError
from aam.unifrac.engines import compute_unifrac
from aam.unifrac.io import read_distance_matrix

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
TREE = "((A:1,B:2)x:1,(C:1,D:3)y:2)root;"


def write_table(path: Path, tab: biom.Table) -> Path:
    with biom_open(str(path), "w") as handle:
        tab.to_hdf5(handle, "aam tests")
    return path


def table(rows: dict[str, list[int]], samples: list[str] | None = None) -> biom.Table:
    samples = samples or [f"s{k + 1}" for k in range(len(next(iter(rows.values()))))]
    return biom.Table(np.array(list(rows.values()), dtype=float), list(rows), samples)


GOOD_TABLE = {"A": [1, 0, 3], "B": [2, 1, 0], "C": [0, 4, 1], "D": [0, 0, 2]}


@pytest.fixture(scope="module")
def demo_inputs(tmp_path_factory) -> tuple[Path, Path, biom.Table, skbio.TreeNode]:
    tab = biom.load_table(str(DEMO / "table.biom"))
    tab = tab.filter(tab.ids()[:30], inplace=False)
    path = write_table(tmp_path_factory.mktemp("demo") / "demo30.biom", tab)
    tree_path = DEMO / "tree.nwk"
    return path, tree_path, tab, skbio.TreeNode.read(str(tree_path))


def unifrac(*args: str | Path) -> int:
    return main(["unifrac", *(str(a) for a in args), "--no-progress"])


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("aam unifrac: error: ")
    return lines[0]


# --- outputs --------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".h5", ".tsv"])
def test_one_file_per_metric(tmp_path, demo_inputs, suffix):
    table_path, tree_path, tab, tree = demo_inputs
    metrics = ["unweighted", "weighted_normalized", "weighted_unnormalized", "generalized"]
    args = ["--table", table_path, "--tree", tree_path, "--alpha", "0.5"]
    args += [x for m in metrics for x in ("--metric", m)]
    out = tmp_path / "out"
    assert unifrac(*args, "--output", out / f"unifrac.{{metric}}{suffix}") == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(f"unifrac.{m}{suffix}" for m in metrics)
    expected = compute_unifrac(tab, tree, metrics, alpha=0.5)
    for metric in metrics:
        path = out / f"unifrac.{metric}{suffix}"
        ids, matrix = read_distance_matrix(path)
        assert ids == list(tab.ids())
        np.testing.assert_allclose(matrix, expected[metric], rtol=0, atol=1e-15)
        if suffix == ".h5":
            with h5py.File(path, "r") as h5:
                assert h5.attrs["metric"] == metric and h5.attrs["engine"] == "builtin"
                assert h5.attrs["table"] == str(table_path)
                assert ("alpha" in h5.attrs) == (metric == "generalized")


def test_float32_output(tmp_path, demo_inputs):
    table_path, tree_path, tab, tree = demo_inputs
    out = tmp_path / "u.h5"
    args = ["--table", table_path, "--tree", tree_path, "--metric", "unweighted"]
    assert unifrac(*args, "--dtype", "float32", "--output", out) == 0
    _, matrix = read_distance_matrix(out)
    assert matrix.dtype == np.float32
    expected = compute_unifrac(tab, tree, ["unweighted"], dtype=np.float32)["unweighted"]
    np.testing.assert_array_equal(matrix, expected)


def test_prune_missing_flag(tmp_path):
    table_path = write_table(tmp_path / "t.biom", table({**GOOD_TABLE, "Z": [5, 5, 5]}))
    tree_path = tmp_path / "t.nwk"
    tree_path.write_text(TREE)
    out = tmp_path / "u.h5"
    base = ["--table", table_path, "--tree", tree_path, "--metric", "unweighted", "--output", out]
    assert unifrac(*base) == 2 and not out.exists()
    assert unifrac(*base, "--prune-missing") == 0
    expected = compute_unifrac(
        table(GOOD_TABLE), skbio.TreeNode.read(io.StringIO(TREE)), ["unweighted"]
    )
    np.testing.assert_allclose(read_distance_matrix(out)[1], expected["unweighted"], atol=1e-15)


def test_midpoint_root_flag(tmp_path):
    table_path = write_table(tmp_path / "t.biom", table({**GOOD_TABLE, "E": [3, 0, 1]}))
    tree_path = tmp_path / "t.nwk"
    tree_path.write_text("((A:1,B:2):1,(C:1,D:1):2,E:5);")
    out = tmp_path / "u.h5"
    base = ["--table", table_path, "--tree", tree_path, "--metric", "unweighted", "--output", out]
    assert unifrac(*base) == 2 and not out.exists()
    assert unifrac(*base, "--midpoint-root") == 0
    assert read_distance_matrix(out)[1].shape == (3, 3)


def test_several_metrics_need_placeholder(tmp_path, demo_inputs, capsys):
    table_path, tree_path, _, _ = demo_inputs
    out = tmp_path / "out"
    code = unifrac(
        "--table",
        table_path,
        "--tree",
        tree_path,
        "--metric",
        "unweighted",
        "--metric",
        "weighted_normalized",
        "--output",
        out / "unifrac.h5",
    )
    assert code == 2
    assert "{metric} placeholder" in error_line(capsys)
    assert not out.exists()


# --- bad inputs: exit 2, one line naming the file, nothing written --------------------------

BAD_INPUTS = {
    # name: (table rows, sample IDs, newick text or bytes, which file the message names, phrase)
    "missing_asvs": (
        {**GOOD_TABLE, "Z1": [1, 1, 1], "Z2": [0, 2, 0]},
        None,
        TREE,
        "table",
        "--prune-missing",
    ),
    "unrooted": (GOOD_TABLE, None, "((A:1,B:2):1,C:1,D:3);", "tree", "--midpoint-root"),
    "empty_sample": (
        {"A": [1, 0, 3], "C": [0, 0, 1]},
        ["s1", "no_reads", "s3"],
        TREE,
        "table",
        "no_reads",
    ),
    "duplicate_tips": (GOOD_TABLE, None, "((A:1,B:2):1,(C:1,A:3):2);", "tree", "duplicate"),
    "internal_label": ({**GOOD_TABLE, "x": [1, 1, 1]}, None, TREE, "table", "(e.g. x)"),
    "empty_newick": (GOOD_TABLE, None, "", "tree", "not a readable newick tree"),
    "garbage_newick": (
        GOOD_TABLE,
        None,
        b"\x89PNG\r\n\x1a\n\x00garbage",
        "tree",
        "not a readable newick tree",
    ),
    # Before: NaN counts gave NaN distances, negative ones plausible numbers, lengthless trees
    # an all-zero matrix; all with exit 0.
    "nan_count": (
        {**GOOD_TABLE, "C": [0, float("nan"), 1]},
        None,
        TREE,
        "table",
        "1 count(s) are NaN, infinite or negative (e.g. nan for ASV C in sample s2)",
    ),
    "negative_count": (
        {**GOOD_TABLE, "B": [2, -1, 0], "D": [-3, 0, 2]},
        None,
        TREE,
        "table",
        "2 count(s) are NaN, infinite or negative (e.g. -1.0 for ASV B in sample s2)",
    ),
    "no_lengths": (
        GOOD_TABLE,
        None,
        "((A,B),(C,D));",
        "tree",
        "6 branch(es) lack a finite length >= 0 (e.g. no length above tip A)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, case):
    rows, samples, tree_text, named, phrase = BAD_INPUTS[case]
    inputs = tmp_path / "in"
    inputs.mkdir()
    table_path = write_table(inputs / "table.biom", table(rows, samples))
    tree_path = inputs / "tree.nwk"
    if isinstance(tree_text, bytes):
        tree_path.write_bytes(tree_text)
    else:
        tree_path.write_text(tree_text)
    out = tmp_path / "out"
    out.mkdir()
    code = unifrac(
        "--table",
        table_path,
        "--tree",
        tree_path,
        "--metric",
        "unweighted",
        "--metric",
        "generalized",
        "--output",
        out / "u.{metric}.h5",
    )
    assert code == 2
    line = error_line(capsys)
    assert str(table_path if named == "table" else tree_path) in line
    assert phrase in line
    assert list(out.iterdir()) == []  # no output, no leftover temporary file
    assert sorted(p.name for p in inputs.iterdir()) == ["table.biom", "tree.nwk"]


def test_tree_without_lengths_skbio_engine(tmp_path, small_inputs, capsys):
    table_path, tree_path = small_inputs
    tree_path.write_text("((A,B),(C,D));")
    out = tmp_path / "u.h5"
    code = unifrac(
        "--table",
        table_path,
        "--tree",
        tree_path,
        "--metric",
        "unweighted",
        "--output",
        out,
        "--engine",
        "skbio",
    )
    assert code == 2
    assert f"{tree_path}: 6 branch(es) lack a finite length >= 0" in error_line(capsys)
    assert not out.exists()


@pytest.fixture
def inputs_never_read(monkeypatch):
    """Output checks must come first: reading the table fails the test."""

    def fail(path):
        raise AssertionError(f"read {path} before checking the output")

    monkeypatch.setattr("aam.commands.unifrac.load_counts", fail)


@pytest.mark.parametrize("name", ["u.csv", "u.npy", "u", "u.{metric}.H5"])
def test_unknown_output_extension(tmp_path, small_inputs, capsys, inputs_never_read, name):
    table_path, tree_path = small_inputs
    out = tmp_path / "out"
    code = unifrac(
        "--table",
        table_path,
        "--tree",
        tree_path,
        "--metric",
        "unweighted",
        "--output",
        out / name,
    )
    assert code == 2
    line = error_line(capsys)
    assert "unsupported distance matrix file name" in line
    assert "name it one of *.h5, *.hdf5, *.tsv, *.txt" in line
    assert not out.exists()


def test_output_is_a_directory(tmp_path, small_inputs, capsys, inputs_never_read):
    table_path, tree_path = small_inputs
    (tmp_path / "u.h5").mkdir()
    args = ["--table", table_path, "--tree", tree_path, "--metric", "unweighted"]
    start = time.perf_counter()
    assert unifrac(*args, "--output", tmp_path / "u.h5") == 2
    assert time.perf_counter() - start < 1.0
    assert error_line(capsys).endswith(
        "u.h5: distance matrix path is a directory; give a file name"
    )
    assert list((tmp_path / "u.h5").iterdir()) == []


def test_output_parent_is_a_file(tmp_path, small_inputs, capsys, inputs_never_read):
    table_path, tree_path = small_inputs
    (tmp_path / "results").write_text("a file, not a directory\n")
    args = ["--table", table_path, "--tree", tree_path, "--metric", "unweighted"]
    start = time.perf_counter()
    assert unifrac(*args, "--output", tmp_path / "results" / "u.{metric}.tsv") == 2
    assert time.perf_counter() - start < 1.0
    line = error_line(capsys)
    assert f"{tmp_path / 'results'}: distance matrix directory is an existing file" in line
    assert "Traceback" not in line


def test_missing_input_files(tmp_path, capsys):
    tree_path = tmp_path / "tree.nwk"
    tree_path.write_text(TREE)
    args = ["--metric", "unweighted", "--output", tmp_path / "u.h5"]
    assert unifrac("--table", tmp_path / "none.biom", "--tree", tree_path, *args) == 2
    assert "none.biom" in error_line(capsys)
    table_path = write_table(tmp_path / "t.biom", table(GOOD_TABLE))
    assert unifrac("--table", table_path, "--tree", tmp_path / "none.nwk", *args) == 2
    assert "none.nwk: tree file not found" in error_line(capsys)
    assert not (tmp_path / "u.h5").exists()


# --- options --------------------------------------------------------------------------------


@pytest.fixture
def small_inputs(tmp_path) -> tuple[Path, Path]:
    table_path = write_table(tmp_path / "t.biom", table(GOOD_TABLE))
    tree_path = tmp_path / "t.nwk"
    tree_path.write_text(TREE)
    return table_path, tree_path


def test_threads_zero(tmp_path, small_inputs, capsys):
    table_path, tree_path = small_inputs
    out = tmp_path / "u.h5"
    with pytest.raises(SystemExit) as info:  # refused as the flag is read
        unifrac(
            "--table",
            table_path,
            "--tree",
            tree_path,
            "--metric",
            "unweighted",
            "--output",
            out,
            "--threads",
            "0",
        )
    assert info.value.code == 2
    assert "--threads 0: must be at least 1" in error_line(capsys)
    assert not out.exists()


def test_device_cuda_without_gpu(tmp_path, small_inputs, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    table_path, tree_path = small_inputs
    out = tmp_path / "u.h5"
    code = unifrac(
        "--table",
        table_path,
        "--tree",
        tree_path,
        "--metric",
        "unweighted",
        "--output",
        out,
        "--device",
        "cuda",
    )
    assert code == 2
    line = error_line(capsys)
    assert "--device cuda" in line and "no GPU" in line and "--device cpu" in line
    assert not out.exists()


def test_device_must_be_cpu_or_cuda(tmp_path, small_inputs, capsys):
    table_path, tree_path = small_inputs
    with pytest.raises(SystemExit) as info:
        unifrac(
            "--table",
            table_path,
            "--tree",
            tree_path,
            "--metric",
            "unweighted",
            "--output",
            tmp_path / "u.h5",
            "--device",
            "gpu",
        )
    assert info.value.code == 2
    assert "--device gpu: must be cpu, cuda or cuda:N" in capsys.readouterr().err


def test_engine_unifrac_not_importable(tmp_path, small_inputs, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "unifrac", None)  # makes `import unifrac` fail
    table_path, tree_path = small_inputs
    out = tmp_path / "u.h5"
    code = unifrac(
        "--table",
        table_path,
        "--tree",
        tree_path,
        "--metric",
        "unweighted",
        "--output",
        out,
        "--engine",
        "unifrac",
    )
    assert code == 2
    line = error_line(capsys)
    assert "`unifrac` is not importable" in line and "--engine builtin" in line
    assert not out.exists()


def test_engine_skbio_matches_builtin(tmp_path, small_inputs):
    table_path, tree_path = small_inputs
    base = ["--table", table_path, "--tree", tree_path, "--metric", "weighted_normalized"]
    assert unifrac(*base, "--engine", "skbio", "--output", tmp_path / "s.h5") == 0
    assert unifrac(*base, "--output", tmp_path / "b.h5") == 0
    skbio_ids, skbio_matrix = read_distance_matrix(tmp_path / "s.h5")
    builtin_ids, builtin_matrix = read_distance_matrix(tmp_path / "b.h5")
    assert skbio_ids == builtin_ids == ["s1", "s2", "s3"]
    np.testing.assert_allclose(skbio_matrix, builtin_matrix, atol=1e-12)


# --- the Striped UniFrac adapter, with a fake `unifrac` module ------------------------------


@pytest.fixture
def fake_unifrac(monkeypatch):
    """A stand-in for Striped UniFrac that reads its inputs back and records each call."""
    calls: list[tuple[str, dict]] = []

    def method(name: str, metric: str):
        def run(table_path: str, tree_path: str, **kwargs):
            tab = biom.load_table(table_path)  # the adapter's files must be readable
            tree = skbio.TreeNode.read(tree_path, format="newick")
            calls.append((name, {"tab": tab, "tree": tree, "omp": _omp(), **kwargs}))
            matrix = compute_unifrac(tab, tree, [metric], alpha=kwargs.get("alpha", 1.0))[metric]
            ids = [str(x) for x in tab.ids()]
            dm = skbio.DistanceMatrix(matrix, ids)
            return dm.filter(ids[::-1])  # an order the adapter must undo

        return run

    module = types.ModuleType("unifrac")
    for metric in ("unweighted", "weighted_normalized", "weighted_unnormalized", "generalized"):
        for suffix in ("", "_fp32"):
            setattr(module, metric + suffix, method(metric + suffix, metric))
    monkeypatch.setitem(sys.modules, "unifrac", module)
    monkeypatch.setenv("OMP_NUM_THREADS", "unset")  # restored after the test
    return calls


def _omp() -> str | None:
    import os

    return os.environ.get("OMP_NUM_THREADS")


def test_striped_adapter(fake_unifrac, demo_inputs):
    _, _, tab, tree = demo_inputs
    tab = tab.filter(tab.ids()[:12], inplace=False)
    ours = compute_unifrac(
        tab,
        tree,
        ["weighted_normalized", "generalized"],
        alpha=0.25,
        engine="unifrac",
        dtype=np.float32,
        threads=2,
    )
    assert [name for name, _ in fake_unifrac] == ["weighted_normalized_fp32", "generalized_fp32"]
    wn_call, gen_call = (kwargs for _, kwargs in fake_unifrac)
    assert "alpha" not in wn_call and gen_call["alpha"] == 0.25
    assert wn_call["omp"] == "2"
    written = wn_call["tab"]  # the BIOM file holds the same counts
    assert list(written.ids()) == list(tab.ids())
    assert list(written.ids("observation")) == list(tab.ids("observation"))
    assert (written.matrix_data != tab.matrix_data).nnz == 0
    assert sorted(t.name for t in wn_call["tree"].tips()) == sorted(t.name for t in tree.tips())
    expected = compute_unifrac(tab, tree, ["weighted_normalized", "generalized"], alpha=0.25)
    for metric, matrix in ours.items():
        assert matrix.dtype == np.float32
        np.testing.assert_allclose(matrix, expected[metric], atol=1e-6)


def test_striped_adapter_float64_names(fake_unifrac):
    tab = table(GOOD_TABLE)
    tree = skbio.TreeNode.read(io.StringIO(TREE))
    ours = compute_unifrac(tab, tree, ["unweighted", "generalized"], alpha=0.5, engine="unifrac")
    assert [name for name, _ in fake_unifrac] == ["unweighted", "generalized"]
    assert fake_unifrac[1][1]["alpha"] == 0.5
    assert fake_unifrac[0][1]["omp"] == "unset"  # no --threads: the environment is left alone
    expected = compute_unifrac(tab, tree, ["unweighted", "generalized"], alpha=0.5)
    for metric, matrix in ours.items():
        assert matrix.dtype == np.float64
        np.testing.assert_allclose(matrix, expected[metric], atol=1e-12)


def test_striped_adapter_checks_inputs_first(fake_unifrac):
    tab = table({**GOOD_TABLE, "Z": [1, 1, 1]})
    with pytest.raises(InputError, match="--prune-missing"):
        compute_unifrac(
            tab, skbio.TreeNode.read(io.StringIO(TREE)), ["unweighted"], engine="unifrac"
        )
    assert fake_unifrac == []
    compute_unifrac(
        tab,
        skbio.TreeNode.read(io.StringIO(TREE)),
        ["unweighted"],
        engine="unifrac",
        prune_missing=True,
    )
    assert list(fake_unifrac[0][1]["tab"].ids("observation")) == ["A", "B", "C", "D"]


def test_striped_adapter_through_cli(tmp_path, fake_unifrac, small_inputs):
    table_path, tree_path = small_inputs
    out = tmp_path / "u.{metric}.h5"
    code = unifrac(
        "--table",
        table_path,
        "--tree",
        tree_path,
        "--metric",
        "generalized",
        "--metric",
        "weighted_unnormalized",
        "--alpha",
        "0.75",
        "--engine",
        "unifrac",
        "--dtype",
        "float32",
        "--output",
        out,
    )
    assert code == 0
    assert [name for name, _ in fake_unifrac] == ["generalized_fp32", "weighted_unnormalized_fp32"]
    assert fake_unifrac[0][1]["alpha"] == 0.75
    with h5py.File(tmp_path / "u.generalized.h5", "r") as h5:
        assert h5.attrs["engine"] == "unifrac" and h5.attrs["alpha"] == 0.75
        assert h5["matrix"].dtype == np.float32
