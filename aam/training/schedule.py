"""Learning-rate schedules."""

from __future__ import annotations

import math

import torch


def warmup_cosine(
    optimizer: torch.optim.Optimizer,
    total_steps: int,
    warmup_fraction: float = 0.05,
    min_lr_ratio: float = 0.0,
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up to the base LR, then a half-cosine down to ``min_lr_ratio`` x base LR.

    Call ``scheduler.step()`` once per optimizer step. Warm-up lasts
    ``round(warmup_fraction * total_steps)`` steps (at least 1 if the fraction is positive, at
    most ``total_steps - 1``): the LR rises from ``base / (warmup + 1)`` and is exactly the base
    LR after ``warmup`` steps. It reaches ``min_lr_ratio`` x base after ``total_steps`` steps
    and stays there.
    """
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    if not 0.0 <= warmup_fraction < 1.0:
        raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio}")
    warmup = max(1, round(warmup_fraction * total_steps)) if warmup_fraction > 0 else 0
    warmup = min(warmup, total_steps - 1)
    decay_steps = total_steps - warmup

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        progress = min(1.0, (step - warmup) / decay_steps)
        return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
