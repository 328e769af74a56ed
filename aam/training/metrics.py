"""Evaluation metrics and the per-epoch history table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from aam.runtime.atomic import atomic_output
from aam.training.losses import embedding_distances


def regression_metrics(predicted: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """MAE, RMSE and R^2 in the target's own units (R^2 NaN when every true value is equal;
    values that overflow are inf or NaN, without warnings: callers check)."""
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.asarray(predicted, dtype=np.float64) - truth
        total = ((truth - truth.mean()) ** 2).sum()
        return {
            "mae": float(np.abs(err).mean()),
            "rmse": float(np.sqrt((err**2).mean())),
            "r2": float(1.0 - (err**2).sum() / total) if total > 0 else float("nan"),
        }


def classification_metrics(log_probs: torch.Tensor, truth: np.ndarray) -> dict[str, float]:
    """Accuracy, macro-averaged F1 over the classes present in truth or prediction, and
    macro one-vs-rest AUC over the classes with both positive and negative samples (NaN when
    there is none)."""
    predicted = log_probs.argmax(-1).numpy()
    f1s = []
    for c in np.union1d(predicted, truth):
        tp = np.sum((predicted == c) & (truth == c))
        denom = np.sum(predicted == c) + np.sum(truth == c)
        f1s.append(2 * tp / denom if denom else 0.0)
    return {
        "accuracy": float((predicted == truth).mean()),
        "f1": float(np.mean(f1s)),
        "auc": macro_auc(log_probs.numpy(), truth),
    }


def macro_auc(scores: np.ndarray, truth: np.ndarray) -> float:
    """Mean over classes of the one-vs-rest ROC AUC of ``scores[:, c]`` (Mann-Whitney U with
    midranks for ties); classes without positives or negatives in ``truth`` are skipped."""
    ordered = np.sort(scores, axis=0)
    aucs = []
    for c in range(scores.shape[1]):
        positive = truth == c
        n_pos = int(positive.sum())
        n_neg = len(truth) - n_pos
        if n_pos and n_neg:
            column = scores[positive, c]  # midrank: (#below + #at-or-below + 1) / 2
            below = np.searchsorted(ordered[:, c], column, "left")
            at_or_below = np.searchsorted(ordered[:, c], column, "right")
            rank_sum = (below.sum() + at_or_below.sum() + n_pos) / 2
            aucs.append((rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
    return float(np.mean(aucs)) if aucs else float("nan")


def unifrac_fit(groups: list[torch.Tensor], truth: list[torch.Tensor]) -> dict[str, float]:
    """Fit of squashed embedding distances to UniFrac over the pairs i < j within each group
    (``groups``: each group's sample embeddings; ``truth``: its pairs' distances in
    ``torch.triu_indices`` order)."""
    predicted = []
    for embeddings in groups:
        n = embeddings.shape[0]
        i, j = torch.triu_indices(n, n, offset=1)
        predicted.append(embedding_distances(embeddings.double())[i, j])
    predicted = torch.cat(predicted)
    target = torch.cat(truth).double()
    # one pair has no correlation: NaN (null in JSON), not corrcoef's warning and NaN
    r = torch.corrcoef(torch.stack([predicted, target]))[0, 1] if len(target) > 1 else math.nan
    return {
        "unifrac_loss": float(((predicted - target) ** 2).mean()),
        "unifrac_mae": float((predicted - target).abs().mean()),
        "unifrac_r": float(r),
    }


def baseline_metrics(train_truth: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Regression metrics of the mean predictor (the training mean for every sample)."""
    return regression_metrics(np.full(len(truth), float(np.mean(train_truth))), truth)


def write_history(path: Path, rows: Sequence[dict]) -> None:
    """Per-epoch metrics as TSV (atomically)."""
    with atomic_output(path) as tmp:
        pd.DataFrame(list(rows)).to_csv(tmp, sep="\t", index=False, float_format="%.6g")
