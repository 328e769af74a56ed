"""The loss of one training step, for both stages (evaluation: ``aam.training.evaluation``).

Pretraining (``SequenceEncoder``): pairwise UniFrac fit + masked nucleotides. Fine-tuning
(``SequencePredictor``): target + per-ASV abundance + the same two terms as regularisers
(both off with a frozen base, whose ASV embeddings are then encoded once per run).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from aam.data.batching import Batch
from aam.models import mask_nucleotides
from aam.training import losses
from aam.training.config import TrainConfig
from aam.training.distributed import DistContext, all_reduce_sum, gather_with_grad, rank_slice
from aam.training.inference import model_outputs
from aam.training.study import Study
from aam.training.target_scale import TargetScale


@dataclass
class Objective:
    """The weighted loss terms of one stage (``predictor`` False = pretraining)."""

    cfg: TrainConfig
    predictor: bool
    study: Study
    token_limit: int
    ctx: DistContext = field(default_factory=DistContext)
    scale: TargetScale = field(default_factory=TargetScale)
    asv_embeddings: torch.Tensor | None = None  # a frozen base's, of every table ASV

    @property
    def use_unifrac(self) -> bool:
        frozen = self.predictor and self.cfg.freeze_base
        return self.study.distances is not None and self.cfg.unifrac_weight > 0 and not frozen

    @property
    def use_nucleotides(self) -> bool:
        frozen = self.predictor and self.cfg.freeze_base
        return self.cfg.mask_rate > 0 and self.cfg.nuc_weight > 0 and not frozen

    def batch(
        self, positions: np.ndarray, rng: np.random.Generator | None = None, epoch: int = 0
    ) -> Batch:
        """This rank's share of the global training batch ``positions`` (ASVs sampled with
        ``rng``, reads as ``epoch`` draws them), with the UniFrac distances among ALL of
        ``positions`` when the loss needs them (the pairs span the global batch)."""
        draw = self.study.draw(epoch)
        local = rank_slice(positions, self.ctx)
        batch = self.study.batch(local, self.token_limit, self.cfg.asv_sampling, rng, draw)
        if self.use_unifrac:
            batch.distances = torch.from_numpy(self.study.distances.block(positions, draw))
        return batch

    def step_loss(
        self, model: nn.Module, batch: Batch, generator: torch.Generator
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Weighted loss of one training batch and its detached terms."""
        cfg, terms, total, logged = self.cfg, {}, 0.0, 0.0
        nuc_mask = tokens = None
        if self.use_nucleotides:
            # the encoder reads MASK at nuc_mask; it gets the originals (ASV identity)
            tokens = batch.unique_tokens
            nuc_mask = mask_nucleotides(tokens, cfg.mask_rate, generator)[1]
        out = model_outputs(
            model, batch, tokens=tokens, nuc_mask=nuc_mask, asv_embeddings=self.asv_embeddings
        )
        if self.use_unifrac:
            embeddings = gather_with_grad(out["sample_embedding"].float(), self.ctx)
            term = losses.unifrac_loss(embeddings, batch.distances)
            total = total + cfg.unifrac_weight * term * self.ctx.world_size
            terms["unifrac_loss"] = term.item()
            logged += cfg.unifrac_weight * terms["unifrac_loss"]
        if nuc_mask is not None:
            targets = batch.unique_tokens[nuc_mask]
            ce = torch.nn.functional.cross_entropy(
                out["nuc_logits"].float(), targets, reduction="sum"
            )
            count = all_reduce_sum(torch.tensor(float(len(targets)), device=ce.device), self.ctx)
            term = ce / count.clamp_min(1.0)
            total = total + cfg.nuc_weight * term * self.ctx.world_size
            terms["nuc_loss"] = term.item() * self.ctx.world_size
            logged += cfg.nuc_weight * terms["nuc_loss"]
        if self.predictor:
            predictor_total = self._predictor_terms(out, batch, terms)
            total = total + predictor_total
            logged += float(predictor_total.detach())
        # The pairwise terms are scaled by world_size in ``total`` (DDP averages gradients over
        # ranks); the logged loss is the weighted sum of the terms themselves.
        terms["loss"] = logged
        return total, terms

    def _predictor_terms(self, out: dict, batch: Batch, terms: dict) -> torch.Tensor:
        cfg = self.cfg
        if self.study.classes:
            term = losses.classification_loss(out["prediction"], batch.targets)
        else:
            target = self.scale.normalize(batch.targets.float())
            term = losses.regression_loss(out["prediction"].squeeze(-1), target, cfg.loss)
        terms["target_loss"] = term.item()
        total = cfg.target_weight * term
        if "count_prediction" in out and cfg.count_weight > 0:
            count = losses.count_loss(out["count_prediction"], batch.counts, batch.asv_mask)
            terms["count_loss"] = count.item()
            total = total + cfg.count_weight * count
        return total
