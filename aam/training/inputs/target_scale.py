"""Regression targets are learned z-scored: the train split's mean and std, and back."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from aam.errors import InputError


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
    if not (math.isfinite(scale.mean) and math.isfinite(scale.std)):
        _too_large(targets, source, column)
    check_scalable(targets, scale, source, column)
    return scale


def check_scalable(
    targets: np.ndarray, scale: TargetScale, source: str | Path, column: str
) -> None:
    """InputError (naming ``source`` and ``column``) when a known target's z-score under
    ``scale`` is not finite in float32: training refuses such a column, and prediction refuses
    it as truth (bad input, not a diverged model)."""
    known = targets[~np.isnan(targets)]
    z = scale.normalize(torch.tensor(known, dtype=torch.float32))
    if not torch.isfinite(z).all():
        _too_large(known, source, column)


def _too_large(targets: np.ndarray, source: str | Path, column: str) -> None:
    raise InputError(
        f"{source}: column {column!r} has values too large to scale (from "
        f"{np.nanmin(targets):.3g} to {np.nanmax(targets):.3g}); rescale the column (other "
        "units, or a log) so values stay well inside +-1e38"
    )
