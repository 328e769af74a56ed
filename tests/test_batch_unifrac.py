"""Batch-local UniFrac (``aam.unifrac.batch``, ``aam.training.inputs.distances``): the distances of
any group of samples, computed from their reads and the tree, are the entries of ``aam unifrac``'s
full matrix, for every metric and both kernel precisions, on the demo data and on random
tables and trees; also with ``prune_missing``.

float64: within 1e-12. The training blocks (float64 kernel, float32 out) are the full float64
matrix cast to float32, at most 1 ulp apart (a float64 difference of ~1e-15 may straddle a
float32 rounding boundary). float32 kernel against the float32 full matrix: bit for bit up to
a few ulps for the weighted and generalized metrics; unweighted UniFrac stores a node present
in more than half of the samples by the samples it is absent from, and which nodes those are
depends on the group, so its float32 sums are grouped differently: up to ~30 ulps of small
entries (4e-7 absolute on the demo data, where the full float32 matrix is itself 5e-7 from
float64), held to 8 float32 epsilons absolute.
"""

from __future__ import annotations

import functools
import io
import sys
from pathlib import Path
from unittest import mock

import biom
import numpy as np
import pytest
import scipy.sparse as sp
import skbio
from hypothesis import given, settings
from hypothesis import strategies as st

from aam.data.samples import SampleSet
from aam.data.table import counts_of, load_counts
from aam.profiling.dispatched import DispatchedOps
from aam.runtime.threads import ThreadPool
from aam.training.config import UniFracOptions
from aam.training.inputs.distances import TreeDistances
from aam.training.inputs.study import UniFracSource, load_study
from aam.training.inputs.study_options import StudyOptions
from aam.unifrac import batch_device, cpu_kernel
from aam.unifrac.abundance import NodeAbundance, node_abundance
from aam.unifrac.batch import (
    PAIR_SUM_WEIGHT,
    REACHING_BATCH,
    BatchUniFrac,
    ranks_in_one_process,
)
from aam.unifrac.batch_device import DeviceBatchUniFrac
from aam.unifrac.batch_spread import proportions_below
from aam.unifrac.engines import compute_unifrac
from aam.unifrac.metrics import mirror_upper, row_distances, sample_totals, upper_distances
from aam.unifrac.pair_sums import METRICS, SUM_FOR_METRIC
from aam.unifrac.tree import load_tree, tree_arrays

sys.path.insert(0, str(Path(__file__).parent))
from errors import one_line_error  # noqa: E402
from test_unifrac_shards import studies  # noqa: E402  (random tables and trees)

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
EPS32 = float(np.finfo(np.float32).eps)
# (metric, alpha): alpha matters for generalized only (0.5: the kernel's sqrt path; 0.3: the
# general power; the random studies below also draw alpha 0 and 1).
POOL = ThreadPool.of(2)  # the cpu engine's threads
CASES = [(metric, 0.5) for metric in METRICS] + [("generalized", 0.3)]
CASE_IDS = [f"{metric}-{alpha}" for metric, alpha in CASES]


def groups(n: int) -> dict[str, np.ndarray]:
    """Seeded groups of sample indices in random order: a pair, one tile of the kernel, more
    than one tile (> 128 samples), and one with repeated samples."""
    rng = np.random.default_rng(11)
    return {
        "pair": rng.choice(n, 2, replace=False),
        "37": rng.choice(n, 37, replace=False),
        "200": rng.choice(n, min(n, 200), replace=False),
        "repeats": rng.choice(n, 60, replace=True),
    }


def csr_rows(counts, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Samples ``rows`` of ``counts`` as CSR rows over table ASV indices."""
    sub = counts.matrix.tocsc()[:, rows]
    return sub.indptr, sub.indices, sub.data


def ulps(ours: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Distance in float32 units in the last place of non-negative float32 arrays."""
    a = (np.asarray(ours, dtype=np.float32) + np.float32(0)).view(np.int32).astype(np.int64)
    b = (np.asarray(expected, dtype=np.float32) + np.float32(0)).view(np.int32).astype(np.int64)
    return np.abs(a - b)


def repeats(rows: np.ndarray) -> np.ndarray:
    """Mask of the pairs of a group that are one sample twice (the diagonal, and repeats)."""
    return rows[:, None] == rows[None, :]


def assert_float32_kernel_close(ours: np.ndarray, full: np.ndarray, rows: np.ndarray, metric: str):
    """The float32 kernel's batch against its full matrix (see the module docstring). A
    sample's distance to its own repeat is computed like any pair (0 within float32 rounding
    of sums that cancel), where the full matrix has its exact 0 diagonal."""
    assert ours.dtype == full.dtype == np.float32
    same = repeats(rows)
    assert np.abs(ours[same]).max() <= 32 * EPS32  # generalized: ~1e-6 (sums that cancel)
    if metric == "unweighted":
        assert np.abs(ours.astype(np.float64) - full).max() <= 8 * EPS32
    else:
        assert ulps(ours[~same], full[~same]).max(initial=0) <= 4


def assert_cast_of_float64(
    block: np.ndarray, expected: np.ndarray, rows: np.ndarray, floor: float = 0.0
) -> None:
    """A training block (float64 kernel, cast to float32) against the full float64 matrix
    cast to float32: at most 1 ulp apart, or (``floor``) within float64 rounding where a
    distance is 0 within rounding (two samples on the same nodes: 0 in one, ~1e-16 in the
    other, float32 ulps apart); a sample and its repeat within rounding of 0."""
    assert block.dtype == expected.dtype == np.float32
    same = repeats(rows)
    assert np.abs(block[same]).max() <= 1e-12
    close = (ulps(block, expected) <= 1) | (np.abs(block - expected) <= floor)
    assert close[~same].all()


# --- the demo data --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo():
    return load_counts(DEMO / "table.biom"), load_tree(DEMO / "tree.nwk")


@pytest.fixture(scope="module")
def full(demo) -> dict[type, dict[tuple[str, float], np.ndarray]]:
    """`aam unifrac`'s matrices of the 400 demo samples, per dtype and case."""
    out = {}
    for dtype in (np.float64, np.float32):
        at_half = compute_unifrac(*demo, list(METRICS), alpha=0.5, dtype=dtype, threads=2)
        out[dtype] = {(metric, 0.5): matrix for metric, matrix in at_half.items()}
        for metric, alpha in CASES:
            if (metric, alpha) not in out[dtype]:
                result = compute_unifrac(*demo, [metric], alpha=alpha, dtype=dtype, threads=2)
                out[dtype][metric, alpha] = result[metric]
    return out


def test_the_demo_groups_span_several_kernel_tiles(demo):
    sizes = {name: len(rows) for name, rows in groups(len(demo[0].sample_ids)).items()}
    assert sizes["200"] > cpu_kernel.TILE
    assert len(set(groups(400)["repeats"])) < 60


@pytest.mark.slow
@pytest.mark.parametrize(("metric", "alpha"), CASES, ids=CASE_IDS)
def test_float64_batches_equal_the_full_matrix(demo, full, metric, alpha):
    counts, tree = demo
    unifrac = BatchUniFrac.for_table(counts, tree, metric, alpha=alpha)
    expected = full[np.float64][metric, alpha]
    assert expected.max() > 0.1  # real distances, not zeros
    for name, rows in groups(len(counts.sample_ids)).items():
        ours = unifrac.distances(*csr_rows(counts, rows))
        assert ours.dtype == np.float64 and ours.shape == (len(rows), len(rows))
        assert np.abs(ours - expected[np.ix_(rows, rows)]).max() <= 1e-12, name


@pytest.mark.parametrize(("metric", "alpha"), CASES, ids=CASE_IDS)
def test_float32_batches_equal_the_float32_full_matrix(demo, full, metric, alpha):
    counts, tree = demo
    unifrac = BatchUniFrac.for_table(counts, tree, metric, alpha=alpha, dtype=np.float32)
    expected = full[np.float32][metric, alpha]
    for rows in groups(len(counts.sample_ids)).values():
        ours = unifrac.distances(*csr_rows(counts, rows))
        assert_float32_kernel_close(ours, expected[np.ix_(rows, rows)], rows, metric)


@pytest.mark.parametrize(("metric", "alpha"), CASES, ids=CASE_IDS)
def test_training_blocks_are_the_float64_matrix_cast_to_float32(
    demo, demo_table, full, metric, alpha
):
    counts, tree = demo
    samples = SampleSet.from_table(demo_table, max_bp=100)
    assert samples.sample_ids == counts.sample_ids
    distances = TreeDistances(samples, BatchUniFrac.for_table(counts, tree, metric, alpha=alpha))
    expected = full[np.float64][metric, alpha].astype(np.float32)
    for rows in groups(len(counts.sample_ids)).values():
        block = distances.block(rows)
        assert block.dtype == np.float32
        assert_cast_of_float64(block, expected[np.ix_(rows, rows)], rows)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_studys_tree_distances_follow_its_unifrac_options(demo_dir, full, dtype):
    """`load_study(unifrac=UniFracSource(tree=..., options=...))`: metric, alpha and dtype reach the
    kernel; positions are the study's (the study's order mapped to the matrix's)."""
    study = load_study(
        demo_dir / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(
            tree=demo_dir / "tree.nwk",
            options=UniFracOptions(
                unifrac_metric="generalized", unifrac_alpha=0.3, unifrac_dtype=dtype
            ),
        ),
        reading=StudyOptions(val_fraction=0.0),
    )
    ids = load_counts(demo_dir / "table.biom").sample_ids
    row_of = np.array([ids.index(sid) for sid in study.samples.sample_ids])
    assert study.draw(0) is None
    for positions in groups(len(row_of)).values():
        block = study.distances.block(positions, study.draw(0))
        rows = row_of[positions]
        if dtype == "float64":
            expected = full[np.float64]["generalized", 0.3][np.ix_(rows, rows)]
            assert_cast_of_float64(block, expected.astype(np.float32), rows)
        else:
            expected = full[np.float32]["generalized", 0.3][np.ix_(rows, rows)]
            assert_float32_kernel_close(block, expected, rows, "generalized")


# --- ASVs missing from the tree -------------------------------------------------------------


@pytest.fixture(scope="module")
def with_stranger(demo_table) -> biom.Table:
    """80 demo samples plus, as the FIRST observation, an ASV that is no tip of the tree, with
    reads in every third sample (so every later table ASV index shifts by one)."""
    table = demo_table.filter(demo_table.ids()[:80], inplace=False)
    table = table.remove_empty(axis="observation")
    dense = table.matrix_data.toarray()
    stranger = np.where(np.arange(dense.shape[1]) % 3 == 0, 37.0, 0.0)
    return biom.Table(
        np.vstack([stranger, dense]),
        ["A" * 100, *table.ids("observation")],
        list(table.ids()),
    )


@pytest.mark.parametrize(("metric", "alpha"), CASES, ids=CASE_IDS)
def test_prune_missing_batches_equal_the_pruned_full_matrix(demo, with_stranger, metric, alpha):
    tree = demo[1]
    counts = counts_of(with_stranger)
    expected = compute_unifrac(counts, tree, [metric], alpha=alpha, prune_missing=True, threads=1)[
        metric
    ]
    unifrac = BatchUniFrac.for_table(counts, tree, metric, alpha=alpha, prune_missing=True)
    assert not unifrac.in_tree[0] and unifrac.in_tree[1:].all()
    device = DeviceBatchUniFrac.on(unifrac, "cpu")
    for name, rows in groups(len(counts.sample_ids)).items():
        ours = unifrac.distances(*csr_rows(counts, rows))
        assert np.abs(ours - expected[np.ix_(rows, rows)]).max() <= 1e-12, name
        on_device = device.distances(*csr_rows(counts, rows)).numpy()
        assert np.abs(on_device - expected[np.ix_(rows, rows)]).max() <= 1e-12, name


def test_a_batch_sample_with_reads_only_off_the_tree_is_one_line(demo, with_stranger):
    """Sample 1 of the batch holds only the pruned ASV: both engines stop, naming it."""
    counts = counts_of(with_stranger)
    unifrac = BatchUniFrac.for_table(counts, demo[1], "unweighted", alpha=0.5, prune_missing=True)
    ptr, idx, reads = csr_rows(counts, np.array([1, 2]))
    batch = (
        np.array([0, ptr[1], ptr[1] + 1]),
        np.append(idx[: ptr[1]], 0),
        np.append(reads[: ptr[1]], 5.0),
    )
    for engine in (unifrac.distances, DeviceBatchUniFrac.on(unifrac, "cpu").distances):
        message = one_line_error(engine, *batch)
        assert "sample 1 of a batch has no reads on ASVs of the tree" in message


def test_an_asv_missing_from_the_tree_is_one_line_without_prune_missing(demo, with_stranger):
    message = one_line_error(
        BatchUniFrac.for_table,
        counts_of(with_stranger),
        demo[1],
        "unweighted",
        alpha=0.5,
        table_name="t.biom",
        tree_name="t.nwk",
    )
    assert "t.biom" in message and "not tips of t.nwk" in message and "1 of" in message


def node_shared(unifrac: BatchUniFrac, reads, *, on_device: bool, world: int = 3) -> np.ndarray:
    """The distances ``world`` ranks form, each from its node share and the ranks' summed
    partial sums, its own rows (uneven, some empty), stacked; the ranks run in this process
    (the cpu engine on ``POOL``, or the gpu engine's code on the CPU)."""
    n = len(reads[0]) - 1
    bounds = np.linspace(0, n, world + 1).astype(int)

    def rank(share: BatchUniFrac, rows: slice, combine):
        if on_device:
            device = DeviceBatchUniFrac.on(share, "cpu")
            return device.distances(*reads, combine, rows).numpy()
        return share.distances(*reads, pool=POOL, combine=combine, rows=rows)

    ranks = [
        functools.partial(
            rank, unifrac.node_share(r, world, device=on_device), slice(bounds[r], bounds[r + 1])
        )
        for r in range(world)
    ]
    return np.vstack(ranks_in_one_process(ranks))


# --- random tables and trees ----------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(study=studies(), data=st.data())
def test_any_group_of_a_random_study_equals_its_full_matrix(study, data):
    """Random tables and trees (zero-length branches included), every metric and alpha, any
    group (order, repeats); with tiles of 3 samples and dense runs from 2, so small groups
    cross tiles and take both kernel paths; the device code in one dense block and in
    sorted chunks."""
    table, tree, metric, alpha, _ = study
    counts, arrays = counts_of(table), tree_arrays(tree)
    n = len(counts.sample_ids)
    rows = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=2 * n)))
    with mock.patch.object(cpu_kernel, "TILE", 3), mock.patch.object(cpu_kernel, "DENSE_RUN", 2):
        for dtype in (np.float64, np.float32):
            full = compute_unifrac(counts, arrays, [metric], alpha=alpha, dtype=dtype, threads=1)
            expected = full[metric][np.ix_(rows, rows)]
            unifrac = BatchUniFrac.for_table(counts, arrays, metric, alpha=alpha, dtype=dtype)
            reads = csr_rows(counts, rows)
            ours = unifrac.distances(*reads)
            assert ours.dtype == dtype and ours.shape == (len(rows), len(rows))
            # the cpu engine's pool: the same matrix, bit for bit
            assert np.array_equal(unifrac.distances(*reads, pool=POOL), ours)
            # a group of rows alone: those rows of the whole, bit for bit
            some = slice(len(rows) // 3, len(rows) - 1)
            assert np.array_equal(unifrac.distances(*reads, pool=POOL, rows=some), ours[some])
            # 3 ranks' node shares (a share may hold no node of a small tree), each forming its
            # own rows; partial sums added in float64, so within rounding
            ranks = node_shared(unifrac, reads, on_device=False)
            assert ranks.dtype == dtype and ranks.shape == ours.shape
            # the gpu engine's code on the CPU, whole and from 3 ranks' node shares
            device = DeviceBatchUniFrac.on(unifrac, "cpu")
            on_device = device.distances(*reads).numpy()
            # its path for batches whose nodes do not fit one dense block: sorted, one node a chunk
            with mock.patch.object(batch_device, "CHUNK_ELEMENTS", len(rows)):
                chunked = device.distances(*reads).numpy()
            device_ranks = node_shared(unifrac, reads, on_device=True)
            assert np.array_equal(device.distances(*reads, rows=some).numpy(), on_device[some])
            assert on_device.dtype == dtype and device_ranks.shape == ours.shape
            scale = max(1.0, float(expected.max()))
            if dtype == np.float64:
                assert np.abs(ours - expected).max() <= 1e-12 * scale
                cast = ours.astype(np.float32), expected.astype(np.float32)
                assert_cast_of_float64(*cast, rows, floor=1e-12 * scale)
                assert np.abs(on_device - expected).max() <= 1e-12 * scale
                assert np.abs(chunked - expected).max() <= 1e-12 * scale
                assert np.abs(ranks - expected).max() <= 1e-12 * scale
                assert np.abs(device_ranks - expected).max() <= 1e-12 * scale
            else:
                tolerance = 8 * EPS32 * scale
                assert np.abs(ours.astype(np.float64) - expected).max() <= tolerance
                assert np.abs(on_device.astype(np.float64) - expected).max() <= tolerance
                assert np.abs(chunked.astype(np.float64) - expected).max() <= tolerance
                assert np.abs(ranks.astype(np.float64) - expected).max() <= tolerance
                assert np.abs(device_ranks.astype(np.float64) - expected).max() <= tolerance


# --- the parts that threads and ranks share ------------------------------------------------


@pytest.mark.parametrize("device", [True, False], ids=["gpu-costs", "cpu-costs"])
def test_node_shares_partition_the_nodes_with_balanced_work(demo, device):
    """A rank's share is a contiguous range of the nodes; the shares cover each node once, in
    order, with about 1/world of the work (``node_work`` of the rank's engine) each."""
    unifrac = BatchUniFrac.for_table(*demo, "unweighted", alpha=0.5)
    whole = unifrac.ancestors.tocsr()
    work = unifrac.node_work(device=device)
    counts = demo[0].matrix
    held = np.asarray((counts > 0).sum(axis=1)).ravel() / counts.shape[1]
    if device:  # a node's work grows with the reads below it: its own spread is its ASVs'
        reached = PAIR_SUM_WEIGHT * np.minimum(1, REACHING_BATCH * (whole @ held))
        assert np.allclose(work - reached, whole @ held)
    for world in (1, 2, 4, 16):
        shares = [unifrac.node_share(r, world, device=device) for r in range(world)]
        stacked = sp.vstack([s.ancestors.tocsr() for s in shares])
        assert (stacked != whole).nnz == 0 and stacked.shape == whole.shape
        assert np.array_equal(np.concatenate([s.lengths for s in shares]), unifrac.lengths)
        each = np.array([s.node_work(device=device).sum() for s in shares])
        assert np.isclose(each.sum(), work.sum())
        assert each.max() <= work.sum() / world + work.max() + 1e-9  # the finest cut: one node


def test_the_cpu_costs_weigh_the_pairs_a_node_makes_the_kernel_visit(demo):
    """The cpu engine's cuts: each node's presence is estimated from its ASVs' prevalences
    (independent), close to the fraction of the demo's samples that hold it; the cost of a
    node grows with the square of the samples that hold it, up to half of them (beyond,
    the kernel visits those lacking it), which the gpu engine's costs do not."""
    counts = demo[0]
    unifrac = BatchUniFrac.for_table(*demo, "unweighted", alpha=0.5)
    reads = csr_rows(counts, np.arange(len(counts.sample_ids)))
    proportions, used, _ = proportions_below(*reads, unifrac.ancestors, unifrac.in_tree)
    measured = np.zeros(unifrac.ancestors.shape[0])
    measured[used] = np.diff(proportions.indptr) / len(counts.sample_ids)
    estimated = unifrac.node_presence()
    assert (
        np.abs(estimated - measured).mean() < 0.05 and np.corrcoef(estimated, measured)[0, 1] > 0.9
    )
    cpu, gpu = unifrac.node_work(device=False), unifrac.node_work(device=True)
    half = np.abs(estimated - 0.5) < 0.1  # nodes about half of the samples hold
    rare = (estimated > 0) & (estimated < 0.02)
    assert half.any() and rare.any()
    assert cpu[half].min() > 10 * cpu[rare].max()  # pairs: (B/2)^2 against (B/50)^2
    assert gpu[half].min() < 10 * gpu[rare].max()


@pytest.mark.parametrize("metric", METRICS)
def test_a_ranks_share_on_the_gpu_engine_is_a_fixed_few_ops_and_two_device_reads(demo, metric):
    """On a GPU a rank's node share takes about as long as launching its kernels: a share
    call (the exchange and its own rows included; its indices built by a first call of each
    batch size) dispatches the same ops whatever the batch size, the rank count and the rank
    (none per node or sample; generalized adds one set per slab of its pair terms, one at
    these sizes), under 60 of them, and reads the device twice (the spread's size; the
    empty-sample check, at the end)."""
    counts = demo[0]
    unifrac = BatchUniFrac.for_table(*demo, metric, alpha=0.5)
    seen = {}
    for batch, world, rank in [(16, 2, 0), (16, 4, 3), (120, 4, 1), (120, 16, 9)]:
        share = DeviceBatchUniFrac.on(unifrac.node_share(rank, world, device=True), "cpu")
        reads = csr_rows(counts, np.arange(batch))
        own = slice(rank * batch // world, (rank + 1) * batch // world)
        share.distances(*reads, lambda partial: partial, own)  # builds the exchange's indices
        with DispatchedOps() as dispatched:
            share.distances(*reads, lambda partial: partial, own)
        seen[batch, world, rank] = dispatched.ops
    first = next(iter(seen.values()))
    assert all(ops == first for ops in seen.values()), seen
    # generalized: its pair terms are elementwise over (node, sample, sample) slabs
    assert sum(first.values()) < (105 if metric == "generalized" else 60), first
    assert first["aten._local_scalar_dense"] == 2, first


@pytest.mark.parametrize("metric", ["unweighted", "generalized"])
def test_a_ranks_partial_sums_go_to_the_exchange_in_place_and_no_result_shares_it(demo, metric):
    """A rank's float64 partial sums are summed into the vector the ranks add up (the one
    ``combine`` gets: totals, unweighted's complement halves, then each sum array), in a
    buffer kept for the next batch; no distances returned lie in it, whole or in rows."""
    counts = demo[0]
    share = BatchUniFrac.for_table(*demo, metric, alpha=0.5).node_share(0, 2, device=False)
    first, second = csr_rows(counts, np.arange(0, 90)), csr_rows(counts, np.arange(200, 290))
    handed = []
    whole = share.distances(*first, combine=lambda flat: handed.append(flat) or flat)
    rows = share.distances(*first, combine=lambda flat: flat, rows=slice(30, 60))
    kept = whole.copy(), rows.copy()
    share.distances(*second, combine=lambda flat: flat)
    assert np.array_equal(whole, kept[0]) and np.array_equal(rows, kept[1])
    assert np.array_equal(rows, whole[30:60])
    (flat,) = handed
    head = 2 * 90 if metric == "unweighted" else 90
    assert flat.dtype == np.float64  # the sums as their strict upper triangles, packed
    assert len(flat) == head + (2 if metric == "generalized" else 1) * 90 * 89 // 2
    assert np.shares_memory(flat, share.exchange.zeroed(1))  # the thread's kept buffer


@pytest.mark.parametrize("metric", ["unweighted", "weighted_normalized", "generalized"])
def test_a_batchs_packed_pair_sums_are_the_full_kernels_upper_triangle(demo, metric):
    """A batch's pair sums (what ranks exchange): each one's strict upper triangle packed row
    by row, half of a square's entries; on one thread and on a pool, the upper triangle of
    the full-matrix kernel's (`aam unifrac`'s) square, bit for bit (shared length: within
    rounding once its complement halves are added). Any rows of distances formed from them
    are those rows of the square's distances (`aam unifrac`'s formula): bit for bit, shared
    length within rounding."""
    counts = demo[0]
    unifrac = BatchUniFrac.for_table(*demo, metric, alpha=0.5)
    reads = csr_rows(counts, np.arange(10, 150))
    proportions, used, _ = proportions_below(*reads, unifrac.ancestors, unifrac.in_tree)
    n, kind, lengths = 140, SUM_FOR_METRIC[metric], unifrac.lengths[used]
    upper = np.triu_indices(n, 1)
    square = cpu_kernel.block_pair_sums(proportions, lengths, {kind}, 0, n, alpha=0.5, threads=1)
    abundance = NodeAbundance([str(k) for k in range(n)], lengths, proportions)
    totals = sample_totals(metric, abundance, 0.5)
    whole = upper_distances(metric, totals, square, 0)
    mirror_upper(whole)
    for pool in (None, POOL):
        halves = np.zeros(n)
        packed = cpu_kernel.batch_pair_sums(
            proportions, lengths, kind, alpha=0.5, dtype=np.float64, pool=pool, halves=halves
        )
        for name, value in vars(square).items():
            if value is None:
                continue
            flat = getattr(packed, name)
            assert flat.shape == (n * (n - 1) // 2,)
            if kind == "shared_length":
                added = flat + (halves[:, None] + halves[None, :])[upper]
                assert np.abs(added - value[upper]).max() <= 1e-12 * value.max()
                assert np.abs(halves).max() > 0  # the demo's upper nodes are complemented
            else:
                assert np.array_equal(flat, value[upper])
        deferred = halves if kind == "shared_length" else None
        for lo, hi in ((0, n), (0, 1), (37, 101), (n - 1, n)):
            rows = row_distances(metric, totals, packed, slice(lo, hi), pool, deferred)
            assert rows.shape == (hi - lo, n) and (np.diag(rows, lo) == 0).all()
            if kind == "shared_length":
                assert np.abs(rows - whole[lo:hi]).max() <= 1e-12
            else:
                assert np.array_equal(rows, whole[lo:hi])
    with pytest.raises(ValueError, match="halves"):
        cpu_kernel.batch_pair_sums(
            proportions, lengths, "shared_length", alpha=0.5, dtype=np.float64
        )


def test_ranks_add_shared_lengths_complement_terms_over_their_own_rows_only(demo):
    """Unweighted: a rank does not add the complement terms of the nodes most samples hold
    over all B^2 pairs; it exchanges them as per-sample halves (nonzero on the demo data,
    whose upper nodes are flipped) and adds their sums over its own rows: 4 ranks' rows stack
    to the one-process matrix."""
    counts = demo[0]
    unifrac = BatchUniFrac.for_table(*demo, "unweighted", alpha=0.5)
    reads = csr_rows(counts, np.arange(0, 120))
    whole = unifrac.distances(*reads)
    handed = []
    for r in range(4):
        unifrac.node_share(r, 4, device=False).distances(
            *reads, combine=lambda flat: handed.append(flat[120:240].copy()) or flat
        )
    # the ranks' halves (after the totals) add up to the whole tree's
    proportions, used, _ = proportions_below(*reads, unifrac.ancestors, unifrac.in_tree)
    flipped = cpu_kernel._complemented(proportions)[1]
    expected = cpu_kernel.complement_halves(proportions, unifrac.lengths[used], flipped)
    assert flipped.any() and np.abs(expected).max() > 0
    assert np.allclose(sum(handed), expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    ranks = node_shared(unifrac, reads, on_device=False, world=4)
    assert np.abs(ranks - whole).max() <= 1e-12 * max(1.0, float(whole.max()))


def test_a_pair_holding_no_branch_length_stays_at_distance_zero_across_ranks():
    """float32 unweighted across ranks: a complement term is cast to float32 before it is
    added, as the one-process kernel adds it, so it cancels the kernel's float32 sum of the
    same length; two samples whose only ASV's tip has length 0 stay at distance 0 (they were
    2.0 with the term added in float64: hypothesis found it)."""
    matrix = np.array([[1, 1, 1, 1, 0], [0, 0, 0, 0, 1.0]])
    table = biom.Table(matrix, ["t0", "t1"], [f"s{k}" for k in range(5)])
    tree = skbio.TreeNode.read(io.StringIO("(t0:1.0195971014658647,t1:0.0);"))
    counts, arrays, rows = counts_of(table), tree_arrays(tree), np.array([0, 0, 0, 4, 4])
    for dtype in (np.float64, np.float32):
        unifrac = BatchUniFrac.for_table(counts, arrays, "unweighted", alpha=1.0, dtype=dtype)
        ranks = node_shared(unifrac, csr_rows(counts, rows), on_device=False)
        assert ranks[3, 4] == ranks[4, 3] == 0.0 and ranks[0, 3] == 1.0


def test_column_sums_are_scipys_transposed_product_bit_for_bit(demo):
    counts, tree = demo
    abundance = node_abundance(counts.matrix, counts.observation_ids, counts.sample_ids, tree)
    p, lengths = abundance.proportions, abundance.lengths
    for presence, matrix in ((False, p), (True, p.sign())):
        expected = np.asarray(matrix.T @ lengths, dtype=np.float64).ravel()
        assert np.array_equal(cpu_kernel.column_sums(p, lengths, presence), expected)


def test_the_tile_layout_on_threads_is_the_serial_one(demo):
    counts, tree = demo
    abundance = node_abundance(counts.matrix, counts.observation_ids, counts.sample_ids, tree)
    n = abundance.proportions.shape[1]
    tile_of = np.repeat(np.arange(4, dtype=np.int32), -(-n // 4))[:n]
    for start in (0, 37):
        serial = cpu_kernel._tile_layout(abundance.proportions, start, tile_of, 4, np.float64)
        pooled = cpu_kernel._tile_layout(abundance.proportions, start, tile_of, 4, np.float64, POOL)
        assert all(np.array_equal(a, b) for a, b in zip(serial, pooled, strict=True))
        assert serial[0][-1, -1] == (abundance.proportions.indices >= start).sum()


@settings(max_examples=50, deadline=None)
@given(rows=st.integers(0, 300), extra=st.integers(0, 300), parts=st.integers(1, 16))
def test_triangle_rows_cut_every_row_once_into_near_equal_shares(rows, extra, parts):
    columns = rows + extra
    bounds = cpu_kernel.triangle_rows(rows, columns, parts)
    assert bounds[0] == 0 and bounds[-1] == rows and (np.diff(bounds) > 0).all()
    assert len(bounds) - 1 <= max(parts, 1)
    cost = np.maximum(columns - np.arange(rows) - 1, 1)
    shares = [cost[a:b].sum() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    if rows:
        assert max(shares) <= cost.sum() / parts + cost.max()


@pytest.mark.parametrize("like", [np.float32(1), np.float64(1)])
def test_cast_like_gives_the_dtype_of_its_second_argument_in_python_and_compiled(like):
    """The halves' cast (``distance_kernel.cast_like``): plain Python and numba's overload
    round a float64 to the same value of ``like``'s dtype."""
    import numba

    from aam.unifrac.distance_kernel import cast_like

    compiled = numba.njit(lambda value, like: cast_like(value, like))
    for value in (0.1, 1 / 3, 1e-40, 3.4e38):
        ours, theirs = cast_like(value, like), compiled(value, like)
        assert np.asarray(ours).dtype == np.asarray(like).dtype
        assert ours == theirs == np.asarray(value).astype(np.asarray(like).dtype)
