"""What one training step computes and how a subset is evaluated, for both stages.

Pretraining (``SequenceEncoder``): pairwise UniFrac fit + masked nucleotides. Fine-tuning
(``SequencePredictor``): target + per-ASV abundance + the same two terms as regularisers
(both off with a frozen base, whose embeddings are then cached once per table).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from aam.data.batching import Batch, batch_indices, make_batch
from aam.errors import InputError
from aam.models import mask_nucleotides
from aam.training import losses
from aam.training.config import TrainConfig
from aam.training.distributed import DistContext, all_reduce_sum, gather_with_grad
from aam.training.metrics import classification_metrics, regression_metrics, unifrac_fit
from aam.training.study import Study

EVAL_MASK_SEED = 1234  # validation masks are the same every epoch


@dataclass
class TargetScale:
    """Regression targets are learned z-scored; predictions are returned in original units."""

    mean: float = 0.0
    std: float = 1.0

    def normalize(self, y: torch.Tensor) -> torch.Tensor:
        return (y - self.mean) / self.std

    def original(self, z: np.ndarray) -> np.ndarray:
        return z * self.std + self.mean


def fit_target_scale(
    targets: np.ndarray, train: np.ndarray, source: str | Path, column: str
) -> TargetScale:
    """Mean and std of the ``train`` targets; InputError (naming ``source`` and ``column``) when
    they cannot z-score every target in float32: a constant column, or values near the float
    limits whose mean, std or z-scores overflow."""
    with np.errstate(over="ignore", invalid="ignore"):
        y = targets[train]
        scale = TargetScale(mean=float(np.mean(y)), std=float(np.std(y)))
    if scale.std == 0:
        raise InputError(
            f"{source}: column {column!r} has one value ({scale.mean:g}) for every training "
            "sample; there is nothing to learn: choose another --target-column"
        )
    z = scale.normalize(torch.tensor(targets, dtype=torch.float32))
    if not (math.isfinite(scale.mean) and math.isfinite(scale.std) and torch.isfinite(z).all()):
        raise InputError(
            f"{source}: column {column!r} has values too large to scale (from "
            f"{targets.min():.3g} to {targets.max():.3g}); rescale the column (other units, or "
            "a log) so values stay well inside +-1e38"
        )
    return scale


@dataclass
class Objective:
    """Loss terms and evaluation of one stage (``predictor`` False = pretraining)."""

    cfg: TrainConfig
    predictor: bool
    study: Study
    token_limit: int
    ctx: DistContext = field(default_factory=DistContext)
    scale: TargetScale = field(default_factory=TargetScale)
    cache: torch.Tensor | None = None  # frozen-base ASV embeddings of every table ASV

    @property
    def use_unifrac(self) -> bool:
        frozen = self.predictor and self.cfg.freeze_base
        return self.study.distances is not None and self.cfg.unifrac_weight > 0 and not frozen

    @property
    def use_nucleotides(self) -> bool:
        frozen = self.predictor and self.cfg.freeze_base
        return self.cfg.mask_rate > 0 and self.cfg.nuc_weight > 0 and not frozen

    def build_cache(self, model: nn.Module, device: torch.device, chunk: int = 512) -> None:
        """Encode every table ASV once with the frozen base (eval mode: no dropout)."""
        was_training = model.training
        model.eval()
        tokens = torch.from_numpy(self.study.samples.tokens.astype(np.int64)).to(device)
        self.cache = model.encode_asvs(tokens, chunk_size=chunk)
        model.train(was_training)

    def forward(self, model: nn.Module, batch: Batch, nuc_mask=None, tokens=None) -> dict:
        """Model outputs for ``batch`` (cached ASV embeddings when there is a cache)."""
        kwargs = {"nuc_mask": nuc_mask}
        if self.cache is not None and nuc_mask is None:
            kwargs["unique_embeddings"] = self.cache[batch.asv_rows]
            tokens = None
        elif tokens is None:
            tokens = batch.unique_tokens
        if self.predictor:
            kwargs["categories"] = batch.categories
        return model(tokens, batch.asv_index, batch.counts, **kwargs)

    def step_loss(
        self, model: nn.Module, batch: Batch, generator: torch.Generator
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Weighted loss of one training batch and its detached terms."""
        cfg, terms, total = self.cfg, {}, 0.0
        nuc_mask = tokens = None
        if self.use_nucleotides:
            tokens, nuc_mask = mask_nucleotides(batch.unique_tokens, cfg.mask_rate, generator)
        out = self.forward(model, batch, nuc_mask, tokens)
        if self.use_unifrac:
            embeddings = gather_with_grad(out["sample_embedding"].float(), self.ctx)
            term = losses.unifrac_loss(embeddings, batch.distances)
            total = total + cfg.unifrac_weight * term * self.ctx.world_size
            terms["unifrac_loss"] = term.item()
        if nuc_mask is not None:
            targets = batch.unique_tokens[nuc_mask]
            ce = torch.nn.functional.cross_entropy(
                out["nuc_logits"].float(), targets, reduction="sum"
            )
            count = all_reduce_sum(torch.tensor(float(len(targets)), device=ce.device), self.ctx)
            term = ce / count.clamp_min(1.0)
            total = total + cfg.nuc_weight * term * self.ctx.world_size
            terms["nuc_loss"] = term.item() * self.ctx.world_size
        if self.predictor:
            total = total + self._predictor_terms(out, batch, terms)
        terms["loss"] = float(total.detach()) if torch.is_tensor(total) else float(total)
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

    @torch.no_grad()
    def evaluate(self, model: nn.Module, positions: np.ndarray, device: torch.device) -> dict:
        """Metrics over EVERY sample in ``positions`` (no dropped batch), in eval mode."""
        model.eval()
        metrics: dict[str, float] = {}
        if self.use_nucleotides:
            metrics.update(self._nucleotide_metrics(model, positions, device))
        embeddings, predictions, count_losses = self._sample_outputs(model, positions, device)
        loss = self.cfg.nuc_weight * metrics.get("nuc_loss", 0.0)
        if self.use_unifrac and len(positions) > 1:
            truth = self.study.distances[np.ix_(positions, positions)]
            fit = unifrac_fit(embeddings, torch.from_numpy(truth))
            metrics.update(fit)
            loss += self.cfg.unifrac_weight * fit["unifrac_loss"]
        if self.predictor:
            loss += self._target_metrics(predictions, positions, metrics)
            if count_losses:
                metrics["count_loss"] = float(np.mean(count_losses))
                loss += self.cfg.count_weight * metrics["count_loss"]
        metrics["loss"] = float(loss)
        model.train()
        return metrics

    def predictions(self, model: nn.Module, positions: np.ndarray, device: torch.device):
        """Predictions for ``positions``: original units (regression) or class log-probs."""
        model.eval()
        with torch.no_grad():
            _, raw, _ = self._sample_outputs(model, positions, device)
        if self.study.classes:
            return raw.numpy()
        return self.scale.original(raw.squeeze(-1).numpy())

    def _sample_outputs(self, model, positions, device):
        cache_before = self.cache
        if self.cache is None:  # inference: each distinct ASV once per evaluated set
            self.build_cache(_unwrap(model), device)
        embeddings, predictions, count_losses = [], [], []
        try:
            for idx in batch_indices(len(positions), self.cfg.batch_size, shuffle=False):
                batch = self.batch(positions[idx]).to(device)
                out = self.forward(_unwrap(model), batch)
                embeddings.append(out["sample_embedding"].float().cpu())
                if self.predictor:
                    predictions.append(out["prediction"].float().cpu())
                    if "count_prediction" in out:
                        count_losses.append(
                            losses.count_loss(
                                out["count_prediction"], batch.counts, batch.asv_mask
                            ).item()
                        )
        finally:
            self.cache = cache_before
        cat = lambda xs: torch.cat(xs) if xs else None  # noqa: E731
        return cat(embeddings), cat(predictions), count_losses

    def _nucleotide_metrics(self, model, positions, device) -> dict[str, float]:
        """Masked-nucleotide loss and accuracy over the distinct ASVs of ``positions``."""
        samples = self.study.samples
        rows = np.unique(np.concatenate([samples.sample_asvs(p)[0] for p in positions]))
        tokens = torch.from_numpy(samples.tokens[rows].astype(np.int64)).to(device)
        generator = torch.Generator(device=device).manual_seed(EVAL_MASK_SEED)
        encoder = _unwrap(model)
        encoder = encoder.base.asv_encoder if self.predictor else encoder.asv_encoder
        ce_sum, correct, count = 0.0, 0, 0
        for part in tokens.split(512):
            masked, mask = mask_nucleotides(part, self.cfg.mask_rate, generator)
            _, logits = encoder(masked, mask)
            target = part[mask]
            ce_sum += torch.nn.functional.cross_entropy(
                logits.float(), target, reduction="sum"
            ).item()
            correct += int((logits.argmax(-1) == target).sum())
            count += len(target)
        return {"nuc_loss": ce_sum / max(count, 1), "nuc_accuracy": correct / max(count, 1)}

    def _target_metrics(self, predictions, positions, metrics) -> float:
        truth = self.study.targets[positions]
        if self.study.classes:
            metrics.update(classification_metrics(predictions, truth))
            term = losses.classification_loss(predictions, torch.from_numpy(truth)).item()
        else:
            z = predictions.squeeze(-1)
            metrics.update(regression_metrics(self.scale.original(z.numpy()), truth))
            target = self.scale.normalize(torch.from_numpy(truth).float())
            term = losses.regression_loss(z, target, self.cfg.loss).item()
        metrics["target_loss"] = term
        return self.cfg.target_weight * term

    def batch(self, positions: np.ndarray, rng: np.random.Generator | None = None) -> Batch:
        """The batch of ``positions`` with its UniFrac block, targets and categories."""
        study = self.study
        return make_batch(
            study.samples, positions, token_limit=self.token_limit,
            asv_sampling=self.cfg.asv_sampling, rng=rng, distances=study.distances,
            targets=study.targets, categories=study.categories,
        )  # fmt: skip


def _unwrap(model: nn.Module) -> nn.Module:
    """The bare model under DDP / torch.compile wrappers."""
    model = getattr(model, "module", model)
    return getattr(model, "_orig_mod", model)
