"""A batch's reads spread up the tree on the CPU: the node x sample proportions of a group of
samples, node-major, by one compiled loop in two passes (no sparse products, no GIL held).

Each sample's reads are added to every ancestor of their ASV in a dense node vector (the
nodes it touched are listed, so clearing costs what was touched). The first pass counts the
(node, sample) entries per node, the second writes them in node order, samples ascending.
Samples are cut into chunks that a pool's threads run side by side: each chunk counts into
its own row and writes at its own offsets, so the result does not depend on the threads.
Integer read counts sum exactly in float64 in any order, so the proportions equal those of
the sparse product ``ancestors @ counts`` scaled by ``1 / total``, bit for bit.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

from aam.runtime.threads import ThreadPool, run_each

TASKS_PER_THREAD = 4  # chunks of samples per pool thread: enough to balance, few to be cheap


@numba.njit(cache=True, nogil=True)
def _spread(
    asv_ptr, asv_idx, reads, anc_ptr, anc_node, in_tree, s0, s1, count_only, at, out_s, out_v
):  # pragma: no cover - compiled
    """Samples ``s0..s1-1``. ``count_only``: count entries per node into ``at[v]``; return
    each sample's reads on tree ASVs. Else write entry (v, s) at ``out_*[at[v]]``, advancing
    ``at[v]``."""
    n_nodes = at.shape[0]
    acc = np.zeros(n_nodes, dtype=np.float64)
    mark = np.full(n_nodes, -1, dtype=np.int64)
    touched = np.empty(n_nodes, dtype=np.int64)
    totals = np.zeros(s1 - s0, dtype=np.float64)
    for s in range(s0, s1):
        k = 0
        total = 0.0
        for e in range(asv_ptr[s], asv_ptr[s + 1]):
            asv = asv_idx[e]
            if not in_tree[asv]:
                continue
            r = reads[e]
            total += r
            for a in range(anc_ptr[asv], anc_ptr[asv + 1]):
                v = anc_node[a]
                if mark[v] != s:
                    mark[v] = s
                    acc[v] = 0.0
                    touched[k] = v
                    k += 1
                acc[v] += r
        totals[s - s0] = total
        if count_only:
            for t in range(k):
                at[touched[t]] += 1
        elif total > 0:
            scale = 1.0 / total
            for t in range(k):
                v = touched[t]
                out_s[at[v]] = s
                out_v[at[v]] = acc[v] * scale
                at[v] += 1
    return totals


def proportions_below(
    asv_ptr: np.ndarray,
    asv_idx: np.ndarray,
    reads: np.ndarray,
    ancestors: sp.csc_matrix,
    in_tree: np.ndarray,
    pool: ThreadPool | None = None,
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """(used nodes x samples) proportions of the reads below each node, sorted indices; the
    used nodes (rows of ``ancestors``); each sample's reads on tree ASVs (0: none)."""
    n_nodes, n = ancestors.shape[0], len(asv_ptr) - 1
    fixed = (
        np.asarray(asv_ptr, dtype=np.int64),
        np.asarray(asv_idx, dtype=np.int64),
        np.asarray(reads, dtype=np.float64),
        ancestors.indptr,
        ancestors.indices,
        in_tree,
    )
    # each chunk clears its own node vectors and a row of counts: per-chunk costs that a
    # rank's node share pays whatever its size (64-sample chunks: 4.7 ms of a share's
    # 2,048-sample spread on 2 threads, 8 chunks: 3.3 ms; benchmarks/README.md)
    tasks = 1 if pool is None else TASKS_PER_THREAD * pool.threads
    step = max(1, -(-n // tasks))
    bounds = list(range(0, n, step)) + [n]
    chunks = list(zip(bounds[:-1], bounds[1:], strict=True))
    counts = np.zeros((len(chunks), n_nodes), dtype=np.int64)
    nothing_s, nothing_v = np.empty(0, dtype=np.int32), np.empty(0, dtype=np.float64)

    def count(c: int) -> np.ndarray:
        return _spread(*fixed, *chunks[c], True, counts[c], nothing_s, nothing_v)

    totals = np.concatenate(run_each(pool, count, range(len(chunks))))
    if not (totals > 0).all():
        return sp.csr_matrix((0, n)), np.empty(0, dtype=np.int64), totals
    per_node = counts.sum(axis=0)
    ptr = np.concatenate([[0], np.cumsum(per_node)])
    at = ptr[:-1][None, :] + np.cumsum(counts, axis=0) - counts  # each chunk's first slot
    samples = np.empty(ptr[-1], dtype=np.int32)
    values = np.empty(ptr[-1], dtype=np.float64)

    def fill(c: int) -> None:
        _spread(*fixed, *chunks[c], False, at[c], samples, values)

    run_each(pool, fill, range(len(chunks)))
    used = np.flatnonzero(per_node)
    indptr = np.concatenate([[0], ptr[used + 1]])
    proportions = sp.csr_matrix((values, samples, indptr), shape=(len(used), n), copy=False)
    proportions.has_sorted_indices = True
    return proportions, used, totals
