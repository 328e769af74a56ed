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

Only the upper triangle (``j > i``) is computed; a training batch's (``batch_pair_sums``) is
written packed row by row, half of a square. A row block of it (``block_pair_sums``, one
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

from aam.runtime.threads import ThreadPool, run_each, usable_threads
from aam.unifrac.pair_sums import PairSums, packed_size

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
    row_offset,
):  # pragma: no cover - compiled
    """Accumulate the pair sums of tile pair (ti, tj) over shared nodes into the upper triangle
    of out_a (and out_b): flat arrays, pair (i, j) at ``row_offset[i] + j`` (rows of a
    square, or of the strict upper triangle packed: ``row_start``).

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
                i = samples[a]
                first = max(0, i + 1 - j0)  # columns j > i only
                row = out_a[row_offset[i] + j0 + first : row_offset[i] + j0 + width]
                if mode == 0:
                    for k in range(width - first):
                        row[k] += length * dense[first + k]
                else:
                    pi = values[a]
                    for k in range(width - first):
                        row[k] += length * min(pi, dense[first + k])
            for b in range(b0, b1):
                dense[samples[b] - j0] = 0.0
            continue
        for a in range(a0, a1):
            i = samples[a]
            pi = values[a]
            start = a + 1 if ti == tj else b0
            row = row_offset[i]
            if mode == 0:
                for b in range(start, b1):
                    out_a[row + samples[b]] += length
            elif mode == 1:
                for b in range(start, b1):
                    out_a[row + samples[b]] += length * min(pi, values[b])
            else:
                for b in range(start, b1):
                    pj = values[b]
                    total = pi + pj
                    scaled = np.sqrt(total) if alpha == 0.5 else total**alpha
                    solo = powered[a] + powered[b]
                    out_a[row + samples[b]] += length * (scaled * abs(pi - pj) / total - solo)
                    out_b[row + samples[b]] += length * (scaled - solo)


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
    with _progress(progress, pairs) as bar:
        return _sums(proportions, lengths, todo, start, plan, alpha, dtype, kernel, bar)


def batch_pair_sums(
    proportions: sp.csr_matrix,
    lengths: np.ndarray,
    kind: str,
    *,
    alpha: float,
    dtype: type,
    pool: ThreadPool | None = None,
    out: tuple[np.ndarray, ...] | None = None,
    halves: np.ndarray | None = None,
) -> PairSums:
    """One kind of pair sum of a small group of samples (a training batch), each as its
    strict upper triangle packed row by row (numpy's ``triu_indices(n, 1)`` order: half of
    a square's entries, what ranks exchange; ``metrics.row_distances`` reads rows of it). ``pool``:
    its threads run the serial kernel on parts of the tile pairs (each writes its own
    blocks) and the steps around it: the same sums, bit for bit, whatever the threads.
    ``out``: zeroed flat arrays of ``dtype`` of that size to sum into (two for generalized)
    instead of new ones. ``halves``: a zeroed (n,) float64 array, needed for shared length:
    its complement terms are not added over all pairs but written there
    (``complement_halves``): pair (i, j) lacks ``halves[i] + halves[j]``, added where the
    distances are formed (a rank: its own rows)."""
    if kind == "shared_length" and halves is None:
        raise ValueError("a batch's shared length needs ``halves`` for its complement terms")
    n = proportions.shape[1]
    workers = pool.threads if pool is not None else 1
    plan = tile_plan(n, n, tile=batch_tile(n, workers))
    todo = [(k, mode) for k, mode in _MODES if k == kind]
    kernel = _tile_pairs_serial if pool is None else _pooled(pool, 4 * workers)
    with _progress(False, 0) as bar:
        return _sums(
            *(proportions, lengths, todo, 0, plan, alpha, dtype, kernel, bar),
            *(pool, out, halves, True),
        )


def batch_tile(n: int, parts: int) -> int:
    """A tile size that cuts n samples into at least ~8 tile pairs per part (thread),
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


def _sums(
    proportions,
    lengths,
    todo,
    start,
    plan,
    alpha,
    dtype,
    kernel,
    bar,
    pool=None,
    out=None,
    halves=None,
    packed=False,
) -> PairSums:
    """The pair sums of each (kind, mode) in ``todo`` over ``plan``'s tile pairs, one pass each
    (an enabled ``bar`` counts each pass's pairs afresh, named by its sum); ``pool``: threads
    for the steps around the kernel (layout, complement terms); ``packed`` and ``out``:
    the layout and zeroed arrays for the one pass of ``todo`` (see ``_run``); ``halves``:
    where the complement terms go instead (see ``batch_pair_sums``)."""
    sums = PairSums()
    for number, (kind, mode) in enumerate(todo, start=1):
        if not bar.disable:
            bar.reset(total=bar.total)
            bar.set_description(f"UniFrac pairs, {kind} ({number}/{len(todo)})")
        if mode == 0:
            entries, flipped = _complemented(proportions)
        else:
            entries, flipped = proportions, None
        out_a, out_b = _run(
            entries, lengths, mode, start, plan, alpha, dtype, kernel, bar, pool, out, packed
        )
        if flipped is not None and halves is not None:
            halves += complement_halves(proportions, lengths, flipped)
        elif flipped is not None:
            _add_complement_terms(out_a, proportions, lengths, flipped, start, pool)
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


def tile_plan(rows: int, n_columns: int, *, tile: int | None = None) -> TilePlan:
    """Tiles of ``tile`` samples, restarted at ``rows`` (the first tiles hold the rows), and
    the upper-triangle tile pairs with a row tile, shuffled so costly and cheap ones interleave
    (balanced parallel chunks)."""
    tile = tile or TILE
    n_row_tiles = -(-rows // tile)
    tile_start = np.concatenate(
        [np.arange(0, rows, tile), np.arange(rows, n_columns, tile), [n_columns]]
    ).astype(np.int64)
    pair_i, pair_j = np.triu_indices(len(tile_start) - 1)
    keep = pair_i < n_row_tiles
    shuffle = np.random.default_rng(0).permutation(int(keep.sum()))
    pair_i = pair_i[keep][shuffle].astype(np.int64)
    pair_j = pair_j[keep][shuffle].astype(np.int64)
    return TilePlan(rows, tile_start, pair_i, pair_j)


PROGRESS_STEPS = 100  # kernel calls per pass when a progress bar is shown


def _progress(enabled: bool, total: int):
    """A bar over the ``total`` sample pairs, counted once per pass (one pass per kind of
    sum)."""
    from tqdm import tqdm  # 0.1 s of imports, only for a progress bar

    return tqdm(
        total=total, unit="pair", unit_scale=True, disable=not enabled, desc="UniFrac pairs"
    )


@numba.njit(cache=True, nogil=True)
def _layout_count(indptr, indices, start, tile_of, v0, v1, ptr):  # pragma: no cover - compiled
    """Count the entries of nodes ``v0..v1-1`` in columns ``start..`` per tile: node v's
    entries in tile t into ``ptr[t, v + 1]``."""
    for v in range(v0, v1):
        for e in range(indptr[v], indptr[v + 1]):
            if indices[e] >= start:
                ptr[tile_of[indices[e] - start], v + 1] += 1


@numba.njit(cache=True, nogil=True)
def _layout_fill(
    indptr, indices, data, start, tile_of, v0, v1, fill, samples, values
):  # pragma: no cover - compiled
    """Write the entries of nodes ``v0..v1-1`` at their (tile, node) slots ``fill[t, v]``."""
    for v in range(v0, v1):
        for e in range(indptr[v], indptr[v + 1]):
            column = indices[e] - start
            if column >= 0:
                t = tile_of[column]
                samples[fill[t, v]] = column
                values[fill[t, v]] = data[e]
                fill[t, v] += 1


def _tile_layout(
    entries: sp.csr_matrix,
    start: int,
    tile_of: np.ndarray,
    n_tiles: int,
    values_dtype: np.dtype,
    pool: ThreadPool | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entries of columns ``start..`` of a CSR node x sample matrix, counting-sorted from
    (node, sample) order into (tile, node, sample) order: ``ptr[t, v]..ptr[t, v + 1]`` are
    node v's entries in tile t; samples are local column numbers. ``pool``: its threads count
    and write ranges of nodes (each its own slots: the same layout whatever the threads)."""
    indptr, indices, data = entries.indptr, entries.indices, entries.data
    n_nodes = len(indptr) - 1
    parts = 1 if pool is None else 4 * pool.threads
    cuts = np.searchsorted(indptr, np.linspace(0, indptr[-1], parts + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], cuts, [n_nodes]]))
    ranges = list(zip(bounds[:-1], bounds[1:], strict=True))
    ptr = np.zeros((n_tiles, n_nodes + 1), dtype=np.int64)
    run_each(pool, lambda r: _layout_count(indptr, indices, start, tile_of, *r, ptr), ranges)
    flat = ptr.reshape(-1)
    np.cumsum(flat, out=flat)  # slot (t, v) holds the count of (t, v - 1): now the offsets
    samples = np.empty(flat[-1] if len(flat) else 0, dtype=np.int32)
    values = np.empty(len(samples), dtype=values_dtype)
    fill = ptr[:, :n_nodes].copy()
    run_each(
        pool,
        lambda r: _layout_fill(indptr, indices, data, start, tile_of, *r, fill, samples, values),
        ranges,
    )
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


def _run(
    entries, lengths, mode, start, plan, alpha, dtype, kernel, bar, pool, out=None, packed=False
):
    """The kernel over one node x sample entry matrix, for ``plan``'s tile pairs. With an
    enabled progress ``bar`` the tile pairs run in ``PROGRESS_STEPS`` calls, the bar advanced
    by the sample pairs of each (each tile pair writes its own block: the same sums, bit for
    bit). ``pool``: its threads lay the entries out. ``packed``: the sums as the strict upper
    triangle packed row by row (``row_start``; rows and columns the same samples), else
    (rows, columns) arrays. ``out``: zeroed flat arrays of ``dtype`` of that size to sum into
    (out_a, and out_b for mode 2) instead of new ones."""
    n_columns = entries.shape[1] - start
    tile_start, pair_i, pair_j = plan.tile_start, plan.pair_i, plan.pair_j
    rows = plan.rows
    n_tiles = len(tile_start) - 1
    tile_of = np.repeat(np.arange(n_tiles, dtype=np.int32), np.diff(tile_start))
    ptr, samples, values = _tile_layout(entries, start, tile_of, n_tiles, np.dtype(dtype), pool)
    powered = values**alpha if mode == 2 else np.zeros(1, dtype=dtype)
    size = packed_size(n_columns) if packed else rows * n_columns
    if out is None:
        out_a = np.zeros(size, dtype=dtype)
        out_b = np.zeros(size if mode == 2 else 1, dtype=dtype)
    else:
        out_a, out_b = out[0], out[1] if mode == 2 else np.zeros(1, dtype=dtype)
    offsets = _packed_offsets(n_columns) if packed else np.arange(rows) * n_columns
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
        offsets.astype(np.int64),
    )
    if not packed:
        out_a = out_a.reshape(rows, n_columns)
        out_b = out_b.reshape((rows, n_columns) if mode == 2 else (1, 1))
    if bar.disable:
        kernel(pair_i, pair_j, arguments)
        return out_a, out_b
    width = np.diff(tile_start)
    # sample pairs j > i of each tile pair (a row tile with itself: its upper triangle)
    pairs = np.where(
        pair_i == pair_j, width[pair_i] * (width[pair_i] - 1) // 2, width[pair_i] * width[pair_j]
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


def column_sums(matrix: sp.csr_matrix, lengths: np.ndarray, presence: bool) -> np.ndarray:
    """sum_v lengths[v] * matrix[v, i] (``presence``: its sign) for every column i of a CSR
    node x sample matrix: the terms of scipy's ``matrix.T @ lengths``, in its node order, so
    the same sums bit for bit, without its copies of the matrix."""
    n = matrix.shape[1]
    return _column_sums(matrix.indptr, matrix.indices, matrix.data, lengths, n, presence)


@numba.njit(cache=True, nogil=True)
def _column_sums(indptr, indices, data, lengths, n, presence):  # pragma: no cover - compiled
    out = np.zeros(n, dtype=np.float64)
    for v in range(indptr.shape[0] - 1):
        for e in range(indptr[v], indptr[v + 1]):
            value = np.float64(data[e])
            if presence:
                value = np.sign(value)
            out[indices[e]] += value * lengths[v]
    return out


def _lacking(
    proportions: sp.csr_matrix, lengths: np.ndarray, flipped: np.ndarray
) -> tuple[float, np.ndarray]:
    """The total length T of the flipped nodes and, per sample, the length A_i of those it
    lacks."""
    total = lengths[flipped].sum()
    present = column_sums(proportions, np.where(flipped, lengths, 0.0), presence=True)
    return total, total - present


def complement_halves(
    proportions: sp.csr_matrix, lengths: np.ndarray, flipped: np.ndarray
) -> np.ndarray:
    """The kernel's complement terms ``T - A_i - A_j`` (``_add_complement_terms``) as
    ``h_i + h_j`` with ``h = T / 2 - A``: linear, so node shares' halves add up."""
    total, lacking = _lacking(proportions, lengths, flipped)
    return total / 2 - lacking


def _add_complement_terms(
    out: np.ndarray,
    proportions: sp.csr_matrix,
    lengths: np.ndarray,
    flipped: np.ndarray,
    start: int,
    pool: ThreadPool | None = None,
) -> None:
    """Turn the kernel's sums over shared absences of the flipped nodes into sums over
    shared presences: add ``T - A_i - A_j`` (T: their total length; A_i: the length of
    those sample i lacks) over the upper triangle, ranges of rows on ``pool``'s threads."""
    total, lacking = _lacking(proportions, lengths, flipped)
    bounds = triangle_rows(out.shape[0], out.shape[1], 1 if pool is None else 4 * pool.threads)
    ranges = zip(bounds[:-1], bounds[1:], strict=True)
    run_each(pool, lambda r: _add_terms(out, lacking, total, start, *r), ranges)


@numba.njit(cache=True, nogil=True)
def _add_terms(out, lacking, total, start, r0, r1):  # pragma: no cover - compiled
    """Rows ``r0..r1-1`` of ``_add_complement_terms``: each term computed in float64 and cast
    to ``out``'s dtype before it is added (as numpy's ``astype`` then ``+=``)."""
    term = np.empty(1, dtype=out.dtype)
    for r in range(r0, r1):
        base = total - lacking[start + r]
        for j in range(r + 1, out.shape[1]):
            term[0] = base - lacking[start + j]
            out[r, j] += term[0]


def triangle_rows(rows: int, columns: int, parts: int) -> np.ndarray:
    """Bounds of at most ``parts`` ranges of rows with about equal shares of the upper
    triangle (row r holds ``columns - r - 1`` of its entries)."""
    cost = np.cumsum(np.maximum(columns - np.arange(rows) - 1, 1))
    cuts = np.searchsorted(cost, np.linspace(0, cost[-1] if rows else 0, parts + 1)[1:-1])
    return np.unique(np.concatenate([[0], cuts, [rows]]))


@numba.njit(cache=True, nogil=True)
def row_start(n, i):  # pragma: no cover - compiled
    """Where row ``i`` of n samples' strict upper triangle, packed row by row (numpy's
    ``triu_indices(n, 1)`` order), would hold column 0: pair (i, j), j > i, is at
    ``row_start(n, i) + j``."""
    return i * (2 * n - i - 3) // 2 - 1


@numba.njit(cache=True, nogil=True)
def _packed_offsets(n):  # pragma: no cover - compiled
    """``row_start`` of every row of n samples."""
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = row_start(n, i)
    return out
