"""Sparse shared-node kernel for CPUs (numba): visits only node x sample pairs present in both.

The N x N output is cut into square tiles. Entries of the node x sample matrix are sorted by
(sample tile, node, sample), so for a tile pair (I, J) every node's samples in I and in J are
two contiguous runs. Each tile pair is one parallel task writing its own output block (no
races), and a tile's output block stays in cache while all nodes stream past it. When a node
holds many of tile J's samples, they are spread into a dense vector and each of the node's
samples in I updates its whole output row in one SIMD loop; otherwise the pairs are visited
one by one. Both paths add the same terms in the same node order, so results do not depend
on which one runs.

Shared length (unweighted UniFrac) uses complements: a node present in most samples is
stored by the samples it is ABSENT from, since ``[i in v][j in v] = 1 - [i not in v]
- [j not in v] + [i not in v][j not in v]``; on the oral data this cuts the pairs visited 4.7x.

Only the upper triangle (``j > i``) is computed. A row block of it (``block_pair_sums``, one
shard of `aam unifrac-shard`) runs the same tasks for its rows only; each pair gets the same
terms in the same order whatever the block, so blocks reproduce the full matrix bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp

from aam.threads import ThreadPool, usable_threads
from aam.unifrac.metrics import PairSums

TILE = 128
DENSE_RUN = 12  # a node's run of tile-J samples at least this long takes the dense path
_MODES = (("shared_length", 0), ("shared_min", 1), ("generalized", 2))


@numba.njit(cache=True, nogil=True)
def _tile_pair_task(
    ti,
    tj,
    ptr,
    samples,
    values,
    powered,
    lengths,
    tile_start,
    alpha,
    mode,
    dense_run,
    out_a,
    out_b,
):  # pragma: no cover - compiled
    """Accumulate the pair sums of tile pair (ti, tj) over shared nodes into the upper triangle
    of out_a (and out_b).

    mode 0: out_a += L (shared length); mode 1: out_a += L*min(p_i, p_j);
    mode 2: generalized numerator into out_a and denominator into out_b.
    Modes 0 and 1 take the dense path for runs of at least ``dense_run`` tile-J samples.
    """
    n_nodes = lengths.shape[0]
    j0 = tile_start[tj]
    width = tile_start[tj + 1] - j0
    dense = np.zeros(width, dtype=out_a.dtype)
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
        if mode != 2 and b1 - b0 >= dense_run:
            for b in range(b0, b1):
                dense[samples[b] - j0] = 1.0 if mode == 0 else values[b]
            for a in range(a0, a1):
                row = out_a[samples[a], j0 : j0 + width]
                if mode == 0:
                    for k in range(width):
                        row[k] += length * dense[k]
                else:
                    pi = values[a]
                    for k in range(width):
                        row[k] += length * min(pi, dense[k])
            for b in range(b0, b1):
                dense[samples[b] - j0] = 0.0
            continue
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


@numba.njit(parallel=True, cache=True, nogil=True)
def _tile_pairs_parallel(pair_i, pair_j, args):  # pragma: no cover - compiled
    """``_tile_pair_task(ti, tj, *args)`` over every tile pair, the pairs in parallel (each
    writes its own output block)."""
    for task in numba.prange(pair_i.shape[0]):
        _tile_pair_task(pair_i[task], pair_j[task], *args)


@numba.njit(cache=True, nogil=True)
def _tile_pairs_serial(pair_i, pair_j, args):  # pragma: no cover - compiled
    """``_tile_pair_task(ti, tj, *args)`` over every tile pair in this thread: no threading
    layer, so it may run beside other threads (a training data pipeline) using numba or torch."""
    for task in range(pair_i.shape[0]):
        _tile_pair_task(pair_i[task], pair_j[task], *args)


def pair_sums_cpu(
    proportions: sp.csr_matrix,
    lengths: np.ndarray,
    kinds: set[str],
    *,
    alpha: float = 1.0,
    dtype: type = np.float64,
    threads: int | None = None,
    progress: bool = False,
    serial: bool = False,
) -> PairSums:
    """The requested pair sums ("shared_length", "shared_min", "generalized") of all
    samples: their upper triangles (``j > i``); the rest of each array is unspecified.
    ``serial`` runs in the calling thread only (the same sums, bit for bit)."""
    n_samples = proportions.shape[1]
    return block_pair_sums(
        proportions,
        lengths,
        kinds,
        0,
        n_samples,
        alpha=alpha,
        dtype=dtype,
        threads=threads,
        progress=progress,
        serial=serial,
    )


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
    serial: bool = False,
) -> PairSums:
    """Pair sums of samples ``start..stop-1`` (rows) with samples ``start..N-1`` (columns).

    Entry ``[i, j]`` for ``j > i`` is the pair (start + i, start + j): the upper triangle of
    the full matrix, restricted to rows ``start..stop-1``; entries ``j <= i`` are unspecified.
    """
    if threads and not serial:
        numba.set_num_threads(usable_threads(threads))
    n = proportions.shape[1]
    plan = tile_plan(stop - start, n - start)
    kernel = _tile_pairs_serial if serial else _tile_pairs_parallel
    pairs = (stop - start) * (n - start) - (stop - start) * (stop - start + 1) // 2
    todo = [(kind, mode) for kind, mode in _MODES if kind in kinds]
    with _progress(progress, len(todo) * pairs) as bar:
        return _sums(proportions, lengths, todo, start, plan, alpha, dtype, kernel, bar)


def batch_pair_sums(
    proportions: sp.csr_matrix,
    lengths: np.ndarray,
    kind: str,
    *,
    alpha: float,
    dtype: type,
    pool: ThreadPool | None = None,
    share: tuple[int, int] = (0, 1),
) -> tuple[PairSums, TilePlan]:
    """One kind of pair sum of a small group of samples (a training batch) for the tile pairs
    of ``share`` = (rank, world) only, and the plan of those tile pairs (``covered``).
    ``pool``: its threads run the serial kernel on parts of the tile pairs (each writes its
    own blocks: the same sums, bit for bit, whatever the threads or the share)."""
    n = proportions.shape[1]
    workers = pool.threads if pool is not None else 1
    plan = tile_plan(n, n, tile=batch_tile(n, workers * share[1]), share=share)
    todo = [(k, mode) for k, mode in _MODES if k == kind]
    kernel = _tile_pairs_serial if pool is None else _pooled(pool, 4 * workers)
    with _progress(False, 0) as bar:
        sums = _sums(proportions, lengths, todo, 0, plan, alpha, dtype, kernel, bar)
    return sums, plan


def batch_tile(n: int, parts: int) -> int:
    """A tile size that cuts n samples into at least ~8 tile pairs per part (thread x rank),
    between 16 and ``TILE``: results do not depend on it."""
    tiles = math.ceil(math.sqrt(16 * parts))
    return int(min(TILE, max(min(16, TILE), math.ceil(n / tiles))))


def _pooled(pool: ThreadPool, parts: int) -> Callable[..., None]:
    """A kernel runner that splits the tile pairs into ``parts`` runs of the serial kernel on
    ``pool``'s threads (numba releases the GIL: no threading layer, safe beside torch)."""

    def run(pair_i: np.ndarray, pair_j: np.ndarray, arguments: tuple) -> None:
        chunks = [c for c in np.array_split(np.arange(len(pair_i)), parts) if len(c)]
        submit = pool.executor.submit
        futures = [submit(_tile_pairs_serial, pair_i[c], pair_j[c], arguments) for c in chunks]
        for future in futures:
            future.result()

    return run


def _sums(proportions, lengths, todo, start, plan, alpha, dtype, kernel, bar) -> PairSums:
    """The pair sums of each (kind, mode) in ``todo`` over ``plan``'s tile pairs."""
    sums = PairSums()
    for kind, mode in todo:
        if mode == 0:
            entries, flipped = _complemented(proportions)
        else:
            entries, flipped = proportions, None
        out_a, out_b = _run(entries, lengths, mode, start, plan, alpha, dtype, kernel, bar)
        if flipped is not None:
            _add_complement_terms(out_a, proportions, lengths, flipped, start)
        if mode == 2:
            sums.gen_num, sums.gen_den = out_a, out_b
        else:
            setattr(sums, kind, out_a)
    return sums


@dataclass(frozen=True)
class TilePlan:
    """Tiles of the samples (``tile_start``) and the tile pairs to visit, in visiting order."""

    rows: int  # the first ``rows`` columns are the output's rows
    tile_start: np.ndarray  # (tiles + 1,) int64 first local column of each tile
    pair_i: np.ndarray  # (pairs,) int64 row tile
    pair_j: np.ndarray  # (pairs,) int64 column tile (>= pair_i)

    def covered(self, n: int) -> np.ndarray:
        """(n, n) bool: the pairs j > i that the plan's tile pairs compute."""
        tile_of = np.repeat(np.arange(len(self.tile_start) - 1), np.diff(self.tile_start))
        owned = np.zeros((len(self.tile_start) - 1,) * 2, dtype=bool)
        owned[self.pair_i, self.pair_j] = True
        return np.triu(owned[tile_of[:, None], tile_of[None, :]], k=1)


def tile_plan(
    rows: int, n_columns: int, *, tile: int | None = None, share: tuple[int, int] = (0, 1)
) -> TilePlan:
    """Tiles of ``tile`` samples, restarted at ``rows`` (the first tiles hold the rows), and
    the upper-triangle tile pairs with a row tile, shuffled so costly and cheap ones interleave
    (balanced parallel chunks); ``share`` = (rank, world) keeps every world-th of them."""
    tile = tile or TILE
    n_row_tiles = -(-rows // tile)
    tile_start = np.concatenate(
        [np.arange(0, rows, tile), np.arange(rows, n_columns, tile), [n_columns]]
    ).astype(np.int64)
    pair_i, pair_j = np.triu_indices(len(tile_start) - 1)
    keep = pair_i < n_row_tiles
    shuffle = np.random.default_rng(0).permutation(int(keep.sum()))
    rank, world = share
    pair_i = pair_i[keep][shuffle][rank::world].astype(np.int64)
    pair_j = pair_j[keep][shuffle][rank::world].astype(np.int64)
    return TilePlan(rows, tile_start, pair_i, pair_j)


PROGRESS_STEPS = 100  # kernel calls per pass when a progress bar is shown


def _progress(enabled: bool, total: int):
    """A bar over the sample pairs of every pass (one pass per kind of sum)."""
    from tqdm import tqdm  # 0.1 s of imports, only for a progress bar

    return tqdm(
        total=total, unit="pair", unit_scale=True, disable=not enabled, desc="UniFrac pairs"
    )


@numba.njit(cache=True, nogil=True)
def _tile_layout(
    indptr, indices, data, start, tile_of, n_tiles, values_dtype
):  # pragma: no cover - compiled
    """Entries of columns ``start..`` of a CSR node x sample matrix, counting-sorted from
    (node, sample) order into (tile, node, sample) order: ``ptr[t, v]..ptr[t, v + 1]`` are
    node v's entries in tile t; samples are local column numbers."""
    n_nodes = indptr.shape[0] - 1
    ptr = np.zeros((n_tiles, n_nodes + 1), dtype=np.int64)
    for v in range(n_nodes):
        for e in range(indptr[v], indptr[v + 1]):
            if indices[e] >= start:
                ptr[tile_of[indices[e] - start], v + 1] += 1
    total = 0
    for t in range(n_tiles):
        for v in range(n_nodes):
            count = ptr[t, v + 1]
            ptr[t, v] = total
            total += count
        ptr[t, n_nodes] = total
    samples = np.empty(total, dtype=np.int32)
    values = np.empty(total, dtype=values_dtype)
    fill = ptr[:, :n_nodes].copy()
    for v in range(n_nodes):
        for e in range(indptr[v], indptr[v + 1]):
            column = indices[e] - start
            if column >= 0:
                t = tile_of[column]
                samples[fill[t, v]] = column
                values[fill[t, v]] = data[e]
                fill[t, v] += 1
    return ptr, samples, values


@numba.njit(cache=True, nogil=True)
def _complement_rows(indptr, indices, flipped, n_samples):  # pragma: no cover - compiled
    """CSR (indptr, indices) whose flipped rows hold the samples absent from that row."""
    n_nodes = indptr.shape[0] - 1
    out_ptr = np.zeros(n_nodes + 1, dtype=np.int64)
    for v in range(n_nodes):
        present = indptr[v + 1] - indptr[v]
        out_ptr[v + 1] = out_ptr[v] + (n_samples - present if flipped[v] else present)
    out = np.empty(out_ptr[n_nodes], dtype=indices.dtype)
    for v in range(n_nodes):
        k = out_ptr[v]
        if not flipped[v]:
            for e in range(indptr[v], indptr[v + 1]):
                out[k] = indices[e]
                k += 1
            continue
        e = indptr[v]
        for sample in range(n_samples):  # indices are sorted: a merge
            if e < indptr[v + 1] and indices[e] == sample:
                e += 1
            else:
                out[k] = sample
                k += 1
    return out_ptr, out


def _run(entries, lengths, mode, start, plan, alpha, dtype, kernel, bar):
    """The kernel over one node x sample entry matrix, for ``plan``'s tile pairs. With an
    enabled progress ``bar`` the tile pairs run in ``PROGRESS_STEPS`` calls, the bar advanced
    by the sample pairs of each (each tile pair writes its own block: the same sums, bit for
    bit)."""
    n_columns = entries.shape[1] - start
    tile_start, pair_i, pair_j = plan.tile_start, plan.pair_i, plan.pair_j
    rows = plan.rows
    n_tiles = len(tile_start) - 1
    tile_of = np.repeat(np.arange(n_tiles, dtype=np.int32), np.diff(tile_start))
    ptr, samples, values = _tile_layout(
        entries.indptr, entries.indices, entries.data, start, tile_of, n_tiles, np.dtype(dtype)
    )
    powered = values**alpha if mode == 2 else np.zeros(1, dtype=dtype)
    out_a = np.zeros((rows, n_columns), dtype=dtype)
    out_b = np.zeros((rows, n_columns) if mode == 2 else (1, 1), dtype=dtype)
    arguments = (
        ptr,
        samples,
        values,
        powered,
        lengths.astype(dtype),
        tile_start,
        dtype(alpha),
        mode,
        DENSE_RUN,
        out_a,
        out_b,
    )
    if bar.disable:
        kernel(pair_i, pair_j, arguments)
        return out_a, out_b
    size = np.diff(tile_start)
    # sample pairs j > i of each tile pair (a row tile with itself: its upper triangle)
    pairs = np.where(
        pair_i == pair_j, size[pair_i] * (size[pair_i] - 1) // 2, size[pair_i] * size[pair_j]
    )
    for chunk in np.array_split(np.arange(len(pair_i)), min(PROGRESS_STEPS, len(pair_i)) or 1):
        kernel(pair_i[chunk], pair_j[chunk], arguments)
        bar.update(int(pairs[chunk].sum()))
    return out_a, out_b


def _complemented(proportions: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray]:
    """Presence entries (value 1), with each node present in more than half of the samples
    stored by the samples it is absent from instead; and which nodes those are."""
    n_nodes, n_samples = proportions.shape
    present = np.diff(proportions.indptr)
    flipped = present > n_samples - present
    indptr, indices = _complement_rows(proportions.indptr, proportions.indices, flipped, n_samples)
    ones = np.ones(len(indices), dtype=np.float32)  # mode 0 reads no values
    return sp.csr_matrix((ones, indices, indptr), shape=proportions.shape), flipped


def _add_complement_terms(
    out: np.ndarray,
    proportions: sp.csr_matrix,
    lengths: np.ndarray,
    flipped: np.ndarray,
    start: int,
) -> None:
    """Turn the kernel's sums over shared absences of the flipped nodes into sums over
    shared presences: add ``T - A_i - A_j`` (T: their total length; A_i: the length of
    those sample i lacks), row by row over the upper triangle."""
    total = lengths[flipped].sum()
    present = proportions[flipped].sign().T @ lengths[flipped]  # per sample, float64
    lacking = np.asarray(total - present, dtype=np.float64).ravel()
    rows = out.shape[0]
    columns = lacking[start:]
    for r in range(rows):
        row = out[r, r + 1 :]
        row += (total - lacking[start + r] - columns[r + 1 :]).astype(out.dtype)
