"""Loss terms: pairwise UniFrac fit, masked nucleotides, target, per-ASV abundance; and their
weighted sum, the loss of training (``aam.training.objective``) and evaluation
(``aam.training.evaluation``) alike.

A new term: its function here, its row in ``WEIGHTS``, its weight in ``TrainConfig``, and its
value put in the terms of ``Objective.loss`` and ``evaluate``; the weighted sum follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import torch
import torch.nn.functional as F

from aam.training.config import REGRESSION_LOSSES
from aam.training.inputs.target_scale import TargetScale

DISTANCE_SCALE = 10.0  # embedding distance d is squashed to tanh(d / DISTANCE_SCALE) in [0, 1)

# Each term of the loss and the TrainConfig field of its weight, in the order they are summed.
WEIGHTS = {
    "unifrac_loss": "unifrac_weight",
    "nuc_loss": "nuc_weight",
    "target_loss": "target_weight",
    "count_loss": "count_weight",
}

Value = TypeVar("Value", torch.Tensor, float)


def weighted_total(terms: Mapping[str, Value], weights: Mapping[str, float]) -> Value | float:
    """The loss: the sum of each term of ``WEIGHTS`` found in ``terms`` (other keys, e.g.
    metrics, ignored) times its weight in ``weights`` (keyed by term); 0.0 when none is."""
    total: Value | float = 0.0
    for name in WEIGHTS:
        if name in terms:
            total = total + weights[name] * terms[name]
    return total


def embedding_distances(
    embeddings: torch.Tensor, columns: torch.Tensor | None = None
) -> torch.Tensor:
    """(B, C) Euclidean distances of sample embeddings to ``columns`` (default: themselves,
    zero diagonal) squashed to [0, 1)."""
    columns = embeddings if columns is None else columns
    diff = embeddings[:, None, :] - columns[None, :, :]
    squared = (diff * diff).sum(-1)
    # The clamp keeps the sqrt gradient finite on the diagonal (masked out by callers).
    return torch.tanh(torch.sqrt(squared.clamp_min(1e-12)) / DISTANCE_SCALE)


def unifrac_loss(embeddings: torch.Tensor, distances: torch.Tensor) -> torch.Tensor:
    """MSE between squashed embedding distances and UniFrac over every pair i < j of the batch.

    ``embeddings`` may be the all-gathered global batch (see ``aam.training.parallel.distributed``).
    """
    n = embeddings.shape[0]
    if n < 2:
        raise ValueError("the pairwise UniFrac loss needs at least 2 samples per batch")
    i, j = torch.triu_indices(n, n, offset=1, device=embeddings.device)
    predicted = embedding_distances(embeddings)[i, j]
    return F.mse_loss(predicted, distances[i, j].to(predicted.dtype))


def unifrac_row_loss(
    local: torch.Tensor, everyone: torch.Tensor, distances: torch.Tensor, first: int
) -> torch.Tensor:
    """One rank's part of ``unifrac_loss`` over a global batch of B: the squared errors of its
    samples ``local`` (global positions ``first``..) against every other sample of
    ``everyone`` (the gathered batch, no gradient), ``distances`` its rows (len(local), B),
    over the B (B - 1) ordered pairs. The parts of all ranks add up to ``unifrac_loss``; twice
    a part's gradient is the loss's gradient through ``local`` (each pair is a row of both its
    samples, and its error is symmetric)."""
    n = everyone.shape[0]
    if n < 2:
        raise ValueError("the pairwise UniFrac loss needs at least 2 samples per batch")
    predicted = embedding_distances(local, everyone)
    error = (predicted - distances.to(predicted.dtype)) ** 2
    own = torch.arange(len(local), device=local.device)
    error = error.index_put((own, own + first), torch.zeros((), dtype=error.dtype))
    return error.sum() / (n * (n - 1))


def nucleotide_loss_sum(
    logits: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy of the nucleotides ``tokens`` at the masked positions ``mask`` (same shape)
    from ``logits`` (``tokens``' shape + vocabulary), summed: every position is scored and the
    masked ones summed, so no op waits for the device. The term divides it by the mask's count."""
    ce = F.cross_entropy(logits.float().flatten(0, -2), tokens.flatten(), reduction="none")
    return ce.masked_fill(~mask.flatten(), 0.0).sum()


def target_loss(
    prediction: torch.Tensor,
    target: torch.Tensor,
    classifier: bool,
    kind: str,
    scale: TargetScale,
) -> torch.Tensor:
    """A classifier's ``classification_loss`` of its log-probabilities, else ``regression_loss``
    ``kind`` of the (B, 1) ``prediction`` against the ``scale``-normalized ``target``."""
    if classifier:
        return classification_loss(prediction, target)
    return regression_loss(prediction.squeeze(-1), scale.normalize(target.float()), kind)


def regression_loss(predicted: torch.Tensor, target: torch.Tensor, kind: str) -> torch.Tensor:
    """Huber (smooth L1, beta 1), MSE or MAE on normalized targets."""
    predicted, target = predicted.float(), target.float()
    if kind == "huber":
        return F.smooth_l1_loss(predicted, target, beta=1.0)
    if kind == "mse":
        return F.mse_loss(predicted, target)
    if kind == "mae":
        return F.l1_loss(predicted, target)
    raise ValueError(f"loss {kind!r} is not one of {REGRESSION_LOSSES}")


def classification_loss(log_probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the true class: the negative log-likelihood of its log-probability."""
    return F.nll_loss(log_probs.float(), target)


def count_loss(predicted: torch.Tensor, counts: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """MSE between predicted and true relative abundance of each real ASV of each sample."""
    relative = counts / counts.sum(dim=1, keepdim=True).clamp_min(1.0)
    err = (predicted.float() - relative) ** 2
    return (err * mask).sum() / mask.sum().clamp_min(1)
