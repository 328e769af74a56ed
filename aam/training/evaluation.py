"""Evaluation: a stage's loss terms and metrics over every sample of a subset, in eval mode
(the Trainer's per-epoch validation).

The UniFrac fit is scored over every pair of up to ``PAIR_GROUP`` samples. A larger subset is
cut, by a permutation seeded with the run's seed, into near-equal groups of at most
``PAIR_GROUP`` samples, and every pair within a group is scored: a fixed sample of the pairs,
in which every pair has the same chance, about n * PAIR_GROUP / 2 pairs in all (not n^2 / 2),
computed group by group from the tree (or read from a matrix) once per run.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from aam.models import mask_nucleotides
from aam.training import losses
from aam.training.device import unwrap
from aam.training.inference import batch_outputs
from aam.training.inputs.batches import TrainBatches
from aam.training.metrics import classification_metrics, regression_metrics, unifrac_fit
from aam.training.objective import Objective

EVAL_MASK_SEED = 1234  # validation masks are the same every epoch
PAIR_GROUP = 1024  # samples whose every pair the UniFrac fit scores (see the module docstring)


class PairTruth:
    """The true UniFrac of the scored pairs of a subset: computed at first use, then kept
    (evaluation reads one fixed draw, so they never change)."""

    def __init__(self, batches: TrainBatches, positions: np.ndarray, seed: int) -> None:
        self.batches, self.positions = batches, positions
        self.groups = pair_groups(len(positions), seed)
        self._truth: list[torch.Tensor] | None = None

    def truth(self) -> list[torch.Tensor]:
        """Per group, the upper triangle (i < j) of its distances, float32."""
        if self._truth is None:
            self._truth = []
            for group in self.groups:
                distances = self.batches.evaluation_distances(self.positions[group])
                block = torch.from_numpy(distances)
                i, j = torch.triu_indices(len(group), len(group), offset=1)
                self._truth.append(block[i, j])
        return self._truth


def pair_groups(n: int, seed: int) -> list[np.ndarray]:
    """Groups (indices into ``range(n)``) whose pairs evaluation scores: one group of all when
    ``n <= PAIR_GROUP``, else a seeded permutation cut into near-equal groups of at most
    PAIR_GROUP."""
    if n <= PAIR_GROUP:
        return [np.arange(n)]
    order = np.random.default_rng([seed, 6]).permutation(n)
    return np.array_split(order, -(-n // PAIR_GROUP))


@torch.no_grad()
def evaluate(
    objective: Objective,
    model: nn.Module,
    batches: TrainBatches,
    positions: np.ndarray,
    device: torch.device,
    *,
    batch_size: int,
    seed: int,
    pairs: PairTruth | None = None,
) -> dict[str, float]:
    """``objective``'s terms, their weighted ``loss`` and the stage's metrics over EVERY sample
    in ``positions`` as ``batches`` reads them, ``batch_size`` at a time (no dropped batch;
    UniFrac over the pairs of ``pairs``, made here with the run's ``seed`` if not given); the
    model is left in train mode."""
    model.eval()
    metrics: dict[str, float] = {}
    if objective.use_nucleotides:
        metrics.update(_nucleotide_metrics(objective, model, batches, positions, device))
    embeddings, predictions, count_losses = [], [], []
    outputs = batch_outputs(
        model,
        batches.study,
        positions,
        device,
        batch_size=batch_size,
        token_limit=batches.token_limit,
        asv_sampling=batches.asv_sampling,
        asv_embeddings=batches.asv_embeddings,
    )
    for batch, out in outputs:
        embeddings.append(out["sample_embedding"].float().cpu())
        if objective.predictor:
            predictions.append(out["prediction"].float().cpu())
            if "count_prediction" in out:
                count = losses.count_loss(out["count_prediction"], batch.counts, batch.asv_mask)
                count_losses.append(count.item())
    if objective.use_unifrac and len(positions) > 1:
        pairs = pairs or PairTruth(batches, positions, seed)
        embeddings = torch.cat(embeddings)
        groups = [embeddings[torch.from_numpy(group)] for group in pairs.groups]
        fit = unifrac_fit(groups, pairs.truth())
        metrics.update(fit)
    if objective.predictor:
        truth = batches.study.targets[positions]
        _target_metrics(objective, torch.cat(predictions), truth, metrics)
        if count_losses:
            metrics["count_loss"] = float(np.mean(count_losses))
    metrics["loss"] = float(losses.weighted_total(metrics, objective.weights))
    model.train()
    return metrics


def _nucleotide_metrics(
    objective: Objective,
    model: nn.Module,
    batches: TrainBatches,
    positions: np.ndarray,
    device: torch.device,
) -> dict[str, float]:
    """Masked-nucleotide loss and accuracy over the distinct ASVs of ``positions``."""
    samples = batches.study.samples
    rows = np.unique(np.concatenate([samples.sample_asvs(p)[0] for p in positions]))
    tokens = torch.from_numpy(samples.tokens[rows].astype(np.int64)).to(device)
    generator = torch.Generator(device=device).manual_seed(EVAL_MASK_SEED)
    encoder = unwrap(model)
    encoder = encoder.base.asv_encoder if objective.predictor else encoder.asv_encoder
    ce_sum, correct, count = 0.0, 0, 0
    for part in tokens.split(512):
        mask = mask_nucleotides(part, objective.mask_rate, generator)[1]
        logits = encoder(part, mask)[1]
        ce_sum += losses.nucleotide_loss_sum(logits, part, mask).item()
        target = part[mask]
        correct += int((logits[mask].argmax(-1) == target).sum())
        count += len(target)
    return {"nuc_loss": ce_sum / max(count, 1), "nuc_accuracy": correct / max(count, 1)}


def _target_metrics(
    objective: Objective, predictions: torch.Tensor, truth: np.ndarray, metrics: dict
) -> None:
    """Add the target's metrics (against the ``truth`` of the predicted samples) and
    ``target_loss`` to ``metrics``."""
    if objective.classifier:
        metrics.update(classification_metrics(predictions, truth))
    else:
        original = objective.scale.original(predictions.squeeze(-1).numpy())
        metrics.update(regression_metrics(original, truth))
    term = losses.target_loss(
        predictions,
        torch.from_numpy(truth),
        objective.classifier,
        objective.regression_loss,
        objective.scale,
    )
    metrics["target_loss"] = term.item()
