"""Seeded rarefaction (subsampling without replacement) of a BIOM table."""

from __future__ import annotations

import logging

import biom
import numpy as np

from aam.data.reconcile import preview
from aam.errors import InputError

log = logging.getLogger(__name__)
_MAX_READS = 2**62  # biom draws reads with int64 arithmetic


def rarefy(table: biom.Table, depth: int, seed: int) -> tuple[biom.Table, list[str]]:
    """Subsample every sample to ``depth`` reads; return the table and the dropped sample IDs.

    Samples with fewer than ``depth`` reads are dropped; observations left all-zero are
    removed. The result depends only on the table, ``depth`` and ``seed``.
    """
    if depth <= 0:
        raise InputError(f"--rarefy-depth must be a positive number of reads, got {depth}")
    _check_read_counts(table, depth)
    sample_ids = table.ids(axis="sample")
    depths = table.sum(axis="sample")
    dropped = [str(i) for i in sample_ids[depths < depth]]
    if len(dropped) == len(sample_ids):
        raise InputError(
            f"--rarefy-depth {depth}: no sample has that many reads (the deepest has "
            f"{depths.max(initial=0):.0f}); choose a lower --rarefy-depth"
        )
    if dropped:
        log.info(
            "rarefaction to %d reads dropped %d of %d samples with fewer reads: %s",
            depth,
            len(dropped),
            len(sample_ids),
            preview(dropped),
        )
    # biom drops samples below depth and observations left empty.
    return table.subsample(int(depth), axis="sample", seed=seed), dropped


def _check_read_counts(table: biom.Table, depth: int) -> None:
    """Rarefaction draws whole reads: counts must be whole numbers that int64 can sum."""
    counts = table.matrix_data.data
    fractional = np.flatnonzero(counts != np.round(counts))
    if len(fractional):
        raise InputError(
            f"--rarefy-depth {depth}: rarefaction draws whole reads, but {len(fractional)} "
            f"counts are fractional (e.g. {float(counts[fractional[0]])}); drop --rarefy-depth "
            "or use a table of read counts"
        )
    deepest = float(table.sum(axis="sample").max())
    if deepest >= _MAX_READS:
        raise InputError(
            f"--rarefy-depth {depth}: a sample has {deepest:.3g} reads, more than rarefaction "
            "can draw from (2**62); drop --rarefy-depth or use a table of read counts"
        )
