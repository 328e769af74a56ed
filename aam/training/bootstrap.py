"""Percentile bootstrap intervals over seeded draws of samples or of whole groups, and the
paired differences of two models scored on the same draws (torch-free: the pages use them)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

BOOTSTRAP_RESAMPLES = 1000  # draws behind every interval in metrics.json


def bootstrap_draws(
    n: int, clusters: np.ndarray | None = None, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
) -> list[np.ndarray]:
    """``resamples`` draws of sample indices with replacement: of the ``n`` samples, or with
    ``clusters`` (a label per sample: the person or study a split kept whole) of whole
    clusters, as many as there are, each bringing all its samples. Seeded: the same draws for
    every caller with the same arguments, so models scored on the same samples pair up."""
    rng = np.random.default_rng(seed)
    if clusters is None:
        return [rng.integers(0, n, n) for _ in range(resamples)]
    members = [np.flatnonzero(clusters == c) for c in sorted(set(clusters.tolist()))]
    picks = [rng.integers(0, len(members), len(members)) for _ in range(resamples)]
    return [np.concatenate([members[k] for k in pick]) for pick in picks]


def bootstrap_intervals(
    score: Callable[[np.ndarray], dict[str, float]],
    n: int,
    clusters: np.ndarray | None = None,
    level: float = 0.95,
) -> dict[str, list[float]]:
    """Percentile bootstrap intervals of every metric ``score(indices)`` returns, over the
    draws of ``bootstrap_draws(n, clusters)``. A metric undefined in a draw (NaN) is left out
    of that draw; None when undefined in all."""
    draws = [score(idx) for idx in bootstrap_draws(n, clusters)]
    tail = 100 * (1 - level) / 2
    intervals = {}
    for key in draws[0]:
        values = np.array([d[key] for d in draws], dtype=np.float64)
        values = values[np.isfinite(values)]
        bounds = np.percentile(values, [tail, 100 - tail]) if len(values) else [None, None]
        intervals[key] = [None if b is None else float(b) for b in bounds]
    return intervals


def paired_differences(
    score: Callable[[np.ndarray, np.ndarray], dict[str, float]],
    model: np.ndarray,
    others: dict[str, np.ndarray],
    n: int,
    clusters: np.ndarray | None = None,
) -> dict[str, dict[str, dict]]:
    """For each of ``others``: ``score(model, idx) - score(other, idx)`` of every metric on
    all ``n`` samples (``value``) and its percentile bootstrap interval over the draws of
    ``bootstrap_intervals`` (``interval``; the same draws for both: a paired interval)."""
    everything = np.arange(n)
    out = {}
    for name, other in others.items():

        def difference(idx: np.ndarray, other=other) -> dict[str, float]:
            a, b = score(model, idx), score(other, idx)
            return {key: a[key] - b[key] for key in a}

        values = difference(everything)
        intervals = bootstrap_intervals(difference, n, clusters)
        out[name] = {
            key: {"value": None if not np.isfinite(v) else float(v), "interval": intervals[key]}
            for key, v in values.items()
        }
    return out
