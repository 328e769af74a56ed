"""Loss terms: pairwise UniFrac fit, masked nucleotides, target, per-ASV abundance."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from aam.training.config import REGRESSION_LOSSES

DISTANCE_SCALE = 10.0  # embedding distance d is squashed to tanh(d / DISTANCE_SCALE) in [0, 1)


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
    """Negative log-likelihood of the true class."""
    return F.nll_loss(log_probs.float(), target)


def count_loss(predicted: torch.Tensor, counts: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """MSE between predicted and true relative abundance of each real ASV of each sample."""
    relative = counts / counts.sum(dim=1, keepdim=True).clamp_min(1.0)
    err = (predicted.float() - relative) ** 2
    return (err * mask).sum() / mask.sum().clamp_min(1)
