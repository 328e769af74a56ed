"""An exponential moving average of the trainable weights (``--ema-decay``): updated after each
optimizer step, swapped in for validation and for the weights a run keeps.

The decay of step t is ``min(decay, (1 + t) / (10 + t))`` (the warm-up of TensorFlow's
ExponentialMovingAverage): the early average follows the weights instead of holding on to
their random start. The average is kept in float32 beside each parameter (this rank's part of
it), so under DDP it needs no exchange; FSDP is refused by the caller.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn


class WeightAverage:
    """The moving average of ``model``'s trainable parameters at ``decay`` per step."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.average = [p.detach().float().clone() for p in self.params]
        self.updates = 0

    def step_decay(self) -> float:
        """The decay of the next update (warm-up, then ``decay``)."""
        t = self.updates
        return min(self.decay, (1 + t) / (10 + t))

    @torch.no_grad()
    def update(self) -> None:
        """Move the average towards the current weights (after an optimizer step)."""
        weight = 1.0 - self.step_decay()
        for average, param in zip(self.average, self.params, strict=True):
            average.lerp_(param.detach().float(), weight)
        self.updates += 1

    @contextmanager
    def applied(self) -> Iterator[None]:
        """The model holds the averaged weights inside the block, its own again after it."""
        saved = [p.detach().clone() for p in self.params]
        try:
            with torch.no_grad():
                for average, param in zip(self.average, self.params, strict=True):
                    param.copy_(average)
            yield
        finally:
            with torch.no_grad():
                for kept, param in zip(saved, self.params, strict=True):
                    param.copy_(kept)

    def state_dict(self) -> dict[str, Any]:
        """What exact resume needs: the averages (on the CPU) and the update count."""
        return {"average": [a.cpu() for a in self.average], "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for average, saved in zip(self.average, state["average"], strict=True):
            average.copy_(saved)
        self.updates = int(state["updates"])
