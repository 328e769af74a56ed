"""Training hyper-parameters (one dataclass, saved in every checkpoint)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

PRECISIONS = ("auto", "fp32", "bf16")


@dataclass
class TrainConfig:
    """Optimisation, loss weights and run options shared by pretraining and fine-tuning."""

    epochs: int = 10
    batch_size: int = 8
    lr: float = 3e-4
    weight_decay: float = 0.01
    warmup_fraction: float = 0.05  # of all optimizer steps, not a fixed step count
    max_grad_norm: float = 1.0  # 0 disables clipping
    grad_accum: int = 1
    patience: int = 0  # epochs without improvement before stopping; 0 = never stop early
    best_metric: str = "val_loss"
    seed: int = 42
    asv_sampling: str = "first"
    mask_rate: float = 0.15
    unifrac_weight: float = 1.0
    nuc_weight: float = 1.0
    target_weight: float = 1.0
    count_weight: float = 1.0
    loss: str = "huber"
    freeze_base: bool = False
    precision: str = "auto"
    checkpoint_every_minutes: float = 30.0  # 0 = only at epoch ends and on signals

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # Fields that must match for a checkpoint to be resumed (the rest may change on restart).
    RESUME_KEYS = (
        "batch_size", "lr", "weight_decay", "warmup_fraction", "grad_accum", "seed",
        "asv_sampling", "mask_rate", "unifrac_weight", "nuc_weight", "target_weight",
        "count_weight", "loss", "freeze_base",
    )  # fmt: skip

    def resume_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.RESUME_KEYS}
