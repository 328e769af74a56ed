"""The loss of one training step, for both stages, from the model's outputs and the batch's
targets (the forward: ``aam.training.step``; the batches: ``aam.training.inputs.batches``;
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
from aam.training.inputs.study import Study
from aam.training.inputs.target_scale import TargetScale
from aam.training.parallel.distributed import DistContext, all_reduce_sum, gather


@dataclass
class Objective:
    """The weighted loss terms of one stage (``predictor`` False = pretraining), computed from
    the model's outputs and the batch's targets (``Objective.of``: a run's, from its config)."""

    predictor: bool
    use_unifrac: bool
    use_nucleotides: bool
    weights: dict[str, float]  # of each term of ``losses.WEIGHTS``, keyed by term
    mask_rate: float  # of the nucleotides the masked-nucleotide term predicts
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
            weights={term: getattr(cfg, weight) for term, weight in losses.WEIGHTS.items()},
            mask_rate=cfg.mask_rate,
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
        (no host read here, so a step queues its work without waiting for the device).

        Under DDP (which averages gradients over ranks) the terms over the global batch enter
        the loss scaled by world_size (a rank's UniFrac rows also by 2, see
        ``losses.unifrac_row_loss``); the logged ``loss`` is the weighted sum of the terms."""
        scaled: dict[str, torch.Tensor] = {}  # each term as it enters the loss
        terms: dict[str, torch.Tensor] = {}
        ctx = self.ctx
        if self.use_unifrac:
            local = out["sample_embedding"].float()
            if ctx.enabled:  # this rank's rows of the global batch's pairs
                first = ctx.rank * len(local)
                everyone = gather(local, ctx)
                part = losses.unifrac_row_loss(local, everyone, batch.distances, first)
                term = all_reduce_sum(part, ctx)
                scaled["unifrac_loss"] = 2 * part * ctx.world_size
            else:
                term = scaled["unifrac_loss"] = losses.unifrac_loss(local, batch.distances)
            terms["unifrac_loss"] = term.detach().double()
        if nuc_mask is not None:
            ce = losses.nucleotide_loss_sum(out["nuc_logits"], batch.unique_tokens, nuc_mask)
            count = all_reduce_sum(nuc_mask.sum(dtype=torch.float32), ctx)
            term = ce / count.clamp_min(1.0)
            scaled["nuc_loss"] = term * ctx.world_size
            terms["nuc_loss"] = term.detach().double() * ctx.world_size
        if self.predictor:
            target = losses.target_loss(
                out["prediction"], batch.targets, self.classifier, self.regression_loss, self.scale
            )
            scaled["target_loss"], terms["target_loss"] = target, target.detach().double()
            if "count_prediction" in out and self.weights["count_loss"] > 0:
                count = losses.count_loss(out["count_prediction"], batch.counts, batch.asv_mask)
                scaled["count_loss"], terms["count_loss"] = count, count.detach().double()
        terms["loss"] = losses.weighted_total(terms, self.weights)
        return losses.weighted_total(scaled, self.weights), terms
