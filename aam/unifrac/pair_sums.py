"""The UniFrac metrics by name and the sums the kernels compute for them: the per-pair sums over
the nodes both samples occupy (``PairSums``), full or packed row by row. The kernels
(``cpu_kernel``, ``torch_kernel``, ``distance_kernel``) fill them; ``metrics`` turns them into
distances."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

METRICS = ("unweighted", "weighted_normalized", "weighted_unnormalized", "generalized")
DEFAULT_ALPHA = 0.5  # generalized UniFrac's alpha unless one is given
DTYPES = {"float64": np.float64, "float32": np.float32}  # the kernels' precisions, by name

# Which pair sum each metric needs.
SUM_FOR_METRIC = {
    "unweighted": "shared_length",
    "weighted_normalized": "shared_min",
    "weighted_unnormalized": "shared_min",
    "generalized": "generalized",
}


@dataclass
class PairSums:
    """N x N sums over nodes present in both samples of a pair (None if not asked).

    Kernels fill the upper triangle (``j > i``); the rest of each array is unspecified. A
    batch's sums are that triangle packed row by row instead (1-D arrays of ``packed_size``,
    ``cpu_kernel.batch_pair_sums``), read by ``row_distances``.

    shared_length[i, j] = sum_v L_v
    shared_min[i, j]    = sum_v L_v min(p_vi, p_vj)
    gen_num[i, j]       = sum_v L_v ((p_vi + p_vj)^(a-1) |p_vi - p_vj| - p_vi^a - p_vj^a)
    gen_den[i, j]       = sum_v L_v ((p_vi + p_vj)^a - p_vi^a - p_vj^a)
    """

    shared_length: np.ndarray | None = None
    shared_min: np.ndarray | None = None
    gen_num: np.ndarray | None = None
    gen_den: np.ndarray | None = None


def packed_size(n: int) -> int:
    """Entries of n samples' strict upper triangle of pairs, packed (``PairSums``)."""
    return n * (n - 1) // 2
