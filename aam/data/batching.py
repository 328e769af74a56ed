"""Batches of samples (``aam.data.samples``) as tensors, padded to their own longest sample.

A batch holds each of its distinct ASVs once (``unique_tokens``) and, per sample, indices into
them (``asv_index``), so the nucleotide encoder never sees the same sequence twice in a batch
and never sees padding rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields

import numpy as np
import torch

from aam.data.samples import ReadDraw, SampleSet, sample_reads
from aam.data.tokenize import PAD

ASV_SAMPLING = ("first", "abundance", "random")


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
        """The batch with every tensor on ``device`` (copies from pinned memory run
        asynchronously: the host queues the step without waiting for them)."""
        to_gpu = torch.device(device).type != "cpu"  # a copy to the host must land before use
        return self._map(lambda t: t.to(device, non_blocking=to_gpu))

    def pinned(self) -> Batch:
        """The batch with its host tensors in page-locked memory (tensors already on a GPU kept):
        made ahead of the step, so its copy to the GPU does not stall the host."""
        return self._map(lambda t: t.pin_memory() if t.device.type == "cpu" else t)

    def _map(self, move: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        return Batch(
            **{
                f.name: None if getattr(self, f.name) is None else move(getattr(self, f.name))
                for f in fields(self)
            }
        )

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
