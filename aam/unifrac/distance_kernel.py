"""The UniFrac distance formulas, compiled (numba): a pair's distance from its two samples'
totals and its sums over shared nodes (``metrics.PairSums``).

``pair_distance`` declares each metric's formula once, for one pair; the loops around it form
a square block's upper triangle (``aam unifrac``, its shards) or any rows of a batch whose sums
are packed (training). One pass over the sums, no temporaries, and the GIL released, so a
pool's threads form rows in parallel. Every step rounds as numpy would (float64 arithmetic,
float32 sums promoted, the distance cast to the sums' dtype at the end).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import overload

from aam.unifrac.cpu_kernel import row_start
from aam.unifrac.pair_sums import METRICS

CODES = {name: code for code, name in enumerate(METRICS)}  # what the compiled loops take
_UNWEIGHTED = CODES["unweighted"]
_UNNORMALIZED = CODES["weighted_unnormalized"]
_GENERALIZED = CODES["generalized"]


@numba.njit(cache=True, nogil=True)
def pair_distance(code, pair_total, shared, den):  # pragma: no cover - compiled
    """Distance (float64) of a pair under metric ``METRICS[code]``: ``pair_total``, the sum
    of its samples' totals; ``shared``, its sum over shared nodes (shared length, shared min
    or the generalized numerator); ``den``, the generalized denominator (else unread).
    ``shared + shared``: doubled in the sums' own dtype, as numpy's ``2 * sums`` (float32 sums
    near its largest value overflow there, alike)."""
    if code == _UNWEIGHTED:
        # Rounding (e.g. of the kernel's complement terms) must not make a distance negative.
        return _ratio(np.maximum(pair_total - (shared + shared), 0.0), pair_total - shared)
    if code == _GENERALIZED:
        # As above: the complement sums' rounding (tiny or subnormal branch lengths) must not
        # take a distance out of [0, 1] (hypothesis: two tips of length 5e-324 gave -1).
        denominator = np.maximum(pair_total + den, 0.0)
        return _ratio(np.minimum(np.maximum(pair_total + shared, 0.0), denominator), denominator)
    dist = np.maximum(pair_total - (shared + shared), 0.0)  # weighted
    return dist if code == _UNNORMALIZED else _ratio(dist, pair_total)


@numba.njit(cache=True, nogil=True)
def _ratio(numerator, denominator):  # pragma: no cover - compiled
    """numerator / denominator, 0 where the denominator is 0."""
    return numerator / denominator if denominator != 0 else 0.0


@numba.njit(cache=True, nogil=True)
def upper_rows(code, row_totals, column_totals, shared, den, out):  # pragma: no cover
    """``out[i, j]``: the distance of row sample i and column sample j where ``j > i``, 0
    elsewhere, from (rows, columns) sums ``shared`` and ``den`` (generalized only; any
    array otherwise). ``out`` may be ``shared`` itself (each entry read before it is written)."""
    rows, columns = out.shape
    for i in range(rows):
        above = min(i + 1, columns)
        out[i, :above] = 0
        for j in range(above, columns):
            other = den[i, j] if code == _GENERALIZED else 0.0
            out[i, j] = pair_distance(code, row_totals[i] + column_totals[j], shared[i, j], other)


@numba.njit(cache=True, nogil=True)
def packed_rows(code, totals, shared, den, halves, lo, hi, out):  # pragma: no cover - compiled
    """``out[i - lo, j]``: the distance of samples i (``lo..hi-1``) and j (all n), diagonal 0,
    from sums packed as strict upper triangles row by row (``row_start``; ``den`` generalized
    only, any array otherwise). ``halves``: n complement halves of shared length to add
    (``halves[i] + halves[j]``), or an empty array."""
    n = len(totals)
    halved = len(halves) == n
    generalized = code == _GENERALIZED
    # Two loops in the packed sums' memory order (one loop reading (min, max) per pair, or a
    # helper taking the arrays, measured 2-4x slower), so the entry's arguments appear twice.
    for j in range(hi):  # (j, i) above the diagonal for i in lo..hi: a run of row j
        base = row_start(n, j)
        for i in range(max(lo, j + 1), hi):
            k = base + i
            out[i - lo, j] = _halved_distance(
                code,
                totals[i] + totals[j],
                shared[k],
                den[k] if generalized else 0.0,
                halves[i] + halves[j] if halved else 0.0,
                halved,
            )
    for i in range(lo, hi):
        out[i - lo, i] = 0
        base = row_start(n, i)
        for j in range(i + 1, n):
            k = base + j
            out[i - lo, j] = _halved_distance(
                code,
                totals[i] + totals[j],
                shared[k],
                den[k] if generalized else 0.0,
                halves[i] + halves[j] if halved else 0.0,
                halved,
            )


@numba.njit(cache=True, nogil=True)
def _halved_distance(code, pair_total, shared, den, half_sum, halved):  # pragma: no cover
    """``pair_distance``, the sum of two complement halves (float64) first cast to the dtype
    of ``shared`` and added to it where ``halved``, as the one-process kernel adds its terms
    (float32: a term and a kernel sum of the same node lengths round alike and cancel, so two
    samples holding no branch length stay at distance 0). Scalars only: a compiled call
    taking arrays costs their reference counts per pair."""
    if halved:
        shared = shared + cast_like(half_sum, shared)
    return pair_distance(code, pair_total, shared, den)


def cast_like(value, like):
    """``value`` in the dtype of the scalar ``like`` (compiled: ``_cast_like``)."""
    return np.asarray(like).dtype.type(value)


@overload(cast_like)
def _cast_like(value, like):  # pragma: no cover - compiled
    if isinstance(like, types.Float) and like.bitwidth == 32:
        return lambda value, like: np.float32(value)
    return lambda value, like: value
