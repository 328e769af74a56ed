"""Where a training run is: the counters, best-so-far and history that exact resume needs
besides the weights, optimizer, scheduler and RNG states."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrainState:
    """Progress of a run; ``state_dict()`` holds plain types only (``weights_only`` loads)."""

    epoch: int = 0  # epochs finished
    batch: int = 0  # batches of ``epoch`` done (0 at an epoch start)
    step: int = 0  # optimizer steps taken
    best: float | None = None  # best validation value of ``TrainConfig.best_metric``
    best_epoch: int = 0  # 1-based epoch of ``best``; 0 = none yet
    bad_epochs: int = 0  # epochs in a row without improvement
    history: list[dict[str, Any]] = field(default_factory=list)  # one row per finished epoch
    sums: dict[str, float] = field(default_factory=dict)  # sample-weighted train terms of ``epoch``
    seen: int = 0  # samples behind ``sums``

    def state_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take every field from ``state`` (a dict that may hold other keys too)."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, state[f.name])

    def start_epoch(self) -> None:
        """Reset the epoch's train sums, unless resuming inside the epoch (keep its first part)."""
        if self.batch == 0:
            self.sums, self.seen = {}, 0

    def add(self, terms: dict[str, float], samples: int) -> None:
        """Count one batch of ``samples`` with loss ``terms`` into the epoch's sums."""
        self.batch += 1
        self.seen += samples
        for key, value in terms.items():
            self.sums[key] = self.sums.get(key, 0.0) + value * samples

    def train_means(self) -> dict[str, float]:
        """The epoch's sample-weighted mean of every train term."""
        return {key: value / max(self.seen, 1) for key, value in self.sums.items()}

    def end_epoch(self, row: dict[str, Any]) -> None:
        self.history.append(row)
        self.epoch, self.batch = self.epoch + 1, 0
