"""Seeded rarefaction (subsampling without replacement): of a BIOM table once, or of each
sample afresh every epoch."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import biom
import numpy as np

from aam.data.reconcile import preview
from aam.errors import InputError

if TYPE_CHECKING:
    from aam.data.samples import SampleSet

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


EVALUATION = -1  # the epoch number of evaluation's draw: one fixed draw for every evaluation


@dataclass(frozen=True)
class EpochDraw:
    """Rarefaction redrawn every epoch (``--rarefy-each-epoch``): sample ``s`` sees ``depth``
    of its reads drawn without replacement, seeded by (seed, epoch, s), so a draw depends on
    nothing else (not on the batch, the rank or a resume). ``epoch`` EVALUATION is the one
    fixed draw that evaluation reads."""

    depth: int
    seed: int
    epoch: int

    def reads(self, samples: SampleSet, s: int) -> tuple[np.ndarray, np.ndarray]:
        """(table ASV indices, drawn reads) of sample ``s``, without the ASVs drawn 0 times."""
        asvs, counts = samples.sample_asvs(s)
        rng = np.random.default_rng([self.seed, 4, self.epoch + 1, int(s)])
        drawn = rng.multivariate_hypergeometric(counts.astype(np.int64), self.depth)
        kept = drawn > 0
        return asvs[kept], drawn[kept].astype(np.float64)


def check_drawable(table: biom.Table, depth: int | None, table_name: str) -> None:
    """Before ``--rarefy-each-epoch`` training: a depth is given, counts are whole reads, and
    every sample has at least ``depth`` reads (InputError naming the shallowest otherwise)."""
    if depth is None:
        raise InputError(
            "--rarefy-each-epoch: needs --rarefy-depth, the number of reads drawn from every "
            "sample each epoch"
        )
    if depth <= 0:
        raise InputError(f"--rarefy-depth must be a positive number of reads, got {depth}")
    _check_read_counts(table, depth)
    depths = table.sum(axis="sample")
    shallow = np.flatnonzero(depths < depth)
    if len(shallow):
        ids = table.ids(axis="sample")
        least = int(np.argmin(depths))
        raise InputError(
            f"{table_name}: --rarefy-each-epoch --rarefy-depth {depth}: {len(shallow)} samples "
            f"have fewer reads (the shallowest, {ids[least]}, has {depths[least]:.0f}); lower "
            f"--rarefy-depth to at most {depths.min():.0f}, or remove those samples"
        )
