"""Exact UniFrac of any group of samples (a training batch) from their reads and the tree.

The node x ASV ancestor matrix is built once per table; a group's distances then cost one
spread of its reads up the tree (``aam.unifrac.batch_spread``) and the shared-node kernel over
the nodes those reads reach, in the calling thread or on a pool's threads. The entries equal
``compute_unifrac``'s full matrix (float64: within rounding, ~1e-15); nothing N x N is built.
``aam.unifrac.batch_device`` computes the same on a torch device.

Ranks share the work by nodes (``node_share``): every metric is a sum over nodes of per-sample
totals and pair sums, so each rank spreads its batch up its own share of the tree, sums the
pairs over those nodes only, and the ranks add their partial sums (``combine``); each rank
then forms only its own samples' rows of the distances (``rows``): each rank's spread, layout,
kernel and distances fall as 1/world. The sums travel as their strict upper triangles, packed
(half of a square's entries); unweighted's complement terms (nodes most samples hold) as
per-sample halves in the same exchange, added over a rank's own rows only.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from aam.data.table import Counts
from aam.errors import InputError
from aam.runtime.threads import ThreadPool
from aam.unifrac.abundance import (
    NodeAbundance,
    ancestor_matrix,
    check_samples_have_reads,
    match_tips,
)
from aam.unifrac.engines import checked_tree_arrays
from aam.unifrac.metrics import row_distances, sample_totals
from aam.unifrac.pair_sums import SUM_FOR_METRIC, PairSums, packed_size
from aam.unifrac.tree import TreeArrays

# A node's row of the pair sums against the spread of one read per sample to it: at 1.0 the 16
# node shares of a 2,048-sample batch of data/oral-full took 1.69-1.77 ms each on an H200, at
# 0.3 1.30-1.85 ms, by ancestor entries alone 1.24-2.38 ms (benchmarks/README.md, 2026-11-26).
PAIR_SUM_WEIGHT = 1.0
REACHING_BATCH = 2048  # the batch whose expected reads below a node say whether it is reached
# The cpu engine's cost of a node in a batch of REACHING_BATCH samples, in seconds: a least-
# squares fit of 16 node shares' times (one 2,048-sample batch of data/oral-full, the 2-core
# VM); cut by it, the slowest of 16 shares of another batch took 1.12-1.13x their mean against
# 1.24-1.25x by ``PAIR_SUM_WEIGHT`` (benchmarks/README.md, 2026-11-26, fourth session).
CPU_SECONDS_PER_PAIR = 4.1e-10  # a pair of samples the kernel visits at the node
CPU_SECONDS_PER_NODE = 5.3e-6  # a node the batch reaches: its visits per tile pair, its layout
CPU_SECONDS_PER_SPREAD = 1.0e-5  # a read per sample, expected below the node: the spread


class _Exchange:
    """A batch's partial sums as the vector ranks add up (one process sums into it too), one
    float64 buffer per thread kept between batches (a fresh one, 16 MB at 2,048 samples,
    costs more in page faults than zeroing it); read before the thread's next batch."""

    def __init__(self) -> None:
        self.local = threading.local()

    def zeroed(self, size: int) -> np.ndarray:
        """``size`` zeros in this thread's buffer."""
        buffer = getattr(self.local, "buffer", None)
        if buffer is None or len(buffer) < size:
            buffer = self.local.buffer = np.empty(size)
        view = buffer[:size]
        view.fill(0.0)
        return view


@dataclass(frozen=True)
class BatchUniFrac:
    """One metric's distances between any samples of one table (by table ASV index)."""

    metric: str
    alpha: float
    dtype: type
    ancestors: sp.csc_matrix  # (nodes with a length) x (table ASVs); a pruned ASV's column is 0
    lengths: np.ndarray  # (nodes with a length,) float64
    in_tree: np.ndarray  # (table ASVs,) bool: False for those --prune-missing dropped
    prevalence: np.ndarray  # (table ASVs,) fraction of the table's samples holding each
    exchange: _Exchange = field(default_factory=_Exchange, compare=False, repr=False)

    @classmethod
    def for_table(
        cls,
        counts: Counts,
        tree: TreeArrays,
        metric: str,
        *,
        alpha: float,
        dtype: type = np.float64,
        prune_missing: bool = False,
        table_name: str = "table",
        tree_name: str = "tree",
    ) -> BatchUniFrac:
        """Check ``counts`` against ``tree`` as ``aam unifrac`` does (ASVs missing from the tree,
        counts, samples left without reads, a tree length that fits ``dtype``) and index it."""
        arrays = checked_tree_arrays(counts, tree, [metric], alpha, dtype, table_name, tree_name)
        tips = match_tips(
            counts.observation_ids, arrays, prune_missing, table_name, tree_name, counts.matrix
        )
        keep = tips >= 0
        check_samples_have_reads(counts.matrix[keep], counts.sample_ids, table_name)
        with_length = arrays.length > 0
        kept = np.flatnonzero(keep)
        inner = ancestor_matrix(arrays.parent, tips[kept])[with_length].tocoo()
        shape = (inner.shape[0], len(tips))
        ancestors = sp.csc_matrix((inner.data, (inner.row, kept[inner.col])), shape=shape)
        ancestors.sort_indices()
        held = _prevalence(counts.matrix)
        return cls(metric, alpha, dtype, ancestors, arrays.length[with_length], keep, held)

    def node_presence(self) -> np.ndarray:
        """Each node's expected fraction of samples holding a read below it, were its ASVs
        held independently: ``1 - prod(1 - prevalence)`` over the ASVs below it."""
        with np.errstate(divide="ignore"):  # log(0) = -inf: an ASV every sample holds
            absent = np.log1p(-np.minimum(self.prevalence, 1.0))
        return 1.0 - np.exp(self.ancestors.tocsr() @ absent)

    def node_work(self, *, device: bool) -> np.ndarray:
        """Each node's expected share of a batch's work. ``device`` (the gpu engine): per
        sample, the reads spread to it (the table ASVs below it, weighted by how many samples
        hold them) and its row of the pair-sum product (``PAIR_SUM_WEIGHT``, where a batch of
        ``REACHING_BATCH`` samples expects a read below it). Else (the cpu engine's kernel):
        seconds (``CPU_SECONDS_*``) for the pairs it visits at the node (those both holding
        it, or both lacking it where most hold it: complemented), reaching it, and the
        spread."""
        spread = self.ancestors.tocsr() @ self.prevalence
        if device:
            return spread + PAIR_SUM_WEIGHT * np.minimum(1.0, REACHING_BATCH * spread)
        held = self.node_presence()
        visited = REACHING_BATCH * np.minimum(held, 1.0 - held)  # samples, complemented
        reached = 1.0 - (1.0 - held) ** REACHING_BATCH
        return (
            CPU_SECONDS_PER_PAIR * visited**2 / 2
            + CPU_SECONDS_PER_NODE * reached
            + CPU_SECONDS_PER_SPREAD * spread
        )

    def node_share(self, rank: int, world: int, *, device: bool) -> BatchUniFrac:
        """Rank ``rank`` of ``world``'s share of the nodes: a contiguous range of them holding
        about 1/world of the work (``node_work``, of the gpu engine for ``device``, else of the
        cpu engine). The partial sums of all shares add up to the whole
        (``distances(combine=...)``), however the nodes are cut."""
        if world == 1:
            return self
        by_node = self.ancestors.tocsr()
        work = np.concatenate([[0.0], np.cumsum(self.node_work(device=device))])
        cuts = np.searchsorted(work, np.linspace(0, work[-1], world + 1))
        cuts[0], cuts[-1] = 0, by_node.shape[0]
        mine = slice(int(cuts[rank]), int(max(cuts[rank], cuts[rank + 1])))
        ancestors = by_node[mine].tocsc()
        ancestors.sort_indices()
        return replace(self, ancestors=ancestors, lengths=self.lengths[mine])

    def distances(
        self,
        asv_ptr: np.ndarray,
        asv_idx: np.ndarray,
        reads: np.ndarray,
        *,
        pool: ThreadPool | None = None,
        combine: Callable[[np.ndarray], np.ndarray] | None = None,
        rows: slice | None = None,
    ) -> np.ndarray:
        """(B, B) distances of B samples given as CSR rows: sample ``s`` holds table ASVs
        ``asv_idx[asv_ptr[s]:asv_ptr[s + 1]]`` with ``reads`` of the same slice. ``pool``: its
        threads share the work (the same distances, bit for bit). ``combine``: the sum over
        the ranks of a float64 vector of partial sums (this object being one rank's
        ``node_share``). ``rows``: only those samples' distances to all B (a rank's own
        samples; the same values as those rows of the whole)."""
        n = len(asv_ptr) - 1
        # The pair sums as their strict upper triangles, packed (half of a square's entries:
        # what ranks exchange); shared length's complement terms (nodes most samples hold) as
        # per-sample halves, added over the rows formed only (a rank's own), not over all pairs.
        halved = SUM_FOR_METRIC[self.metric] == "shared_length"
        head = 2 * n if halved else n  # the vector ranks exchange: totals, halves, sums
        flat = out = None
        if np.dtype(self.dtype) == np.float64:
            arrays = 2 if self.metric == "generalized" else 1
            flat = self.exchange.zeroed(head + arrays * packed_size(n))
            out = tuple(flat[head:].reshape(arrays, packed_size(n)))
        halves = None
        if halved:
            halves = np.zeros(n) if flat is None else flat[n:head]
        totals, sums = self._partial_sums(asv_ptr, asv_idx, reads, pool, flat, out, halves)
        if combine is not None:
            totals, halves, sums = _combined(totals, halves, sums, combine, flat)
        return row_distances(self.metric, totals, sums, rows or slice(None), pool, halves)

    def _partial_sums(
        self, asv_ptr, asv_idx, reads, pool, flat, out, halves
    ) -> tuple[np.ndarray, PairSums]:
        """Each sample's total and the pair sums (upper triangles, packed) over this object's
        nodes; the totals written into ``flat`` (the exchanged vector) and the sums into
        ``out`` (zeroed arrays in it) when given; shared length's complement terms into
        ``halves``."""
        from aam.unifrac.batch_spread import proportions_below  # numba: only when used
        from aam.unifrac.cpu_kernel import batch_pair_sums

        n = len(asv_ptr) - 1
        proportions, used, totals = proportions_below(
            asv_ptr, asv_idx, reads, self.ancestors, self.in_tree, pool
        )
        if not (totals > 0).all():
            raise InputError(
                f"sample {int(np.argmin(totals > 0))} of a batch has no reads on ASVs of the "
                "tree (those dropped by --prune-missing held them all); drop such samples"
            )
        abundance = NodeAbundance([str(k) for k in range(n)], self.lengths[used], proportions)
        sums = batch_pair_sums(
            proportions,
            abundance.lengths,
            SUM_FOR_METRIC[self.metric],
            alpha=self.alpha,
            dtype=self.dtype,
            pool=pool,
            out=out,
            halves=halves,
        )
        totals = sample_totals(self.metric, abundance, self.alpha)
        if flat is not None:
            flat[:n] = totals
        return totals, sums


def _prevalence(matrix: sp.csr_matrix) -> np.ndarray:
    """The fraction of samples (columns) holding each observation (row) of ``matrix``, counted
    over its stored entries (no copy of the matrix)."""
    held = np.zeros(matrix.shape[0])
    rows = np.flatnonzero(np.diff(matrix.indptr))
    if len(rows):
        held[rows] = np.add.reduceat(matrix.data > 0, matrix.indptr[rows], dtype=np.int64)
    return held / max(1, matrix.shape[1])


def _combined(
    totals: np.ndarray,
    halves: np.ndarray | None,
    sums: PairSums,
    combine: Callable[[np.ndarray], np.ndarray],
    flat: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None, PairSums]:
    """``totals``, ``halves`` (if any) and ``sums`` summed over the ranks by ``combine``, as
    one float64 vector (one exchange), back in their own dtypes. ``flat``: that vector, where
    they already lie (no copy)."""
    parts = [(k, v) for k, v in vars(sums).items() if v is not None]
    head = [totals] if halves is None else [totals, halves]
    if flat is None:
        flat = np.concatenate([*head, *(v.reshape(-1) for _, v in parts)], dtype=np.float64)
    total = combine(flat)
    n = len(totals)
    start = n * len(head)
    blocks = total[start:].reshape(len(parts), packed_size(n))
    return (
        total[:n],
        None if halves is None else total[n:start],
        PairSums(**{k: blocks[i].astype(v.dtype, copy=False) for i, (k, v) in enumerate(parts)}),
    )


def ranks_in_one_process(ranks: list[Callable[[Callable[[Any], Any]], Any]]) -> list[Any]:
    """What each rank's ``distances(..., combine)`` gives when the ranks run one after another
    in this process (checks, benchmarks): each is called with its partial sums collected
    first, then with the combine that returns their sum (in rank order; an all-reduce may sum
    in another order, so equal within rounding). Partials are numpy arrays or tensors; each
    call gets its own copy (the distances may be formed in place)."""
    partials: list[Any] = []
    for rank in ranks:
        rank(lambda partial: partials.append(partial * 1) or partial)  # `* 1`: a copy
    return [rank(lambda partial: functools.reduce(operator.add, partials)) for rank in ranks]
