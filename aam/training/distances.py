"""The UniFrac distances of a batch: computed from its reads and the tree (the default), or
read from a user's matrix file by rows. Neither holds anything N x N."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from aam.data.samples import ReadDraw, SampleSet, sample_reads
from aam.unifrac.batch import BatchUniFrac
from aam.unifrac.io import MatrixRows


class PairDistances(Protocol):
    """Distances between any samples of a study, by study position."""

    def block(self, positions: np.ndarray, draw: ReadDraw | None = None) -> np.ndarray:
        """(B, B) float32 distances among ``positions`` (their reads as ``draw`` draws them)."""
        ...


@dataclass(frozen=True)
class TreeDistances:
    """Exact UniFrac of each batch from its samples' reads and the tree (``BatchUniFrac``):
    follows the reads a batch sees, so a per-epoch rarefaction gets the distances of its draw."""

    samples: SampleSet
    unifrac: BatchUniFrac

    def block(self, positions: np.ndarray, draw: ReadDraw | None = None) -> np.ndarray:
        reads = [sample_reads(self.samples, int(s), draw) for s in positions]
        ptr = np.concatenate([[0], np.cumsum([len(asvs) for asvs, _ in reads])])
        asv_idx = np.concatenate([asvs for asvs, _ in reads])
        counts = np.concatenate([counts for _, counts in reads])
        return self.unifrac.distances(ptr, asv_idx, counts).astype(np.float32)


@dataclass(frozen=True)
class MatrixDistances:
    """A precomputed matrix (``--unifrac FILE``), read by rows as batches need them."""

    rows: MatrixRows
    row_of: np.ndarray  # study position -> matrix row

    def block(self, positions: np.ndarray, draw: ReadDraw | None = None) -> np.ndarray:
        if draw is not None:
            raise ValueError("a precomputed matrix cannot follow a per-epoch draw of reads")
        return self.rows.block(self.row_of[np.asarray(positions)]).astype(np.float32)
