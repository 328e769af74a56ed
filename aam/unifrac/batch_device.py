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

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from aam.errors import InputError
from aam.unifrac.batch import BatchUniFrac
from aam.unifrac.metrics import packed_size
from aam.unifrac.torch_kernel import generalized_chunk

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
        """(table ASV index, reads, sample) of every read entry, on ``device``. Indices travel
        as float64 (exact below 2**53); the copy is asynchronous from pinned memory, and the
        buffer is rewritten only by the next call, after this call has waited on the device."""
        entries, n = len(asv_idx), len(asv_ptr) - 1
        size = 2 * entries + n
        buffer = getattr(self.local, "buffer", None)
        if buffer is None or buffer.numel() < size:
            pinned = device.type == "cuda"
            buffer = torch.empty(max(size, 1 << 16), dtype=torch.float64, pin_memory=pinned)
            self.local.buffer = buffer
        host = buffer.numpy()
        host[:entries] = asv_idx
        host[entries : 2 * entries] = reads
        host[2 * entries : size] = np.diff(asv_ptr)
        up = buffer[:size].to(device, non_blocking=True)
        idx, lengths = up[:entries].long(), up[2 * entries :].long()
        sample = torch.repeat_interleave(
            torch.arange(n, device=device), lengths, output_size=entries
        )
        return idx, up[entries : 2 * entries], sample


@dataclass(frozen=True)
class DeviceBatchUniFrac:
    """``BatchUniFrac``'s distances, computed on ``device``."""

    metric: str
    alpha: float
    dtype: torch.dtype
    device: torch.device
    ancestor_ptr: torch.Tensor  # (table ASVs + 1,) int64: ASV k's nodes are [ptr[k], ptr[k+1])
    ancestor_node: torch.Tensor  # int64 node (row of ``lengths``) per entry
    lengths: torch.Tensor  # (nodes with a length,) float64
    in_tree: torch.Tensor  # (table ASVs,) bool
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
            ancestor_ptr=as_tensor(csc.indptr, torch.int64),
            ancestor_node=as_tensor(csc.indices, torch.int64),
            lengths=as_tensor(host.lengths, torch.float64),
            in_tree=as_tensor(host.in_tree, torch.bool),
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

        Few host waits: the reads go up in one copy, the spread's size is the one wait before
        the pair sums, and the check for samples without reads is read at the end."""
        dev = self.device
        n = len(asv_ptr) - 1
        idx, count, sample = self.staging.upload(asv_ptr, asv_idx, reads, dev)
        count = count * self.in_tree[idx]  # reads of ASVs --prune-missing dropped count nowhere
        totals = torch.zeros(n, dtype=torch.float64, device=dev).index_add_(0, sample, count)
        sums = _ChunkSums(self.metric, self.alpha, n, dev)
        entry, node = self._spread(idx)
        if len(self.lengths) * n <= CHUNK_ELEMENTS:
            # One dense block of every node of this object: reads summed in place (integer
            # read counts sum exactly in float64, in any order), no sort.
            dense = torch.zeros(len(self.lengths) * n, dtype=torch.float64, device=dev)
            dense.index_add_(0, node * n + sample[entry], count[entry])
            sums.add(dense.view(-1, n) / totals, self.lengths)
        else:
            self._add_chunks(sums, node, sample[entry], count[entry], totals, n)
        if combine is not None:
            sums.combine(combine)
        r0, r1, _ = (rows or slice(None)).indices(n)
        out = sums.distances(r0, r1).to(self.dtype)
        diagonal = torch.arange(r0, r1, device=dev)
        out[diagonal - r0, diagonal] = 0.0
        if not bool((totals > 0).all()):
            empty = int(torch.argmin((totals > 0).to(torch.int8)))
            raise InputError(
                f"sample {empty} of a batch has no reads on ASVs of the tree (those dropped by "
                "--prune-missing held them all); drop such samples"
            )
        return out

    def _spread(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(read entry, node) of every ancestor node of every read entry's ASV."""
        start = self.ancestor_ptr[idx]
        depth = self.ancestor_ptr[idx + 1] - start
        total = int(depth.sum())
        dev = idx.device
        entries = torch.arange(len(idx), device=dev)
        entry = torch.repeat_interleave(entries, depth, output_size=total)
        offset = torch.arange(total, device=dev) - (torch.cumsum(depth, 0) - depth)[entry]
        return entry, self.ancestor_node[start[entry] + offset]

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
        key, where = torch.unique(node * n + sample, return_inverse=True)
        below = torch.zeros(len(key), dtype=torch.float64, device=dev)
        below.index_add_(0, where, count)
        node, sample = key // n, key % n
        proportion = below / totals[sample]
        chunk = max(1, CHUNK_ELEMENTS // n)
        used, position = torch.unique_consecutive(node, return_inverse=True)
        bounds = torch.searchsorted(position, torch.arange(0, len(used) + chunk, chunk, device=dev))
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            if lo == hi:
                continue
            local = position[lo:hi] - position[lo]
            dense = torch.zeros((int(local[-1]) + 1, n), dtype=torch.float64, device=dev)
            dense[local, sample[lo:hi]] = proportion[lo:hi]
            sums.add(dense, self.lengths[used[position[lo] : position[hi - 1] + 1]])


class _ChunkSums:
    """The pair sums of one metric over node chunks, and the distances they give (the formulas
    of ``aam.unifrac.distance_kernel.pair_distance``)."""

    def __init__(self, metric: str, alpha: float, n: int, device) -> None:
        self.metric, self.alpha = metric, alpha
        zeros = lambda *shape: torch.zeros(shape, dtype=torch.float64, device=device)  # noqa: E731
        self.totals = zeros(n)
        self.num = zeros(n, n)
        self.den = zeros(n, n) if metric == "generalized" else None

    def add(self, p: torch.Tensor, length: torch.Tensor) -> None:
        """Add a chunk: ``p`` (chunk nodes x n) proportions, ``length`` (chunk nodes,)."""
        length = length[:, None]
        if self.metric == "unweighted":
            present = (p > 0).to(torch.float64)
            weighted = length * present
            self.totals += weighted.sum(dim=0)
            self.num += present.T @ weighted  # shared length
        elif self.metric in ("weighted_normalized", "weighted_unnormalized"):
            weighted = (length * p).T.contiguous()
            self.totals += weighted.sum(dim=1)
            self.num += torch.cdist(weighted, weighted, p=1)  # sum_v L_v |p_i - p_j|
        else:
            solo = torch.where(p > 0, p.pow(self.alpha), 0.0)  # alpha 0: presence
            self.totals += (length * solo).sum(dim=0)
            generalized_chunk(p, length, self.alpha, self.num, self.den)

    def combine(self, combine: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Replace the sums by their sum over the ranks: one exchange of one tensor, each
        (n, n) sum as its strict upper triangle (the layout of ``PairSums``' packed sums,
        half the entries), mirrored back."""
        n = len(self.totals)
        upper = tuple(torch.triu_indices(n, n, 1, device=self.totals.device))
        squares = [self.num] + ([] if self.den is None else [self.den])
        total = combine(torch.cat([self.totals, *(square[upper] for square in squares)]))
        self.totals = total[:n]
        for k, packed in enumerate(total[n:].split(packed_size(n))):
            square = torch.zeros_like(squares[k])
            square[upper] = packed
            squares[k] = square + square.T  # a zero diagonal: its distances are set to 0
        self.num, self.den = squares[0], squares[1] if self.den is not None else None

    def distances(self, r0: int, r1: int) -> torch.Tensor:
        """Distances of samples ``r0..r1-1`` to every sample (float64)."""
        pair_total = self.totals[r0:r1, None] + self.totals[None, :]
        num = self.num[r0:r1]
        if self.metric == "unweighted":
            unique = torch.clamp(pair_total - 2 * num, min=0.0)
            return _ratio(unique, pair_total - num)
        if self.metric == "weighted_unnormalized":
            return num
        if self.metric == "weighted_normalized":
            return _ratio(num, pair_total)
        numerator, denominator = pair_total + num, pair_total + self.den[r0:r1]
        denominator = torch.clamp(denominator, min=0.0)
        return _ratio(torch.minimum(torch.clamp(numerator, min=0.0), denominator), denominator)


def _ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """numerator / denominator, with 0 where the denominator is 0."""
    safe = torch.where(denominator != 0, denominator, torch.ones_like(denominator))
    return torch.where(denominator != 0, numerator / safe, torch.zeros_like(numerator))
