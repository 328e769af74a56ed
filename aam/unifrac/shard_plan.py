"""Which rows each shard of a UniFrac matrix owns, and how many shards a table allows.

Standard library only: the workflow checks ``unifrac.shards`` with it on the login node.
"""

from __future__ import annotations

import bisect

from aam.errors import InputError


def check_shard_count(shards: int, n_samples: int, source: str) -> None:
    """1 <= ``shards`` <= ``n_samples`` (each shard gets at least one row); ``source`` names
    the setting and its table in the error."""
    if shards < 1:
        raise InputError(f"{source}: {shards} shards; use at least 1 (1: a single job)")
    if shards > n_samples:
        raise InputError(
            f"{source}: {shards} shards but only {n_samples} samples; "
            f"use at most {n_samples} shards"
        )


def shard_bounds(n_samples: int, shards: int) -> list[int]:
    """Row boundaries ``[0, b_1, ..., N]``: shard k (1-based) owns rows ``b_{k-1}..b_k - 1``,
    about N(N-1)/2/K of the pairs ``i < j`` of its rows, and at least one row."""
    bounds = [0]
    for k in range(1, shards):
        # the first row count whose pairs reach k/K of all pairs; rows 0..r-1 hold
        # C(r) = r(2N - r - 1)/2 pairs (exact integers: 2 K C(r) >= k N(N - 1))
        wanted = bisect.bisect_left(
            range(n_samples + 1),
            k * n_samples * (n_samples - 1),
            key=lambda r: shards * r * (2 * n_samples - r - 1),
        )
        bounds.append(min(max(wanted, bounds[-1] + 1), n_samples - (shards - k)))
    bounds.append(n_samples)
    return bounds


def shard_rows(n_samples: int, shard: int, shards: int) -> tuple[int, int]:
    """Rows ``(start, stop)`` of shard ``shard`` (1-based) of ``shards`` (``shard_bounds``)."""
    bounds = shard_bounds(n_samples, shards)
    return bounds[shard - 1], bounds[shard]
