"""UniFrac metrics as functions of per-sample totals and sums over shared nodes.

Every metric is a sum over tree nodes. Writing ``|a - b| = a + b - 2 min(a, b)`` (and the same
trick for generalized UniFrac) splits it into per-sample totals plus a sum over only the nodes
that BOTH samples occupy, which is where the kernels spend their time: on real 16S data a few
percent of node x sample-pair combinations.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from aam.runtime.threads import ThreadPool, run_each
from aam.unifrac.abundance import NodeAbundance
from aam.unifrac.pair_sums import METRICS, SUM_FOR_METRIC, PairSums

_CHUNK = 1 << 16  # elements of a block of rows: the grain of the row work threads share


def distance_matrix(
    metric: str, abundance: NodeAbundance, sums: PairSums, alpha: float = 1.0, *, reuse=False
) -> np.ndarray:
    """The N x N distance matrix of ``metric`` from the upper triangles of the pair sums
    (diagonal exactly 0). ``reuse`` writes it over the sum it comes from (no N x N
    temporary; that sum is gone afterwards)."""
    totals = sample_totals(metric, abundance, alpha)
    dist = upper_distances(metric, totals, sums, 0, reuse=reuse)
    mirror_upper(dist)
    return dist


def upper_distances(
    metric: str,
    totals: np.ndarray,
    sums: PairSums,
    start: int,
    *,
    reuse: bool = False,
) -> np.ndarray:
    """Distances of samples ``start + i`` (rows of ``sums``) to samples ``start + j``
    (columns) for ``j > i``, 0 for ``j <= i``, from ``sample_totals`` of all samples
    (``distance_kernel.upper_rows``). ``reuse`` writes over the sums' own array."""
    from aam.unifrac.distance_kernel import CODES, upper_rows  # numba: only where used

    shared, den = _formula_sums(metric, sums)
    out = shared if reuse else np.empty_like(shared)
    upper_rows(CODES[metric], totals[start : start + len(shared)], totals[start:], shared, den, out)
    return out


def mirror_upper(matrix: np.ndarray) -> None:
    """Fill the lower triangle of a square matrix whose lower triangle is 0 from its upper
    one, in place, a block of rows at a time."""
    n = matrix.shape[0]
    step = max(1, _CHUNK // max(n, 1))

    for lo in range(0, n, step):
        hi = min(lo + step, n)
        matrix[lo:hi, :lo] = matrix[:lo, lo:hi].T
        diagonal = matrix[lo:hi, lo:hi]
        diagonal += diagonal.T.copy()


def row_distances(
    metric: str,
    totals: np.ndarray,
    sums: PairSums,
    rows: slice,
    pool: ThreadPool | None = None,
    halves: np.ndarray | None = None,
) -> np.ndarray:
    """Distances of samples ``rows`` to every sample (rows x all, diagonal exactly 0) from
    ``sample_totals`` and all samples' pair sums, packed (``PairSums``); ranges of rows on
    ``pool``'s threads (``distance_kernel.packed_rows``: the same values, and a row the same
    whatever rows are asked for). ``halves``: shared length's complement terms not yet in its
    sums (``cpu_kernel.batch_pair_sums``), of all samples."""
    from aam.unifrac.distance_kernel import CODES, packed_rows  # numba: only where used

    n = len(totals)
    r0, r1, _ = rows.indices(n)
    shared, den = _formula_sums(metric, sums)
    out = np.empty((r1 - r0, n), dtype=shared.dtype)
    step = max(1, _CHUNK // max(n, 1))
    halves = np.zeros(0) if halves is None else halves

    def chunk(lo: int) -> None:
        hi = min(lo + step, r1)
        packed_rows(CODES[metric], totals, shared, den, halves, lo, hi, out[lo - r0 : hi - r0])

    run_each(pool, chunk, range(r0, r1, step))
    return out


def _formula_sums(metric: str, sums: PairSums) -> tuple[np.ndarray, np.ndarray]:
    """The sums ``metric``'s formula reads (``distance_kernel.pair_distance``): the shared
    sum and the generalized denominator (the shared sum again for the other metrics)."""
    if metric not in METRICS:
        raise ValueError(f"unknown UniFrac metric {metric!r}; choose from {', '.join(METRICS)}")
    shared = getattr(sums, "gen_num" if metric == "generalized" else SUM_FOR_METRIC[metric])
    return shared, sums.gen_den if metric == "generalized" else shared


def sample_totals(metric: str, abundance: NodeAbundance, alpha: float = 1.0) -> np.ndarray:
    """Each sample's own sum over the nodes it occupies (Faith's PD for unweighted)."""
    p, lengths = abundance.proportions, abundance.lengths
    if metric == "unweighted" or (metric == "generalized" and alpha == 0):  # power(0) raises
        return _column_sums(p, lengths, presence=True)
    if metric in ("weighted_normalized", "weighted_unnormalized"):
        return _column_sums(p, lengths)
    if metric == "generalized":
        return _column_sums(p.power(alpha), lengths)
    raise ValueError(f"unknown UniFrac metric {metric!r}; choose from {', '.join(METRICS)}")


def _column_sums(matrix: sp.csr_matrix, lengths: np.ndarray, presence: bool = False) -> np.ndarray:
    """sum_v lengths[v] * matrix[v, i] (``presence``: its sign) for every sample i."""
    from aam.unifrac.cpu_kernel import column_sums  # numba: only where distances are made

    return column_sums(matrix, lengths, presence)
