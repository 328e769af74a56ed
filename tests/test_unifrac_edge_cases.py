"""aam.unifrac: inputs with defined behaviour (missing ASVs, unrooted trees, empty samples...)."""

from __future__ import annotations

import io
import logging
import warnings
from pathlib import Path

import biom
import numpy as np
import pytest
import skbio
from errors import one_line_error
from skbio.diversity import beta_diversity

from aam.unifrac.engines import compute_unifrac
from aam.unifrac.tree import load_tree, to_skbio, tree_arrays

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
CLASSIC = ("unweighted", "weighted_normalized", "weighted_unnormalized")
SKBIO = {
    "unweighted": ("unweighted_unifrac", {}),
    "weighted_normalized": ("weighted_unifrac", {"normalized": True}),
    "weighted_unnormalized": ("weighted_unifrac", {"normalized": False}),
}
TREE = "((A:1,B:2)x:1,(C:1,D:3)y:2)root;"


def skbio_unifrac(tab: biom.Table, tree: skbio.TreeNode, metric: str) -> np.ndarray:
    name, kwargs = SKBIO[metric]
    result = beta_diversity(
        name,
        tab.matrix_data.T.toarray(),
        ids=list(tab.ids()),
        taxa=list(tab.ids("observation")),
        tree=tree,
        **kwargs,
    )
    return result.data


def newick(text: str) -> skbio.TreeNode:
    return skbio.TreeNode.read(io.StringIO(text), format="newick")


def table(rows: dict[str, list[int]], samples: list[str] | None = None) -> biom.Table:
    samples = samples or [f"s{k + 1}" for k in range(len(next(iter(rows.values()))))]
    return biom.Table(np.array(list(rows.values()), dtype=float), list(rows), samples)


@pytest.fixture(scope="module")
def demo() -> tuple[biom.Table, skbio.TreeNode]:
    tab = biom.load_table(str(DEMO / "table.biom"))
    tab = tab.filter(tab.ids()[:40], inplace=False)
    return tab, skbio.TreeNode.read(str(DEMO / "tree.nwk"))


# --- ASVs missing from the tree -------------------------------------------------------------


def with_foreign_asvs(tab: biom.Table) -> biom.Table:
    """``tab`` plus two ASVs that are not in the tree, with reads in a few samples."""
    extra = np.zeros((2, tab.shape[1]))
    extra[0, :5] = 7
    extra[1, 3] = 100
    data = np.vstack([tab.matrix_data.toarray(), extra])
    obs = list(tab.ids("observation")) + ["NOT_IN_TREE_1", "NOT_IN_TREE_2"]
    return biom.Table(data, obs, list(tab.ids()))


@pytest.mark.parametrize("engine", ["builtin", "skbio"])
def test_missing_asvs_are_an_error(demo, engine):
    tab, tree = demo
    message = one_line_error(
        compute_unifrac,
        with_foreign_asvs(tab),
        tree,
        ["unweighted"],
        engine=engine,
        table_name="t.biom",
        tree_name="t.nwk",
    )
    assert message.startswith("t.biom: 2 of 1596 ASVs are not tips of t.nwk")
    assert "NOT_IN_TREE_1" in message and "NOT_IN_TREE_2" in message
    assert "--prune-missing" in message


def test_prune_missing_matches_skbio_without_them(demo, caplog):
    tab, tree = demo
    foreign = with_foreign_asvs(tab)
    with caplog.at_level(logging.INFO, logger="aam.unifrac"):
        ours = compute_unifrac(foreign, tree, list(CLASSIC), prune_missing=True)
    for metric in CLASSIC:
        reference = skbio_unifrac(tab, tree, metric)
        assert np.abs(ours[metric] - reference).max() <= 1e-9, metric
    fraction = (5 * 7 + 100) / foreign.sum()
    records = [r for r in caplog.records if "dropped 2 of 1596 ASVs" in r.getMessage()]
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert f"{fraction:.2%} of the reads" in records[0].getMessage()
    assert "NOT_IN_TREE_1" in records[0].getMessage()


def test_prune_missing_other_engine_logs_too(caplog):
    tab = table({"A": [1, 2], "B": [3, 0], "Z": [0, 4]})
    with caplog.at_level(logging.INFO, logger="aam.unifrac"):
        ours = compute_unifrac(
            tab, newick(TREE), ["unweighted"], engine="skbio", prune_missing=True
        )
    assert "40.00% of the reads" in caplog.text  # Z: 4 of 10 reads
    kept = table({"A": [1, 2], "B": [3, 0]})
    np.testing.assert_array_equal(
        ours["unweighted"], skbio_unifrac(kept, newick(TREE), "unweighted")
    )


def test_pruning_can_empty_a_sample():
    tab = table({"A": [1, 0], "Z": [0, 4]})
    message = one_line_error(compute_unifrac, tab, newick(TREE), ["unweighted"], prune_missing=True)
    assert "1 samples have no reads" in message and "s2" in message


def test_internal_label_is_not_a_tip():
    # "x" labels the (A,B) node; an ASV called "x" must not be matched to it.
    tab = table({"A": [1, 0, 2], "x": [5, 5, 5], "C": [0, 3, 1]})
    message = one_line_error(compute_unifrac, tab, newick(TREE), ["unweighted"])
    assert "1 of 3 ASVs are not tips" in message and "(e.g. x)" in message
    pruned = compute_unifrac(tab, newick(TREE), list(CLASSIC), prune_missing=True)
    without_x = table({"A": [1, 0, 2], "C": [0, 3, 1]})
    for metric in CLASSIC:
        reference = skbio_unifrac(without_x, newick(TREE), metric)
        np.testing.assert_allclose(pruned[metric], reference, atol=1e-12)


# --- samples without reads ------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["builtin", "skbio"])
def test_samples_without_reads_are_named(engine):
    tab = table({"A": [1, 0, 2, 0], "C": [0, 0, 1, 0]}, ["s1", "empty_1", "s3", "empty_2"])
    message = one_line_error(
        compute_unifrac, tab, newick(TREE), ["unweighted"], engine=engine, table_name="t.biom"
    )
    assert message.startswith("t.biom: 2 samples have no reads")
    assert "empty_1" in message and "empty_2" in message and "s1" not in message


# --- trees ----------------------------------------------------------------------------------


def write(tmp_path: Path, text: str | bytes, name: str = "tree.nwk") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


UNROOTED = "((A:1,B:2):1,(C:1,D:1):2,E:5);"
# Every longest tip-to-tip path (length 6, e.g. B..E) has its middle at the trifurcating root,
# so midpoint rooting lands on an existing node with three neighbours.
UNROOTED_AT_NODE = "((A:1,B:2):1,(C:1,D:1):2,E:3);"


def test_unrooted_tree_is_an_error(tmp_path):
    path = write(tmp_path, UNROOTED)
    message = one_line_error(load_tree, path)
    assert str(path) in message
    assert "unrooted" in message and "3 children" in message and "--midpoint-root" in message


@pytest.mark.parametrize("text", [UNROOTED, UNROOTED_AT_NODE])
def test_midpoint_root_matches_skbio(tmp_path, text):
    tree = load_tree(write(tmp_path, text), midpoint_root=True)
    root = len(tree.parent) - 1
    assert np.count_nonzero(tree.parent == root) == 2
    assert sorted(tree.tip_index) == list("ABCDE")
    tab = table({"A": [1, 0, 3], "B": [2, 1, 0], "C": [0, 4, 1], "D": [0, 0, 2], "E": [3, 0, 1]})
    ours = compute_unifrac(tab, tree, list(CLASSIC))
    for metric in CLASSIC:
        expected = skbio_unifrac(tab, to_skbio(tree), metric)
        np.testing.assert_allclose(ours[metric], expected, atol=1e-9)
    # Midpoint rooting moved the root: unweighted differs from the trifurcating root's result.
    trifurcating = compute_unifrac(tab, newick(text), ["unweighted", "weighted_unnormalized"])
    if text == UNROOTED_AT_NODE:  # the root stays where it was; only a 0-length branch is added
        np.testing.assert_allclose(ours["unweighted"], trifurcating["unweighted"], atol=1e-12)
    else:
        assert np.abs(ours["unweighted"] - trifurcating["unweighted"]).max() > 1e-3
    # Weighted unnormalized does not depend on the root's position.
    np.testing.assert_allclose(
        ours["weighted_unnormalized"], trifurcating["weighted_unnormalized"], atol=1e-12
    )


def test_midpoint_root_leaves_rooted_tree_alone():
    tree = load_tree(DEMO / "tree.nwk", midpoint_root=True)
    original = tree_arrays(skbio.TreeNode.read(str(DEMO / "tree.nwk")))
    np.testing.assert_array_equal(tree.parent, original.parent)
    np.testing.assert_array_equal(tree.length, original.length)
    assert tree.tip_index == original.tip_index


def test_duplicate_tip_names(tmp_path):
    path = write(tmp_path, "((A:1,B:2):1,(A:1,C:1):2);")
    message = one_line_error(load_tree, path)
    assert str(path) in message and "duplicate tip names" in message and "A" in message


def test_unnamed_tip(tmp_path):
    path = write(tmp_path, "((A:1,:2):1,(B:1,C:1):2);")
    assert "1 tips have no name" in one_line_error(load_tree, path)


BAD_LENGTHS = {
    "negative": ("((A:1,B:-2):1,(C:1,D:1):2);", "1 branch(es)", "length -2.0 above tip B"),
    "missing": ("((A,B),(C,D));", "6 branch(es)", "no length above tip A"),
    "nan": ("((A:1,B:1):nan,(C:1,D:1):2);", "1 branch(es)", "length nan above an internal node"),
    "inf": ("((A:1,B:1)x:inf,(C:1,D:1):2);", "1 branch(es)", "length inf above internal node x"),
    "root": ("((A:1,B:1):1,(C:1,D:1):2):-1;", "1 branch(es)", "length -1.0 above the root"),
}


@pytest.mark.parametrize("case", sorted(BAD_LENGTHS))
def test_bad_branch_lengths(tmp_path, case):
    text, count, example = BAD_LENGTHS[case]
    path = write(tmp_path, text)
    message = one_line_error(load_tree, path)
    assert message.startswith(f"{path}: {count} lack a finite length >= 0 (e.g. {example})")
    assert "rebuild the tree with branch lengths" in message


def test_zero_lengths_and_no_root_length_are_fine(tmp_path):
    tree = load_tree(write(tmp_path, "((A:0,B:1):0,(C:1,D:1):2);"))
    assert list(tree.length) == [0, 1, 0, 1, 1, 2, 0]  # postorder; the root's is missing: 0


@pytest.mark.parametrize("engine", ["builtin", "skbio"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0])
def test_bad_counts_are_refused(engine, bad):
    tab = table({"A": [1, 0, 3], "B": [2, bad, 0], "C": [0, 4, 1]})
    message = one_line_error(
        compute_unifrac, tab, newick(TREE), ["unweighted"], engine=engine, table_name="t.biom"
    )
    assert message.startswith(f"t.biom: 1 count(s) are NaN, infinite or negative (e.g. {bad} ")
    assert "for ASV B in sample s2" in message


def test_fractional_counts_are_fine():
    fractional = table({"A": [0.5, 0, 1.5], "B": [1, 0.25, 0], "C": [0, 2, 0.5]})
    doubled = table({"A": [1, 0, 3], "B": [2, 0.5, 0], "C": [0, 4, 1]})
    ours = compute_unifrac(fractional, newick(TREE), list(CLASSIC))
    for metric in ("unweighted", "weighted_normalized"):  # scale-free metrics
        expected = compute_unifrac(doubled, newick(TREE), [metric])[metric]
        np.testing.assert_allclose(ours[metric], expected, atol=1e-15)


def test_counts_too_small_to_normalize_are_no_reads():
    tab = table({"A": [1, 5e-324], "B": [2, 0]})
    assert "1 samples have no reads (e.g. s2)" in one_line_error(
        compute_unifrac, tab, newick(TREE), ["unweighted"]
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_branch_lengths_too_long_for_the_dtype(dtype):
    huge = float(np.finfo(dtype).max) / 3
    tab = table({"A": [1, 2], "B": [3, 0]})
    message = one_line_error(
        compute_unifrac,
        tab,
        newick(f"(A:{huge!r},B:1);"),
        ["unweighted"],
        dtype=dtype,
        tree_name="t.nwk",
    )
    assert message.startswith("t.nwk: the branch lengths sum to") and "rescale" in message


@pytest.mark.parametrize(
    "content",
    [b"", b"\n\n", b"hello world", b"((A:1,B:2)", b"\x89HDF\r\n\x1a\n\x00\x00\xff\xfe"],
    ids=["empty", "blank", "garbage", "truncated", "binary"],
)
def test_unreadable_tree_is_one_line(tmp_path, content):
    path = write(tmp_path, content)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        message = one_line_error(load_tree, path)
    assert message.startswith(f"{path}: not a readable newick tree")
    assert not caught, [str(w.message) for w in caught]  # a warning would add stderr lines


def test_tree_without_tips(tmp_path):
    message = one_line_error(load_tree, write(tmp_path, "hello;"))
    assert "the tree has no tips" in message


def test_tree_not_found(tmp_path):
    message = one_line_error(load_tree, tmp_path / "nope.nwk")
    assert "nope.nwk: tree file not found" in message


def test_unknown_metric_and_engine():
    tab = table({"A": [1, 2], "B": [3, 0]})
    assert "unknown metric 'bray'" in one_line_error(compute_unifrac, tab, newick(TREE), ["bray"])
    message = one_line_error(compute_unifrac, tab, newick(TREE), ["unweighted"], engine="fast")
    assert "unknown engine 'fast'" in message


def test_skbio_engine_lacks_generalized():
    tab = table({"A": [1, 2], "B": [3, 0]})
    message = one_line_error(compute_unifrac, tab, newick(TREE), ["generalized"], engine="skbio")
    assert "scikit-bio lacks this metric" in message
