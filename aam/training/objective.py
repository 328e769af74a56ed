"""The loss of one training step, for both stages, from the model's outputs and the batch's
targets (the forward: ``aam.training.step``; the batches: ``aam.training.data.batches``;
evaluation: ``aam.training.evaluation``).

Pretraining (``SequenceEncoder``): pairwise UniFrac fit + masked nucleotides. Fine-tuning
(``SequencePredictor``): target + per-ASV abundance + the same two terms as regularisers
(both off with a frozen base, whose ASV embeddings are then encoded once per run).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from aam.data.batching import Batch
from aam.training import losses
from aam.training.config import TrainConfig
from aam.training.data.study import Study
from aam.training.data.target_scale import TargetScale
from aam.training.parallel.distributed import DistContext, all_reduce_sum, gather


@dataclass
class Objective:
    """The weighted loss terms of one stage (``predictor`` False = pretraining), computed from
    the model's outputs and the batch's targets (``Objective.of``: a run's, from its config)."""

    predictor: bool
    use_unifrac: bool
    use_nucleotides: bool
    unifrac_weight: float
    nuc_weight: float
    mask_rate: float  # of the nucleotides the masked-nucleotide term predicts
    target_weight: float
    count_weight: float
    regression_loss: str  # TrainConfig.loss
    classifier: bool = False
    ctx: DistContext = field(default_factory=DistContext)
    scale: TargetScale = field(default_factory=TargetScale)

    @classmethod
    def of(
        cls,
        cfg: TrainConfig,
        predictor: bool,
        study: Study,
        ctx: DistContext | None = None,
        scale: TargetScale | None = None,
    ) -> Objective:
        """The objective of a stage trained with ``cfg`` on ``study`` (its distances and target
        decide the terms; a frozen base turns off the base's two)."""
        frozen = predictor and cfg.freeze_base
        return cls(
            predictor=predictor,
            use_unifrac=study.distances is not None and cfg.unifrac_weight > 0 and not frozen,
            use_nucleotides=cfg.mask_rate > 0 and cfg.nuc_weight > 0 and not frozen,
            unifrac_weight=cfg.unifrac_weight,
            nuc_weight=cfg.nuc_weight,
            mask_rate=cfg.mask_rate,
            target_weight=cfg.target_weight,
            count_weight=cfg.count_weight,
            regression_loss=cfg.loss,
            classifier=bool(study.classes),
            ctx=ctx or DistContext(),
            scale=scale or TargetScale(),
        )

    def loss(
        self, out: dict[str, torch.Tensor], batch: Batch, nuc_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Weighted loss of one training batch's model outputs ``out`` (nucleotides masked at
        ``nuc_mask``) and its detached terms: float64 scalars on the device, read by the caller
        (no host read here, so a step queues its work without waiting for the device)."""
        terms: dict[str, torch.Tensor] = {}
        total, logged = 0.0, 0.0
        ctx = self.ctx
        if self.use_unifrac:
            local = out["sample_embedding"].float()
            if ctx.enabled:  # this rank's rows of the global batch's pairs
                first = ctx.rank * len(local)
                everyone = gather(local, ctx)
                part = losses.unifrac_row_loss(local, everyone, batch.distances, first)
                term = all_reduce_sum(part, ctx)
                total = total + self.unifrac_weight * 2 * part * ctx.world_size
            else:
                term = losses.unifrac_loss(local, batch.distances)
                total = total + self.unifrac_weight * term
            terms["unifrac_loss"] = term.detach().double()
            logged = logged + self.unifrac_weight * terms["unifrac_loss"]
        if nuc_mask is not None:  # every position scored, the masked ones summed: no host read
            logits = out["nuc_logits"].float()
            ce = torch.nn.functional.cross_entropy(
                logits.flatten(0, 1), batch.unique_tokens.flatten(), reduction="none"
            )
            ce = ce.masked_fill(~nuc_mask.flatten(), 0.0).sum()
            count = all_reduce_sum(nuc_mask.sum(dtype=torch.float32), ctx)
            term = ce / count.clamp_min(1.0)
            total = total + self.nuc_weight * term * ctx.world_size
            terms["nuc_loss"] = term.detach().double() * ctx.world_size
            logged = logged + self.nuc_weight * terms["nuc_loss"]
        if self.predictor:
            predictor_total = self._predictor_terms(out, batch, terms)
            total = total + predictor_total
            logged = logged + predictor_total.detach().double()
        # Under DDP (which averages gradients over ranks) the terms over the global batch are
        # scaled by world_size in ``total`` (a rank's UniFrac rows also by 2, see
        # ``unifrac_row_loss``); the logged loss is the weighted sum of the terms themselves.
        terms["loss"] = logged
        return total, terms

    def _predictor_terms(self, out: dict, batch: Batch, terms: dict) -> torch.Tensor:
        if self.classifier:
            term = losses.classification_loss(out["prediction"], batch.targets)
        else:
            target = self.scale.normalize(batch.targets.float())
            term = losses.regression_loss(
                out["prediction"].squeeze(-1), target, self.regression_loss
            )
        terms["target_loss"] = term.detach().double()
        total = self.target_weight * term
        if "count_prediction" in out and self.count_weight > 0:
            count = losses.count_loss(out["count_prediction"], batch.counts, batch.asv_mask)
            terms["count_loss"] = count.detach().double()
            total = total + self.count_weight * count
        return total
