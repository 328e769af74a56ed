"""Sparse shared-node kernel for CPUs (numba): visits only node x sample pairs present in both.

The N x N output is cut into square tiles. Entries of the node x sample proportion matrix are
sorted by (sample tile, node, sample), so for a tile pair (I, J) every node's samples in I and
in J are two contiguous runs. Each tile pair is one parallel task writing its own output block
(no races), and a tile's output block stays in cache while all nodes stream past it.
A row block of the upper triangle (``block_pair_sums``, one shard of `aam unifrac-shard`) runs
the same tasks for its rows only; the full matrix is the block of all rows, mirrored.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp
from tqdm import tqdm

from aam.unifrac.metrics import PairSums

TILE = 128


@numba.njit(parallel=True, cache=True, nogil=True)
def _tile_pairs_kernel(
    ptr, samples, values, powered, lengths, pair_i, pair_j, alpha, mode, out_a, out_b
):  # pragma: no cover - compiled
    """Accumulate pair sums over shared nodes into the upper triangle of out_a (and out_b).

    mode 0: out_a += L (shared length); mode 1: out_a += L*min(p_i, p_j);
    mode 2: generalized numerator into out_a and denominator into out_b.
    """
    n_nodes = lengths.shape[0]
    for task in numba.prange(pair_i.shape[0]):
        ti = pair_i[task]
        tj = pair_j[task]
        for v in range(n_nodes):
            a0 = ptr[ti, v]
            a1 = ptr[ti, v + 1]
            if a0 == a1:
                continue
            b0 = ptr[tj, v]
            b1 = ptr[tj, v + 1]
            if b0 == b1:
                continue
            length = lengths[v]
            for a in range(a0, a1):
                i = samples[a]
                pi = values[a]
                start = a + 1 if ti == tj else b0
                if mode == 0:
                    for b in range(start, b1):
                        out_a[i, samples[b]] += length
                elif mode == 1:
                    for b in range(start, b1):
                        out_a[i, samples[b]] += length * min(pi, values[b])
                else:
                    for b in range(start, b1):
                        pj = values[b]
                        total = pi + pj
                        scaled = np.sqrt(total) if alpha == 0.5 else total**alpha
                        solo = powered[a] + powered[b]
                        out_a[i, samples[b]] += length * (scaled * abs(pi - pj) / total - solo)
                        out_b[i, samples[b]] += length * (scaled - solo)


def pair_sums_cpu(
    proportions: sp.csr_matrix,
    lengths: np.ndarray,
    kinds: set[str],
    *,
    alpha: float = 1.0,
    dtype: type = np.float64,
    threads: int | None = None,
    progress: bool = False,
) -> PairSums:
    """Compute the requested pair sums ("shared_length", "shared_min", "generalized")."""
    n_samples = proportions.shape[1]
    sums = block_pair_sums(
        proportions,
        lengths,
        kinds,
        0,
        n_samples,
        alpha=alpha,
        dtype=dtype,
        threads=threads,
        progress=progress,
    )
    for name in ("shared_length", "shared_min", "gen_num", "gen_den"):
        upper = getattr(sums, name)
        if upper is not None:
            upper += upper.T  # the lower triangle is 0: exact
    return sums


def block_pair_sums(
    proportions: sp.csr_matrix,
    lengths: np.ndarray,
    kinds: set[str],
    start: int,
    stop: int,
    *,
    alpha: float = 1.0,
    dtype: type = np.float64,
    threads: int | None = None,
    progress: bool = False,
) -> PairSums:
    """Pair sums of samples ``start..stop-1`` (rows) with samples ``start..N-1`` (columns).

    Entry ``[i, j]`` is the pair (start + i, start + j) for ``j > i`` and 0 otherwise: the
    upper triangle of the full matrix, restricted to rows ``start..stop-1``. Each pair is
    accumulated by the same kernel over the same nodes in the same order whatever the block,
    so blocks reproduce the full computation bit for bit.
    """
    if threads:
        numba.set_num_threads(threads)
    columns = proportions
    if start:
        columns = proportions[:, start:]
        columns.sort_indices()  # the kernel needs each node's samples in order
    n_nodes, n_columns = columns.shape
    rows = stop - start
    # Tiles of TILE samples, restarted at ``rows``: the first n_row_tiles tiles hold the rows.
    n_row_tiles = -(-rows // TILE)
    local = np.arange(n_columns)
    tile_of = np.where(local < rows, local // TILE, n_row_tiles + (local - rows) // TILE)
    n_tiles = n_row_tiles + -(-(n_columns - rows) // TILE)
    coo = columns.tocoo()
    key = tile_of[coo.col].astype(np.int64) * n_nodes + coo.row
    order = np.argsort(key, kind="stable")  # CSR order is (node, sample); now (tile, node, sample)
    starts = np.zeros(n_tiles * n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(key, minlength=n_tiles * n_nodes), out=starts[1:])
    ptr = starts[np.arange(n_tiles)[:, None] * n_nodes + np.arange(n_nodes + 1)[None, :]]
    samples = coo.col[order].astype(np.int64)
    values = coo.data[order].astype(dtype)
    node_lengths = lengths.astype(dtype)
    powered = values**alpha if "generalized" in kinds else np.zeros(1, dtype=dtype)

    pair_i, pair_j = np.triu_indices(n_tiles)
    keep = pair_i < n_row_tiles
    pair_i, pair_j = pair_i[keep], pair_j[keep]
    # Interleave costly and cheap tile pairs so parallel chunks are balanced.
    shuffle = np.random.default_rng(0).permutation(len(pair_i))
    pair_i, pair_j = pair_i[shuffle].astype(np.int64), pair_j[shuffle].astype(np.int64)

    sums = PairSums()
    modes = [(k, m) for k, m in (("shared_length", 0), ("shared_min", 1), ("generalized", 2))]
    todo = [(kind, mode) for kind, mode in modes if kind in kinds]
    batch = max(32, len(pair_i) // 50)
    with tqdm(
        total=len(pair_i) * len(todo), unit="tile pair", disable=not progress, desc="UniFrac"
    ) as bar:
        for kind, mode in todo:
            out_a = np.zeros((rows, n_columns), dtype=dtype)
            out_b = np.zeros((rows, n_columns) if mode == 2 else (1, 1), dtype=dtype)
            for lo in range(0, len(pair_i), batch):
                hi = min(lo + batch, len(pair_i))
                _tile_pairs_kernel(
                    ptr,
                    samples,
                    values,
                    powered,
                    node_lengths,
                    pair_i[lo:hi],
                    pair_j[lo:hi],
                    dtype(alpha),
                    mode,
                    out_a,
                    out_b,
                )
                bar.update(hi - lo)
            if mode == 2:
                sums.gen_num, sums.gen_den = out_a, out_b
            else:
                setattr(sums, kind, out_a)
    return sums
