"""Dense shared-node kernel in torch, for GPUs (CUDA or ROCm; also runs on the CPU).

Nodes are processed in chunks, so memory stays bounded by the chunk size, never N x N x nodes:
shared length is one GEMM over presence, the weighted sum comes from ``torch.cdist(p=1)`` via
``L min(a, b) = (L a + L b - |L a - L b|) / 2``, and generalized UniFrac is an elementwise
reduction over (node chunk, sample block, sample) slabs.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from tqdm import tqdm

from aam.unifrac.pair_sums import PairSums

SLAB_ELEMENTS = 1 << 24  # elements in one generalized-UniFrac intermediate


def pair_sums_torch(
    proportions: sp.csr_matrix,
    lengths: np.ndarray,
    kinds: set[str],
    *,
    alpha: float = 1.0,
    dtype: type = np.float64,
    device: str = "cuda",
    node_chunk: int = 1024,
    progress: bool = False,
) -> PairSums:
    """Compute the requested pair sums densely on ``device``; returns numpy arrays."""
    tdtype = torch.float64 if np.dtype(dtype) == np.float64 else torch.float32
    n_nodes, n = proportions.shape
    zeros = lambda: torch.zeros((n, n), dtype=tdtype, device=device)  # noqa: E731
    shared_length = zeros() if "shared_length" in kinds else None
    shared_min = zeros() if "shared_min" in kinds else None
    gen_num, gen_den = (zeros(), zeros()) if "generalized" in kinds else (None, None)
    for lo in tqdm(range(0, n_nodes, node_chunk), disable=not progress, desc="UniFrac"):
        hi = min(lo + node_chunk, n_nodes)
        p = torch.as_tensor(proportions[lo:hi].toarray(), dtype=tdtype, device=device)
        length = torch.as_tensor(lengths[lo:hi], dtype=tdtype, device=device)[:, None]
        if shared_length is not None:
            present = (p > 0).to(tdtype)
            shared_length += present.T @ (length * present)
        if shared_min is not None:
            weighted = (length * p).T.contiguous()  # (n, chunk)
            totals = weighted.sum(dim=1)
            l1 = torch.cdist(weighted, weighted, p=1)
            shared_min += (totals[:, None] + totals[None, :] - l1) / 2
        if gen_num is not None:
            generalized_chunk(p, length, alpha, gen_num, gen_den)
    to_numpy = lambda t: None if t is None else t.cpu().numpy()  # noqa: E731
    return PairSums(
        shared_length=to_numpy(shared_length),
        shared_min=to_numpy(shared_min),
        gen_num=to_numpy(gen_num),
        gen_den=to_numpy(gen_den),
    )


def generalized_solo(p: torch.Tensor, alpha: float) -> torch.Tensor:
    """Each (node, sample) term ``p ** alpha`` where ``p > 0``, else 0 (alpha 0: presence)."""
    return torch.where(p > 0, p.pow(alpha), 0.0)


def generalized_chunk(
    p: torch.Tensor,
    length: torch.Tensor,
    alpha: float,
    num: torch.Tensor,
    den: torch.Tensor,
    solo: torch.Tensor | None = None,
) -> None:
    """Add one node chunk's generalized-UniFrac shared-node terms of every pair of samples to
    ``num`` and ``den`` (``solo``: ``generalized_solo(p, alpha)``, if the caller has it)."""
    chunk, n = p.shape
    step = max(1, SLAB_ELEMENTS // max(1, chunk * n))
    solo = generalized_solo(p, alpha) if solo is None else solo
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        pi, pj = p[:, lo:hi, None], p[:, None, :]
        both = (pi > 0) & (pj > 0)
        total = pi + pj
        scaled = total.pow(alpha)
        solos = solo[:, lo:hi, None] + solo[:, None, :]
        safe_total = torch.where(both, total, 1.0)
        num_terms = torch.where(both, scaled * (pi - pj).abs() / safe_total - solos, 0.0)
        den_terms = torch.where(both, scaled - solos, 0.0)
        num[lo:hi] += (length[:, :, None] * num_terms).sum(dim=0)
        den[lo:hi] += (length[:, :, None] * den_terms).sum(dim=0)
