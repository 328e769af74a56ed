"""Exact UniFrac of a training batch on a torch device (CUDA, ROCm; also the CPU in tests).

``BatchUniFrac``'s ancestor structure is copied to the device once, as each table ASV's list
of ancestor nodes (with a length). A batch's reads (its CSR rows) go up in one transfer; every
read is then spread to its ancestors and the reads below each (node, sample) summed: into one
dense (nodes x samples) block when all of this object's nodes fit one (a rank's node share, or
small batches; no sort), else by a sort, in chunks of the nodes the batch reaches:

- unweighted: shared length ``S = P^T diag(L) P`` over presence (a GEMM), Faith PD on the way;
- weighted: ``sum_v L_v |p_vi - p_vj|`` by ``torch.cdist(p=1)`` over ``L``-scaled proportions;
- generalized: the elementwise shared-node terms of ``aam.unifrac.torch_kernel``.

Sums run in float64 whatever ``dtype`` asks (fp64 GEMMs are exact enough and fast on the
target GPUs, and a global TF32 switch cannot reach them); the distances are then cast. Built
from one rank's ``BatchUniFrac.node_share``, it sums over those nodes only and the ranks add
their partial sums (``combine``). Nothing outside the batch is dense: memory is O(nodes x
batch) per chunk, never N x N.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from aam.errors import InputError
from aam.unifrac.batch import BatchUniFrac
from aam.unifrac.pair_sums import packed_size
from aam.unifrac.torch_kernel import generalized_chunk, generalized_solo

CHUNK_ELEMENTS = 1 << 25  # dense node x sample elements per chunk (256 MB in float64)


class _Staging:
    """A batch's reads on their way to the device: one host buffer per thread (pinned for a
    GPU, kept and grown between calls) holding ASV indices, reads and sample lengths, one copy
    up. Per thread: the prefetch thread and the evaluation may compute distances at once."""

    def __init__(self) -> None:
        self.local = threading.local()

    def upload(
        self, asv_ptr: np.ndarray, asv_idx: np.ndarray, reads: np.ndarray, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(table ASV index, reads, sample) of every read entry, on ``device``. One int64
        buffer, the reads stored in it as their float64 bits (no conversion kernels on the
        device); the copy is asynchronous from pinned memory, and the buffer is rewritten only
        by the next call, after this call has waited on the device."""
        entries, n = len(asv_idx), len(asv_ptr) - 1
        size = 2 * entries + n
        buffer = getattr(self.local, "buffer", None)
        if buffer is None or buffer.numel() < size:
            pinned = device.type == "cuda"
            buffer = torch.empty(max(size, 1 << 16), dtype=torch.int64, pin_memory=pinned)
            self.local.buffer = buffer
        host = buffer.numpy()
        host[:entries] = asv_idx
        host.view(np.float64)[entries : 2 * entries] = reads
        host[2 * entries : size] = np.diff(asv_ptr)
        up = buffer[:size].to(device, non_blocking=True)
        sample = torch.repeat_interleave(up[2 * entries :], output_size=entries)  # 0,0,..,1,1,..
        return up[:entries], up[entries : 2 * entries].view(torch.float64), sample


@dataclass(frozen=True)
class DeviceBatchUniFrac:
    """``BatchUniFrac``'s distances, computed on ``device``."""

    metric: str
    alpha: float
    dtype: torch.dtype
    device: torch.device
    ancestor_end: torch.Tensor  # (table ASVs,) int64: ASV k's nodes end at entry end[k]
    ancestor_depth: torch.Tensor  # (table ASVs,) int64: ... and are depth[k] entries
    ancestor_node: torch.Tensor  # int64 node (row of ``lengths``) per entry
    lengths: torch.Tensor  # (nodes with a length,) float64
    in_tree: torch.Tensor  # (table ASVs,) bool
    all_in_tree: bool  # no ASV dropped by --prune-missing: no reads to mask
    staging: _Staging = field(default_factory=_Staging, compare=False, repr=False)

    @classmethod
    def on(cls, host: BatchUniFrac, device: torch.device | str) -> DeviceBatchUniFrac:
        """``host``'s ancestor structure, resident on ``device``."""
        device = torch.device(device)
        csc = host.ancestors.tocsc()
        csc.sort_indices()
        as_tensor = lambda a, dt: torch.as_tensor(np.ascontiguousarray(a), dtype=dt).to(device)  # noqa: E731
        return cls(
            metric=host.metric,
            alpha=host.alpha,
            dtype=torch.float64 if np.dtype(host.dtype) == np.float64 else torch.float32,
            device=device,
            ancestor_end=as_tensor(csc.indptr[1:], torch.int64),
            ancestor_depth=as_tensor(np.diff(csc.indptr), torch.int64),
            ancestor_node=as_tensor(csc.indices, torch.int64),
            lengths=as_tensor(host.lengths, torch.float64),
            in_tree=as_tensor(host.in_tree, torch.bool),
            all_in_tree=bool(host.in_tree.all()),
        )

    @torch.no_grad()
    def distances(
        self,
        asv_ptr: np.ndarray,
        asv_idx: np.ndarray,
        reads: np.ndarray,
        combine: Callable[[torch.Tensor], torch.Tensor] | None = None,
        rows: slice | None = None,
    ) -> torch.Tensor:
        """(B, B) distances (in ``dtype``) on the device of B samples given as CSR rows (as
        ``BatchUniFrac.distances`` takes them). ``combine``: the sum over the ranks of a
        float64 tensor of partial sums (this object holding one rank's node share).
        ``rows``: only those samples' distances to all B (a rank's own samples).

        Few host waits and few kernels (a rank's share on a GPU is bound by launching them):
        the reads go up in one copy, the spread's size is the one wait before the pair sums,
        gathers are ``index_select``/``take`` (not Python indexing), and the check for
        samples without reads is read at the end."""
        dev = self.device
        n = len(asv_ptr) - 1
        idx, count, sample = self.staging.upload(asv_ptr, asv_idx, reads, dev)
        if not self.all_in_tree:  # reads of ASVs --prune-missing dropped count nowhere
            count = count * self.in_tree.index_select(0, idx)
        totals = torch.zeros(n, dtype=torch.float64, device=dev).index_add_(0, sample, count)
        sums = _ChunkSums(self.metric, self.alpha, n, dev)
        entry, node = self._spread(idx)
        sample, count = sample.index_select(0, entry), count.index_select(0, entry)
        if len(self.lengths) * n <= CHUNK_ELEMENTS:
            # One dense block of every node of this object: reads summed in place (integer
            # read counts sum exactly in float64, in any order), no sort.
            dense = torch.zeros(len(self.lengths) * n, dtype=torch.float64, device=dev)
            dense.index_add_(0, torch.add(sample, node, alpha=n), count)
            sums.add(dense.view(-1, n), totals, self.lengths)
        else:
            self._add_chunks(sums, node, sample, count, totals, n)
        r0, r1, _ = (rows or slice(None)).indices(n)
        out = sums.distances(r0, r1, combine).to(self.dtype)
        out.diagonal(r0).zero_()  # (k, r0 + k): each row's own sample
        if not bool((totals > 0).all()):
            empty = int(torch.argmin((totals > 0).to(torch.int8)))
            raise InputError(
                f"sample {empty} of a batch has no reads on ASVs of the tree (those dropped by "
                "--prune-missing held them all); drop such samples"
            )
        return out

    def _spread(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(read entry, node) of every ancestor node of every read entry's ASV."""
        depth = self.ancestor_depth.index_select(0, idx)
        slots = torch.cumsum(depth, 0)  # one past each entry's last slot
        total = int(slots[-1]) if len(slots) else 0
        entry = torch.repeat_interleave(depth, output_size=total)  # 0,0,..,1,1,..
        # slot t of entry e holds e's ASV's ancestor entry t + (end - slots) of that ASV
        shift = self.ancestor_end.index_select(0, idx) - slots
        at = torch.arange(total, device=idx.device) + shift.index_select(0, entry)
        return entry, self.ancestor_node.index_select(0, at)

    def _add_chunks(
        self,
        sums: _ChunkSums,
        node: torch.Tensor,
        sample: torch.Tensor,
        count: torch.Tensor,
        totals: torch.Tensor,
        n: int,
    ) -> None:
        """Add the nodes the batch reaches to ``sums`` in chunks of dense (nodes x samples)
        proportions of at most ``CHUNK_ELEMENTS``: reads summed per (node, sample) by a sort
        (integer read counts sum exactly in float64, in any order)."""
        dev = node.device
        key, where = torch.unique(torch.add(sample, node, alpha=n), return_inverse=True)
        below = torch.zeros(len(key), dtype=torch.float64, device=dev)
        below.index_add_(0, where, count)
        node, sample = key // n, key % n
        chunk = max(1, CHUNK_ELEMENTS // n)
        used, position = torch.unique_consecutive(node, return_inverse=True)
        bounds = torch.searchsorted(position, torch.arange(0, len(used) + chunk, chunk, device=dev))
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            if lo == hi:
                continue
            local = position[lo:hi] - position[lo]
            dense = torch.zeros((int(local[-1]) + 1, n), dtype=torch.float64, device=dev)
            dense[local, sample[lo:hi]] = below[lo:hi]
            sums.add(dense, totals, self.lengths[used[position[lo] : position[hi - 1] + 1]])


class _ChunkSums:
    """The pair sums of one metric over node chunks, and the distances they give (the formulas
    of ``aam.unifrac.distance_kernel.pair_distance``). The first chunk's sums are kept as
    they come (no zeros to add them to)."""

    def __init__(self, metric: str, alpha: float, n: int, device: torch.device) -> None:
        self.metric, self.alpha, self.n, self.device = metric, alpha, n, device
        self.totals: torch.Tensor | None = None
        self.num: torch.Tensor | None = None
        self.den: torch.Tensor | None = None
        if metric == "generalized":  # its kernel adds into its sums
            self._add(self._zeros(n), self._zeros(n, n), self._zeros(n, n))

    def _zeros(self, *shape: int) -> torch.Tensor:
        return torch.zeros(shape, dtype=torch.float64, device=self.device)

    def _add(
        self, totals: torch.Tensor, num: torch.Tensor, den: torch.Tensor | None = None
    ) -> None:
        """Add a chunk's sums (the first chunk's are kept as they come)."""
        if self.totals is None:
            self.totals, self.num, self.den = totals, num, den
        else:
            self.totals += totals
            self.num += num

    def add(self, below: torch.Tensor, totals: torch.Tensor, length: torch.Tensor) -> None:
        """Add a chunk: ``below`` (chunk nodes x n) each sample's reads below each node,
        ``totals`` (n,) each sample's reads, ``length`` (chunk nodes,)."""
        length = length[:, None]
        if self.metric == "unweighted":
            present = below.sign()  # reads are >= 0: presence as 0.0 / 1.0 in one kernel
            weighted = length * present
            self._add(weighted.sum(dim=0), present.T @ weighted)  # shared length
            return
        p = below / totals  # proportions
        if self.metric in ("weighted_normalized", "weighted_unnormalized"):
            weighted = (length * p).T.contiguous()
            self._add(weighted.sum(dim=1), torch.cdist(weighted, weighted, p=1))
        else:
            solo = generalized_solo(p, self.alpha)
            self.totals += (length * solo).sum(dim=0)
            generalized_chunk(p, length, self.alpha, self.num, self.den, solo)

    def distances(
        self, r0: int, r1: int, combine: Callable[[torch.Tensor], torch.Tensor] | None
    ) -> torch.Tensor:
        """Distances of samples ``r0..r1-1`` to every sample (float64). ``combine``: first
        sum the sums over the ranks, one exchange of one tensor holding the totals and each
        (n, n) sum's strict upper triangle (the layout of ``PairSums``' packed sums, half
        the entries); the rows' sums are then gathered from it."""
        n = self.n
        if self.totals is None:  # no node of this object reached by the batch
            self._add(self._zeros(n), self._zeros(n, n))
        squares = [self.num] + ([] if self.den is None else [self.den])
        if combine is None:
            totals, sums = self.totals, [square[r0:r1] for square in squares]
        else:
            upper = _strict_upper(n, self.device)
            total = combine(torch.cat([self.totals, *(square.take(upper) for square in squares)]))
            totals = total[:n]
            sums = [
                total.take(_exchanged_rows(n, r0, r1, n + k * packed_size(n), self.device))
                for k in range(len(squares))
            ]
        pair_total = totals[r0:r1, None] + totals[None, :]
        num = sums[0]
        if self.metric == "unweighted":
            unique = torch.add(pair_total, num, alpha=-2).clamp_(min=0.0)
            return _ratio(unique, pair_total - num)
        if self.metric == "weighted_unnormalized":
            return num
        if self.metric == "weighted_normalized":
            return _ratio(num, pair_total)
        numerator, denominator = pair_total + num, (pair_total + sums[1]).clamp_(min=0.0)
        return _ratio(torch.minimum(numerator.clamp_(min=0.0), denominator), denominator)


@functools.lru_cache(maxsize=4)
def _strict_upper(n: int, device: torch.device) -> torch.Tensor:
    """Flat positions in an (n, n) square of its strict upper triangle, row by row."""
    i, j = torch.triu_indices(n, n, 1, device=device)
    return i * n + j


@functools.lru_cache(maxsize=8)
def _exchanged_rows(n: int, r0: int, r1: int, offset: int, device: torch.device) -> torch.Tensor:
    """(r1 - r0, n) positions of pairs (i, j) in a strict upper triangle packed row by row
    from ``offset``; a pair (i, i) gets 0 (any entry: its distance is set to 0)."""
    i = torch.arange(r0, r1, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    lo, hi = torch.minimum(i, j), torch.maximum(i, j)
    packed = offset + lo * (2 * n - lo - 1) // 2 + hi - lo - 1
    return torch.where(lo == hi, 0, packed)


def _ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """numerator / denominator, with 0 where the denominator is 0."""
    return torch.where(denominator != 0, numerator / denominator, 0.0)
