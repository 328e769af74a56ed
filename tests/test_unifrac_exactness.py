"""aam.unifrac: the builtin engine against scikit-bio, hand-worked values and a naive reference.

scikit-bio is called directly (not through ``engine="skbio"``), so these tests compare two
independent implementations. scikit-bio lacks generalized UniFrac; it is checked against the
naive per-node definition written out below.
"""

from __future__ import annotations

import io
from pathlib import Path

import biom
import numpy as np
import pytest
import skbio
from skbio.diversity import beta_diversity

from aam.unifrac.engines import compute_unifrac

# One xdist worker: every worker that ran one of these tests would build the module fixtures.
pytestmark = pytest.mark.xdist_group("test_unifrac_exactness")

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
SKBIO = {
    "unweighted": ("unweighted_unifrac", {}),
    "weighted_normalized": ("weighted_unifrac", {"normalized": True}),
    "weighted_unnormalized": ("weighted_unifrac", {"normalized": False}),
}
CLASSIC = tuple(SKBIO)
# scikit-bio's reference covers the table's first samples (pairwise distances do not depend on
# the other samples; its pure-Python cost grows with the square of the sample count).
REFERENCE_SAMPLES = 150


def skbio_unifrac(table: biom.Table, tree: skbio.TreeNode, metric: str) -> np.ndarray:
    """scikit-bio's result, in ``table.ids()`` order."""
    name, kwargs = SKBIO[metric]
    result = beta_diversity(
        name,
        table.matrix_data.T.toarray(),
        ids=list(table.ids()),
        taxa=list(table.ids("observation")),
        tree=tree,
        **kwargs,
    )
    assert list(result.ids) == list(table.ids())
    return result.data


def naive_generalized(table: biom.Table, tree: skbio.TreeNode, alpha: float) -> np.ndarray:
    """Generalized UniFrac straight from its definition, one node and one pair at a time.

    p = reads below the node / sample total; over nodes with p_i + p_j > 0,
    d_ij = sum_v L_v (p_i+p_j)^a |p_i-p_j|/(p_i+p_j) / sum_v L_v (p_i+p_j)^a.
    A missing branch length counts as 0; the root's own length counts.
    """
    counts = table.matrix_data.toarray()
    row = {str(asv): k for k, asv in enumerate(table.ids("observation"))}
    totals = counts.sum(axis=0)
    below: dict[int, np.ndarray] = {}
    proportions, lengths = [], []
    for node in tree.postorder(include_self=True):
        if node.is_tip():
            reads = counts[row[node.name]] if node.name in row else np.zeros(len(totals))
        else:
            reads = sum(below[id(child)] for child in node.children)
        below[id(node)] = reads
        proportions.append(reads / totals)
        lengths.append(0.0 if node.length is None else node.length)
    p, length = np.array(proportions), np.array(lengths)
    n = p.shape[1]
    dist = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            total = p[:, i] + p[:, j]
            used = total > 0
            weight = length[used] * total[used] ** alpha
            num = np.sum(weight * np.abs(p[used, i] - p[used, j]) / total[used])
            den = np.sum(weight)
            dist[i, j] = dist[j, i] = num / den if den > 0 else 0.0
    return dist


def newick(text: str) -> skbio.TreeNode:
    return skbio.TreeNode.read(io.StringIO(text), format="newick")


def table(rows: dict[str, list[int]], samples: list[str]) -> biom.Table:
    return biom.Table(np.array(list(rows.values()), dtype=float), list(rows), samples)


def pair(matrix: np.ndarray, tab: biom.Table, a: str, b: str) -> float:
    ids = list(tab.ids())
    return float(matrix[ids.index(a), ids.index(b)])


# --- full demo data against scikit-bio ------------------------------------------------------


@pytest.fixture(scope="module")
def demo() -> tuple[biom.Table, skbio.TreeNode]:
    return biom.load_table(str(DEMO / "table.biom")), skbio.TreeNode.read(str(DEMO / "tree.nwk"))


@pytest.fixture(scope="module")
def demo_skbio(demo) -> dict[str, np.ndarray]:
    """scikit-bio on the first ``REFERENCE_SAMPLES`` samples of the demo table."""
    tab, tree = demo
    first = tab.filter(tab.ids()[:REFERENCE_SAMPLES], inplace=False)
    return {metric: skbio_unifrac(first, tree, metric) for metric in CLASSIC}


@pytest.fixture(scope="module")
def demo_builtin(demo) -> dict[type, dict[str, np.ndarray]]:
    tab, tree = demo
    return {
        dt: compute_unifrac(tab, tree, list(CLASSIC), dtype=dt) for dt in (np.float64, np.float32)
    }


def test_demo_shape(demo, demo_builtin):
    tab, tree = demo
    assert tab.shape == (1594, 400)
    assert len(tree.children) == 2
    for dt, result in demo_builtin.items():
        assert set(result) == set(CLASSIC)
        for matrix in result.values():
            assert matrix.shape == (400, 400) and matrix.dtype == dt
            np.testing.assert_array_equal(np.diag(matrix), 0.0)
            np.testing.assert_array_equal(matrix, matrix.T)


@pytest.mark.slow
@pytest.mark.parametrize("metric", CLASSIC)
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-9), (np.float32, 1e-5)])
def test_demo_matches_skbio(demo_builtin, demo_skbio, metric, dtype, tol):
    ours, reference = demo_builtin[dtype][metric], demo_skbio[metric]
    first = ours[:REFERENCE_SAMPLES, :REFERENCE_SAMPLES].astype(np.float64)
    assert np.abs(first - reference).max() <= tol
    assert reference.max() > 0.1  # a real comparison, not of two zero matrices


def test_demo_metrics_computed_alone_equal_together(demo, demo_builtin):
    tab, tree = demo
    alone = compute_unifrac(tab, tree, ["weighted_unnormalized"])["weighted_unnormalized"]
    np.testing.assert_array_equal(alone, demo_builtin[np.float64]["weighted_unnormalized"])


def test_sample_order_follows_table(demo, demo_skbio):
    tab, tree = demo
    ids = list(tab.ids())[:40][::-1]
    sub = tab.filter(ids, inplace=False).sort_order(ids)
    ours = compute_unifrac(sub, tree, ["unweighted"])["unweighted"]
    index = [list(tab.ids()).index(x) for x in ids]
    np.testing.assert_allclose(ours, demo_skbio["unweighted"][np.ix_(index, index)], atol=1e-9)


# --- small trees worked by hand -------------------------------------------------------------

# Polytomy: node x has three children.
#   s1 = {A:1, B:1}, s2 = {C:2}, s3 = {A:1, D:3}
POLYTOMY = "((A:1,B:2,C:3)x:1,D:4)root;"
POLYTOMY_TABLE = {"A": [1, 0, 1], "B": [1, 0, 0], "C": [0, 2, 0], "D": [0, 0, 3]}

# Zero-length branches: A, the (A,B) stem and D have length 0.
#   s1 = {A:1}, s2 = {D:1}, s3 = {B:1, C:1}
ZERO_LENGTH = "((A:0,B:2):0,(C:1,D:0):1)root;"
ZERO_LENGTH_TABLE = {"A": [1, 0, 0], "B": [0, 0, 1], "C": [0, 0, 1], "D": [0, 1, 0]}

# B has no length (counts as 0); skbio rejects that, so it gets the tree with B:0.
#   s1 = {B:1}, s2 = {A:1}, s3 = {C:1, D:2}
NO_LENGTH = "((A:1,B)x:2,(C:1,D:1)y:1)root;"
NO_LENGTH_AS_ZERO = "((A:1,B:0)x:2,(C:1,D:1)y:1)root;"
NO_LENGTH_TABLE = {"A": [0, 1, 0], "B": [1, 0, 0], "C": [0, 0, 1], "D": [0, 0, 2]}

# Root with its own length 0.5 (and the same tree without it).
#   s1 = {A:2, B:2}, s2 = {B:1, C:3}, s3 = {C:5}
ROOT_LENGTH = "((A:1,B:2)x:3,C:4)root:0.5;"
NO_ROOT_LENGTH = "((A:1,B:2)x:3,C:4)root;"
ROOT_TABLE = {"A": [2, 0, 0], "B": [2, 1, 0], "C": [0, 3, 5]}

# Internal-node labels, one quoted with spaces and a semicolon, as in taxonomy-labelled trees.
LABELLED = "((A:1,B:2)'c__Clostridia; o__X':3,(C:1,D:1)inner2:2)'the root';"
UNLABELLED = "((A:1,B:2):3,(C:1,D:1):2);"
LABELLED_TABLE = {"A": [1, 0, 4], "B": [2, 1, 0], "C": [0, 4, 1], "D": [0, 0, 5]}

SAMPLES = ["s1", "s2", "s3"]
HAND_TREES = {
    "polytomy": (POLYTOMY, POLYTOMY, POLYTOMY_TABLE),
    "zero_length": (ZERO_LENGTH, ZERO_LENGTH, ZERO_LENGTH_TABLE),
    "no_length": (NO_LENGTH, NO_LENGTH_AS_ZERO, NO_LENGTH_TABLE),
    "root_length": (ROOT_LENGTH, ROOT_LENGTH, ROOT_TABLE),
    "no_root_length": (NO_ROOT_LENGTH, NO_ROOT_LENGTH, ROOT_TABLE),
    "labelled": (LABELLED, LABELLED, LABELLED_TABLE),
}


@pytest.mark.parametrize("case", sorted(HAND_TREES))
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-9), (np.float32, 1e-6)])
def test_hand_trees_match_skbio(case, dtype, tol):
    text, skbio_text, rows = HAND_TREES[case]
    tab = table(rows, SAMPLES)
    ours = compute_unifrac(tab, newick(text), list(CLASSIC), dtype=dtype)
    for metric in CLASSIC:
        reference = skbio_unifrac(tab, newick(skbio_text), metric)
        assert np.abs(ours[metric] - reference).max() <= tol, metric
        assert reference.max() > 0


def test_polytomy_by_hand():
    tab = table(POLYTOMY_TABLE, SAMPLES)
    d = compute_unifrac(tab, newick(POLYTOMY), list(CLASSIC))
    # s1 covers A(1), B(2), x(1); s2 covers C(3), x(1). Observed A+B+C+x = 7, shared x = 1,
    # so the unique length is 6: unweighted = 6/7.
    assert pair(d["unweighted"], tab, "s1", "s2") == pytest.approx(6 / 7, abs=1e-12)
    # p(s1) = A .5, B .5, x 1; p(s2) = C 1, x 1. sum L|dp| = 1*.5 + 2*.5 + 3*1 + 1*0 = 4.5.
    assert pair(d["weighted_unnormalized"], tab, "s1", "s2") == pytest.approx(4.5, abs=1e-12)
    # Normalizer: tip depths A 2, B 3, C 4: .5*2 + .5*3 + 1*4 = 6.5, so 4.5/6.5 = 9/13.
    assert pair(d["weighted_normalized"], tab, "s1", "s2") == pytest.approx(9 / 13, abs=1e-12)


def test_zero_length_branches_by_hand():
    tab = table(ZERO_LENGTH_TABLE, SAMPLES)
    d = compute_unifrac(tab, newick(ZERO_LENGTH), list(CLASSIC))
    # s1 sits on zero-length branches only (A, stem 0); s2 on D(0) and the (C,D) stem (1).
    # Observed length 1, all unique: unweighted = 1; weighted = 1*|0-1| = 1; normalizer
    # depth(A)*1 + depth(D)*1 = 0 + 1, so weighted normalized = 1.
    assert pair(d["unweighted"], tab, "s1", "s2") == pytest.approx(1.0, abs=1e-12)
    assert pair(d["weighted_unnormalized"], tab, "s1", "s2") == pytest.approx(1.0, abs=1e-12)
    assert pair(d["weighted_normalized"], tab, "s1", "s2") == pytest.approx(1.0, abs=1e-12)
    # s2 = D(0) + stem(1); s3 = B(2) + C(1) + stem(1). Observed 4, shared stem 1 -> 3/4.
    assert pair(d["unweighted"], tab, "s2", "s3") == pytest.approx(0.75, abs=1e-12)


def test_missing_length_counts_as_zero_by_hand():
    tab = table(NO_LENGTH_TABLE, SAMPLES)
    d = compute_unifrac(tab, newick(NO_LENGTH), list(CLASSIC))
    # s1 = B(0) + x(2); s2 = A(1) + x(2). Observed 3, shared x = 2: unweighted = 1/3.
    assert pair(d["unweighted"], tab, "s1", "s2") == pytest.approx(1 / 3, abs=1e-12)
    # sum L|dp| = A 1*1 + B 0*1 = 1; normalizer depth(B) 2 + depth(A) 3 = 5 -> 1/5.
    assert pair(d["weighted_unnormalized"], tab, "s1", "s2") == pytest.approx(1.0, abs=1e-12)
    assert pair(d["weighted_normalized"], tab, "s1", "s2") == pytest.approx(0.2, abs=1e-12)


def test_root_length_by_hand():
    tab = table(ROOT_TABLE, SAMPLES)
    with_root = compute_unifrac(tab, newick(ROOT_LENGTH), list(CLASSIC))
    without = compute_unifrac(tab, newick(NO_ROOT_LENGTH), list(CLASSIC))
    # s1 = A(1) B(2) x(3); s2 = B(2) x(3) C(4). Unique A + C = 5.
    # Observed A+B+x+C = 10 (+0.5 for the root's own length, shared by every sample).
    assert pair(without["unweighted"], tab, "s1", "s2") == pytest.approx(5 / 10, abs=1e-12)
    assert pair(with_root["unweighted"], tab, "s1", "s2") == pytest.approx(5 / 10.5, abs=1e-12)
    # p(s1) = A .5 B .5 x 1; p(s2) = B .25 x .25 C .75.
    # sum L|dp| = 1*.5 + 2*.25 + 3*.75 + 4*.75 = 6.25; the root adds 0.5*|1-1| = 0.
    for d in (with_root, without):
        assert pair(d["weighted_unnormalized"], tab, "s1", "s2") == pytest.approx(6.25, abs=1e-12)
    # Normalizer: depths A 4, B 5, C 4 -> s1 .5*4+.5*5 = 4.5, s2 .25*5+.75*4 = 4.25: 8.75.
    # With the root length every depth grows by 0.5: 8.75 + 2*0.5 = 9.75.
    assert pair(without["weighted_normalized"], tab, "s1", "s2") == pytest.approx(6.25 / 8.75)
    assert pair(with_root["weighted_normalized"], tab, "s1", "s2") == pytest.approx(6.25 / 9.75)


def test_internal_labels_change_nothing():
    tab = table(LABELLED_TABLE, SAMPLES)
    labelled = compute_unifrac(tab, newick(LABELLED), list(CLASSIC) + ["generalized"])
    plain = compute_unifrac(tab, newick(UNLABELLED), list(CLASSIC) + ["generalized"])
    for metric, matrix in labelled.items():
        np.testing.assert_array_equal(matrix, plain[metric])


# --- generalized UniFrac against the naive definition ---------------------------------------


@pytest.fixture(scope="module")
def demo_subset(demo) -> biom.Table:
    tab, _ = demo
    ids = tab.ids()[::6][:60]  # spread over the table
    return tab.filter(ids, inplace=False)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_generalized_demo_subset_matches_naive(demo, demo_subset, alpha):
    _, tree = demo
    ours = compute_unifrac(demo_subset, tree, ["generalized"], alpha=alpha)["generalized"]
    reference = naive_generalized(demo_subset, tree, alpha)
    assert demo_subset.shape[1] == 60
    assert np.abs(ours - reference).max() <= 1e-9
    assert reference.max() > 0.3


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("case", sorted(HAND_TREES))
def test_generalized_hand_trees_match_naive(case, alpha):
    text, _, rows = HAND_TREES[case]
    tab = table(rows, SAMPLES)
    ours = compute_unifrac(tab, newick(text), ["generalized"], alpha=alpha)["generalized"]
    np.testing.assert_allclose(ours, naive_generalized(tab, newick(text), alpha), atol=1e-9)


def test_generalized_by_hand():
    tab = table(POLYTOMY_TABLE, SAMPLES)
    d = compute_unifrac(tab, newick(POLYTOMY), ["generalized"], alpha=0.0)["generalized"]
    # alpha = 0 weighs every node either sample occupies by its length alone.
    # s1 vs s2: A (1, |.5-0|/.5 = 1), B (2, 1), C (3, 1), x (1, |1-1|/2 = 0).
    # (1 + 2 + 3 + 0) / (1 + 2 + 3 + 1) = 6/7 (as unweighted here).
    assert pair(d, tab, "s1", "s2") == pytest.approx(6 / 7, abs=1e-12)


def test_generalized_alpha_one_is_weighted_normalized(demo, demo_subset):
    _, tree = demo
    for tab, tr in [(demo_subset, tree), (table(ROOT_TABLE, SAMPLES), newick(ROOT_LENGTH))]:
        d = compute_unifrac(tab, tr, ["generalized", "weighted_normalized"], alpha=1.0)
        np.testing.assert_allclose(d["generalized"], d["weighted_normalized"], atol=1e-12)


def test_generalized_float32(demo, demo_subset):
    _, tree = demo
    d64 = compute_unifrac(demo_subset, tree, ["generalized"], alpha=0.5)["generalized"]
    d32 = compute_unifrac(demo_subset, tree, ["generalized"], alpha=0.5, dtype=np.float32)
    assert d32["generalized"].dtype == np.float32
    assert np.abs(d32["generalized"] - d64).max() <= 1e-5
