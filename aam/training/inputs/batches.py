"""The batches a training run reads: this rank's share of a global training batch, with the
UniFrac among the whole global batch when the loss needs it.

The loss itself is ``aam.training.objective.Objective``'s; the Trainer, the auto batch size
probe and the profiler make their batches here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch
import torch.distributed as dist

from aam.data.batching import Batch
from aam.data.rarefy import EVALUATION
from aam.training.inputs.study import Study
from aam.training.parallel.distributed import DistContext, rank_rows, rank_slice, sum_shares


@dataclass
class TrainBatches:
    """Batches of ``study``'s samples as a stage's model reads them (``token_limit`` tokens
    per ASV, ``asv_sampling``); ``distances``: training batches carry their UniFrac block."""

    study: Study
    token_limit: int
    asv_sampling: str = "first"
    ctx: DistContext = field(default_factory=DistContext)
    distances: bool = False
    asv_embeddings: torch.Tensor | None = None  # a frozen base's, of every table ASV
    pair_group: dist.ProcessGroup | None = None  # set: ranks share the pairs of a global batch

    def batch(
        self,
        positions: np.ndarray,
        rng: np.random.Generator | None = None,
        epoch: int = 0,
        *,
        shared: bool = False,
    ) -> Batch:
        """This rank's share of the global training batch ``positions`` (ASVs sampled with
        ``rng``, reads as ``epoch`` draws them), with the UniFrac distances of its samples to
        ALL of ``positions`` when ``distances`` (the loss's pairs span the global batch; each
        rank takes its own samples' rows of them, ``Objective.loss``). ``shared`` (every rank
        makes this batch, in the same order): with a ``pair_group``, each rank sums the pairs
        over its share of the tree's nodes and the ranks add their partial sums."""
        study = self.study
        draw = study.draw(epoch)
        local = rank_slice(positions, self.ctx)
        batch = study.batch(local, self.token_limit, self.asv_sampling, rng, draw)
        if self.distances:
            pairs = study.distances
            rows = rank_rows(len(positions), self.ctx) if self.ctx.enabled else None
            if shared and self.pair_group is not None and pairs.shareable:
                combine = partial(sum_shares, group=self.pair_group)
                batch.distances = pairs.tensor(positions, draw, combine, rows)
            else:
                batch.distances = pairs.tensor(positions, draw, rows=rows)
        return batch

    def evaluation_distances(self, positions: np.ndarray) -> np.ndarray:
        """The UniFrac among ``positions`` as evaluation reads them (its fixed draw)."""
        return self.study.distances.block(positions, self.study.draw(EVALUATION))
