"""Samples as ASV lists, and batches padded to their own longest sample.

Every distinct ASV sequence of a table is tokenized once. A batch holds each of its distinct
ASVs once (``unique_tokens``) and, per sample, indices into them (``asv_index``), so the
nucleotide encoder never sees the same sequence twice in a batch and never sees padding rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Protocol

import biom
import numpy as np
import torch

from aam.data.tokenize import PAD, tokenize
from aam.errors import InputError

ASV_SAMPLING = ("first", "abundance", "random")


@dataclass(frozen=True)
class SampleSet:
    """A table's samples as ASV index lists (CSR) plus the tokens of every table ASV."""

    sample_ids: list[str]
    asv_ids: list[str]  # table observation IDs (the ASV sequences), row k of ``tokens``
    tokens: np.ndarray  # (n_asvs, max_bp + 1) uint8, row k = table observation k
    asv_ptr: np.ndarray  # sample s owns asv_idx[asv_ptr[s]:asv_ptr[s + 1]]
    asv_idx: np.ndarray  # table observation indices, table order within a sample
    counts: np.ndarray  # reads of each (sample, ASV) entry, float64 (as UniFrac reads them)

    @classmethod
    def from_table(cls, table: biom.Table, max_bp: int, table_name: str = "table") -> SampleSet:
        """Index ``table`` (observation IDs must be the ASV sequences)."""
        matrix = table.matrix_data.tocsc()
        matrix.eliminate_zeros()
        matrix.sort_indices()
        sample_ids = [str(s) for s in table.ids()]
        empty = [s for s, n in zip(sample_ids, np.diff(matrix.indptr), strict=True) if n == 0]
        if empty:
            raise InputError(
                f"{table_name}: {len(empty)} samples have no ASVs (e.g. {', '.join(empty[:3])}); "
                "drop them (rarefaction does) before training"
            )
        asv_ids = [str(o) for o in table.ids("observation")]
        return cls(
            sample_ids=sample_ids,
            asv_ids=asv_ids,
            tokens=tokenize(asv_ids, max_bp),
            asv_ptr=matrix.indptr.astype(np.int64),
            asv_idx=matrix.indices.astype(np.int64),
            counts=matrix.data.astype(np.float64),
        )

    def __len__(self) -> int:
        return len(self.sample_ids)

    def lengths(self, token_limit: int) -> np.ndarray:
        """ASVs each sample brings to a batch: its ASV count, at most ``token_limit``."""
        return np.minimum(np.diff(self.asv_ptr), token_limit)

    def sample_asvs(self, s: int) -> tuple[np.ndarray, np.ndarray]:
        """(table ASV indices, read counts) of sample ``s``."""
        lo, hi = self.asv_ptr[s], self.asv_ptr[s + 1]
        return self.asv_idx[lo:hi], self.counts[lo:hi]


class ReadDraw(Protocol):
    """Which reads of a sample a batch sees: a fresh rarefaction per epoch, for instance
    (``aam.data.rarefy.EpochDraw``)."""

    def reads(self, samples: SampleSet, s: int) -> tuple[np.ndarray, np.ndarray]:
        """(table ASV indices, read counts) of sample ``s`` as drawn."""
        ...


def sample_reads(
    samples: SampleSet, s: int, draw: ReadDraw | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Sample ``s``'s ASVs and reads: as in the table, or as ``draw`` draws them."""
    return samples.sample_asvs(s) if draw is None else draw.reads(samples, s)


@dataclass
class Batch:
    """One batch of samples, padded to its longest sample and its longest ASV sequence."""

    sample_index: torch.Tensor  # (B,) positions in the SampleSet
    asv_rows: torch.Tensor  # (U,) table ASV indices of the batch's distinct ASVs
    unique_tokens: torch.Tensor  # (U, L) long
    asv_index: torch.Tensor  # (B, A) long, index into unique_tokens; -1 = padding
    counts: torch.Tensor  # (B, A) float reads; 0 = padding
    distances: torch.Tensor | None = None  # (B, B) UniFrac
    targets: torch.Tensor | None = None  # (B,) float (regression) or long (classes)
    categories: torch.Tensor | None = None  # (B, C) long, 0 = unknown

    def to(self, device: torch.device | str) -> Batch:
        """The batch with every tensor on ``device``."""
        moved = {
            f.name: None if getattr(self, f.name) is None else getattr(self, f.name).to(device)
            for f in fields(self)
        }
        return Batch(**moved)

    @property
    def asv_mask(self) -> torch.Tensor:
        """(B, A) True where a real ASV is."""
        return self.asv_index >= 0


def select_asvs(
    asvs: np.ndarray, counts: np.ndarray, limit: int, how: str, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """At most ``limit`` of a sample's ASVs: table order, most abundant, or a random subset."""
    if len(asvs) <= limit:
        return asvs, counts
    if how == "first":
        keep = np.arange(limit)
    elif how == "abundance":
        keep = np.sort(np.argsort(-counts, kind="stable")[:limit])
    elif how == "random":
        keep = np.sort(rng.choice(len(asvs), limit, replace=False))
    else:
        raise ValueError(f"asv sampling {how!r} is not one of {ASV_SAMPLING}")
    return asvs[keep], counts[keep]


def make_batch(
    samples: SampleSet,
    indices: Sequence[int],
    *,
    token_limit: int,
    asv_sampling: str = "first",
    rng: np.random.Generator | None = None,
    draw: ReadDraw | None = None,
    targets: np.ndarray | None = None,
    categories: np.ndarray | None = None,
) -> Batch:
    """Build the batch of ``indices`` (their reads as ``draw`` draws them, if given);
    ``targets``/``categories`` are indexed by SampleSet position, and sliced here."""
    rng = rng or np.random.default_rng(0)
    indices = np.asarray(indices, dtype=np.int64)
    chosen = [
        select_asvs(*sample_reads(samples, s, draw), token_limit, asv_sampling, rng)
        for s in indices
    ]
    width = max(len(a) for a, _ in chosen)
    asv_rows, inverse = np.unique(np.concatenate([a for a, _ in chosen]), return_inverse=True)
    asv_index = np.full((len(indices), width), -1, dtype=np.int64)
    counts = np.zeros((len(indices), width), dtype=np.float32)
    offset = 0
    for row, (asvs, reads) in enumerate(chosen):
        asv_index[row, : len(asvs)] = inverse[offset : offset + len(asvs)]
        counts[row, : len(asvs)] = reads
        offset += len(asvs)
    tokens = samples.tokens[asv_rows]
    length = int((tokens != PAD).sum(axis=1).max())
    batch = Batch(
        sample_index=torch.from_numpy(indices),
        asv_rows=torch.from_numpy(asv_rows),
        unique_tokens=torch.from_numpy(tokens[:, :length].astype(np.int64)),
        asv_index=torch.from_numpy(asv_index),
        counts=torch.from_numpy(counts),
    )
    if targets is not None:
        batch.targets = torch.from_numpy(np.asarray(targets)[indices])
    if categories is not None:
        batch.categories = torch.from_numpy(np.asarray(categories)[indices])
    return batch


def batch_indices(
    n: int,
    batch_size: int,
    *,
    shuffle: bool,
    rng: np.random.Generator | None = None,
    min_size: int = 1,
) -> Iterator[np.ndarray]:
    """Index batches over ``range(n)`` covering every item once (no dropped last batch).

    A last batch smaller than ``min_size`` (e.g. a single sample where pairs are needed) is
    merged into the one before it.
    """
    order = rng.permutation(n) if shuffle else np.arange(n)
    cuts = list(range(0, n, batch_size))
    if len(cuts) > 1 and n - cuts[-1] < min_size:
        cuts.pop()
    bounds = [*cuts, n]
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        yield order[lo:hi]
