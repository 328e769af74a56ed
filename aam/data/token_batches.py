"""Token-budget batching: samples of similar ASV counts, as many as fill a budget of tokens.

A batch's cost in tokens is ``len(batch) * longest sample's ASVs``: the padded size of the
sample transformer's input, which also bounds the batch's distinct ASVs (the nucleotide
encoder's rows). Short samples then share a batch with many others, long ones with few, and
larger batches share more ASVs, so each sample costs less of the nucleotide encoder.

Order within an epoch is random but not fully sorted: the shuffled samples are cut into pools of
``POOL_BATCHES`` budgets, each pool is sorted by length and packed, and the batches are shuffled,
so a sample's batch-mates (its UniFrac pairs) change from epoch to epoch.
"""

from __future__ import annotations

import numpy as np

POOL_BATCHES = 4  # budgets per sorted pool: less padding with more, more varied pairs with fewer


def batch_floor(min_size: int, multiple: int) -> int:
    """The smallest batch allowed: at least ``min_size`` samples, a multiple of ``multiple``."""
    return -(-min_size // multiple) * multiple


def token_batches(
    lengths: np.ndarray,
    budget: int,
    rng: np.random.Generator,
    *,
    min_size: int = 1,
    multiple: int = 1,
) -> list[np.ndarray]:
    """Index batches over ``range(len(lengths))`` whose padded tokens stay within ``budget``.

    Every batch has at least ``min_size`` samples and a multiple of ``multiple`` (the number of
    processes, which split each batch evenly). A batch exceeds the budget only when it could not
    be split into two such batches. Every sample is in one batch, except that up to
    ``multiple - 1`` samples of the epoch are left out when the count does not divide evenly.
    """
    lengths = np.asarray(lengths)
    floor = batch_floor(min_size, multiple)
    n = len(lengths)
    usable = n - n % multiple
    if usable < floor:
        return []
    order = _pooled(lengths, rng.permutation(n)[:usable], budget)
    sizes, start = [], 0
    while start < usable:
        size = _fit(lengths[order[start : start + budget]], budget, multiple)
        size = min(max(size, floor), usable - start)
        sizes.append(size)
        start += size
    _fix_last(sizes, floor)
    bounds = np.cumsum([0, *sizes])
    batches = [order[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
    return [batches[k] for k in rng.permutation(len(batches))]


def _pooled(lengths: np.ndarray, order: np.ndarray, budget: int) -> np.ndarray:
    """``order`` sorted by length within consecutive pools of ``POOL_BATCHES`` budgets."""
    pool = (np.cumsum(lengths[order]) - 1) // (POOL_BATCHES * budget)
    return order[np.lexsort((lengths[order], pool))]  # stable: ties keep the shuffled order


def _fit(lengths: np.ndarray, budget: int, multiple: int) -> int:
    """How many of the first ``lengths`` fit the budget padded to their running longest,
    rounded down to a multiple of ``multiple`` (callers pass at most ``budget`` lengths: each
    sample has one token or more)."""
    fits = np.arange(1, len(lengths) + 1) * np.maximum.accumulate(lengths) <= budget
    size = len(lengths) if fits.all() else int(np.argmin(fits))
    return size - size % multiple


def _fix_last(sizes: list[int], floor: int) -> None:
    """Give a last batch below ``floor`` samples from the one before it, or merge the two when
    that one would fall below ``floor`` itself."""
    if len(sizes) < 2 or sizes[-1] >= floor:
        return
    short = floor - sizes[-1]
    if sizes[-2] - short >= floor:
        sizes[-2] -= short
        sizes[-1] = floor
    else:
        last = sizes.pop()
        sizes[-1] += last
