"""aam.unifrac kernels: the sparse numba kernel, the dense torch kernel and their agreement."""

from __future__ import annotations

from pathlib import Path

import biom
import numba
import numpy as np
import pytest
import scipy.sparse as sp
import skbio

from aam.unifrac import cpu_kernel
from aam.unifrac.abundance import NodeAbundance, node_abundance
from aam.unifrac.cpu_kernel import TILE, block_pair_sums, pair_sums_cpu
from aam.unifrac.cpu_kernel import _progress as progress_bar
from aam.unifrac.metrics import distance_matrix
from aam.unifrac.pair_sums import METRICS
from aam.unifrac.torch_kernel import pair_sums_torch
from aam.unifrac.tree import tree_arrays

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
ALL_KINDS = {"shared_length", "shared_min", "generalized"}
FIELDS = ("shared_length", "shared_min", "gen_num", "gen_den")


@pytest.fixture(scope="module")
def demo() -> tuple[biom.Table, skbio.TreeNode]:
    return biom.load_table(str(DEMO / "table.biom")), skbio.TreeNode.read(str(DEMO / "tree.nwk"))


def abundance_of(tab: biom.Table, tree: skbio.TreeNode) -> NodeAbundance:
    return node_abundance(tab.matrix_data, tab.ids("observation"), tab.ids(), tree_arrays(tree))


@pytest.fixture(scope="module")
def abundance_150(demo) -> NodeAbundance:
    """150 samples: more than one tile, and not a multiple of the tile size."""
    tab, tree = demo
    return abundance_of(tab.filter(tab.ids()[-150:], inplace=False), tree)


@pytest.fixture
def restore_numba_threads():
    yield
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)


def upper(a: np.ndarray) -> np.ndarray:
    """The entries the kernels fill: the upper triangle without the diagonal."""
    return a[np.triu_indices(a.shape[0], 1)]


def brute_force(p: np.ndarray, lengths: np.ndarray, alpha: float) -> dict[str, np.ndarray]:
    """The pair sums straight from their definitions, over (node, i, j) with both present."""
    pi, pj = p[:, :, None], p[:, None, :]
    both = (pi > 0) & (pj > 0)
    total = np.where(both, pi + pj, 1.0)
    length = lengths[:, None, None]
    scaled = total**alpha
    solo = np.where(both, pi**alpha + pj**alpha, 0.0)
    sums = {
        "shared_length": np.where(both, length, 0.0).sum(axis=0),
        "shared_min": np.where(both, length * np.minimum(pi, pj), 0.0).sum(axis=0),
        "gen_num": np.where(both, length * (scaled * np.abs(pi - pj) / total - solo), 0).sum(0),
        "gen_den": np.where(both, length * (scaled - solo), 0.0).sum(axis=0),
    }
    return sums


def test_sample_count_exercises_tiles(abundance_150):
    n = abundance_150.proportions.shape[1]
    assert n > TILE and n % TILE != 0


def random_proportions(rng, n_nodes: int, n: int, density: np.ndarray) -> sp.csr_matrix:
    """Nodes whose share of present samples is ``density`` (one value per node)."""
    present = rng.random((n_nodes, n)) < density[:, None]
    p = sp.csr_matrix(np.where(present, rng.random((n_nodes, n)) + 1e-3, 0.0))
    p.sort_indices()
    return p


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.3])
def test_cpu_kernel_matches_brute_force(alpha):
    rng = np.random.default_rng(1)
    n_nodes, n = 60, TILE + 37  # two tiles, the second one partial
    # Sparse nodes (pair by pair), dense ones (the SIMD rows; for shared length, stored by
    # the samples they lack) and every density between.
    p = random_proportions(rng, n_nodes, n, np.linspace(0.01, 0.99, n_nodes))
    lengths = rng.random(n_nodes) + 0.1
    sums = pair_sums_cpu(p, lengths, ALL_KINDS, alpha=alpha)
    expected = brute_force(p.toarray(), lengths, alpha)
    for field in FIELDS:
        ours = getattr(sums, field)
        assert ours.shape == (n, n)
        np.testing.assert_allclose(upper(ours), upper(expected[field]), atol=1e-12)
        assert np.abs(expected[field]).max() > 0.1


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dense_and_sparse_paths_agree_bit_for_bit(dtype):
    # The same nodes as one block of rows or as the rows of a shard take different paths
    # (tiles restart at the shard's rows); every pair must still get identical sums.
    rng = np.random.default_rng(2)
    p = random_proportions(rng, 40, 2 * TILE + 50, np.linspace(0.02, 0.98, 40))
    lengths = rng.random(40) + 0.1
    kinds = {"shared_length", "shared_min"}
    full = pair_sums_cpu(p, lengths, kinds, dtype=dtype)
    start, stop = 77, 200
    block = block_pair_sums(p, lengths, kinds, start, stop, dtype=dtype)
    for field in ("shared_length", "shared_min"):
        ours, whole = getattr(block, field), getattr(full, field)[start:stop, start:]
        rows, columns = np.triu_indices(stop - start, 1, m=ours.shape[1])
        np.testing.assert_array_equal(ours[rows, columns], whole[rows, columns])


def test_the_progress_bar_counts_every_sample_pair_and_changes_no_sum(monkeypatch):
    rng = np.random.default_rng(3)
    p = random_proportions(rng, 30, 2 * TILE + 50, np.linspace(0.02, 0.98, 30))
    lengths = rng.random(30) + 0.1
    bars = []

    def recorded(enabled, total):
        bar = progress_bar(enabled, total)
        bars.append(bar)
        return bar

    monkeypatch.setattr(cpu_kernel, "_progress", recorded)
    start, stop = 77, 200
    shown = block_pair_sums(p, lengths, ALL_KINDS, start, stop, alpha=0.5, progress=True)
    quiet = block_pair_sums(p, lengths, ALL_KINDS, start, stop, alpha=0.5)
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(shown, field), getattr(quiet, field))
    rows, columns = stop - start, p.shape[1] - start
    pairs = sum(columns - i - 1 for i in range(rows))  # (i, j > i), i a row of the block
    # 3 passes (shared length, min, generalized), each counting the pairs (issue 41: a bar of
    # 3 x pairs "pairs" counted what it did not say)
    assert bars[0].total == bars[0].n == pairs
    assert bars[0].desc.startswith("UniFrac pairs, generalized (3/3)")
    assert bars[0].unit == "pair" and bars[1].disable


def test_cpu_kernel_only_computes_requested_sums(abundance_150):
    p, lengths = abundance_150.proportions, abundance_150.lengths
    sums = pair_sums_cpu(p, lengths, {"shared_min"})
    assert sums.shared_min is not None
    assert sums.shared_length is None and sums.gen_num is None and sums.gen_den is None


def test_cpu_threads_give_identical_results(demo, restore_numba_threads):
    tab, tree = demo
    abundance = abundance_of(tab.filter(tab.ids()[:300], inplace=False), tree)  # 3 tiles
    p, lengths = abundance.proportions, abundance.lengths
    one = pair_sums_cpu(p, lengths, ALL_KINDS, alpha=0.5, threads=1)
    assert numba.get_num_threads() == 1
    two = pair_sums_cpu(p, lengths, ALL_KINDS, alpha=0.5, threads=2)
    assert numba.get_num_threads() == 2
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(one, field), getattr(two, field))
        assert np.abs(getattr(one, field)).max() > 0


@pytest.mark.slow
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_torch_matches_cpu(abundance_150, dtype, tol):
    # A slice of the nodes keeps the dense generalized kernel quick; node_chunk=64 forces
    # ten chunks, the last one partial.
    p, lengths = abundance_150.proportions[:600], abundance_150.lengths[:600]
    cpu = pair_sums_cpu(p, lengths, ALL_KINDS, alpha=0.5)
    dense = pair_sums_torch(
        p, lengths, ALL_KINDS, alpha=0.5, dtype=dtype, device="cpu", node_chunk=64
    )
    for field in FIELDS:
        ours, reference = getattr(dense, field), getattr(cpu, field)
        assert ours.dtype == dtype and ours.shape == reference.shape
        # Only the upper triangle is used (distances mirror it and set the diagonal to 0).
        diff = np.abs(upper(ours).astype(np.float64) - upper(reference))
        assert diff.max() <= tol * max(1.0, np.abs(reference).max()), field
        assert np.abs(reference).max() > 0.1


@pytest.mark.parametrize("alpha", [0.0, 1.7])
def test_torch_distances_match_cpu(abundance_150, alpha):
    abundance = NodeAbundance(
        abundance_150.sample_ids,
        abundance_150.lengths[:400],
        abundance_150.proportions[:400],
    )
    p, lengths = abundance.proportions, abundance.lengths
    cpu = pair_sums_cpu(p, lengths, ALL_KINDS, alpha=alpha)
    dense = pair_sums_torch(p, lengths, ALL_KINDS, alpha=alpha, device="cpu", node_chunk=100)
    for metric in METRICS:
        ours = distance_matrix(metric, abundance, dense, alpha)
        reference = distance_matrix(metric, abundance, cpu, alpha)
        np.testing.assert_allclose(ours, reference, atol=1e-12)
        np.testing.assert_array_equal(np.diag(ours), 0.0)
