"""How much of a training window the GPU spent computing: CUDA/HIP events around each step on
the step's stream, summed and divided by the window's wall time. The gaps between steps are
the device waiting for the host (the data path, the UniFrac of the next batch, Python)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


class DeviceBusy:
    """Step intervals on ``device``'s current stream; nothing is measured on a CPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.timed = device.type == "cuda"
        self.intervals: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    @contextmanager
    def step(self) -> Iterator[None]:
        """Time the device work queued inside the block (asynchronously: no synchronization)."""
        if not self.timed:
            yield
            return
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        yield
        end.record()
        self.intervals.append((start, end))

    def fraction(self, seconds: float) -> float | None:
        """The share of ``seconds`` (the window's wall time) the device spent in the steps
        timed since the last call; None on a CPU or for an empty window."""
        intervals, self.intervals = self.intervals, []
        if not self.timed or seconds <= 0 or not intervals:
            return None
        intervals[-1][1].synchronize()
        busy_ms = sum(start.elapsed_time(end) for start, end in intervals)
        return min(1.0, busy_ms / 1000 / seconds)
