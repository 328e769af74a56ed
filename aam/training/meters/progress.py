"""A running epoch in the log: where a progress bar does not show it (``--no-progress``, a
workflow job's log), a line at the first step after every ``PROGRESS_EVERY_S`` seconds: the
batch it reached, samples/s, the time elapsed and left in the epoch, the train loss so far.
Numbers as precise as they deserve (``significant``), never rounded to 0."""

from __future__ import annotations

import logging
import math
import time

log = logging.getLogger(__name__)
PROGRESS_EVERY_S = 60.0  # the longest a running epoch goes without a log line (at a step)


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, without an exponent: 0.000412, 3.21, 45.6,
    1234 (a larger number keeps its integer digits)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    rounded = float(f"{value:.{digits}g}")
    if abs(rounded) >= 10 ** (digits - 1):
        return f"{value:.0f}"
    return f"{rounded:.{digits - 1 - math.floor(math.log10(abs(rounded)))}f}"


def duration(seconds: float) -> str:
    """``seconds`` in words: 42 s, 3 min 05 s, 2 h 07 min."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


class EpochProgress:
    """The log lines of one epoch (``every_s`` apart at least; none when ``enabled`` is False:
    a progress bar shows it, or another rank)."""

    def __init__(self, every_s: float, enabled: bool) -> None:
        self.every_s, self.enabled = every_s, enabled
        self.where, self.batches, self.first = "", 0, 0
        self.started = self.last = time.perf_counter()

    def start(self, where: str, batches: int, first: int) -> None:
        """Epoch ``where`` (``epoch 2/10``) of ``batches`` batches starts at batch ``first`` (a
        resumed one past 0)."""
        self.where, self.batches, self.first = where, batches, first
        self.started = self.last = time.perf_counter()

    def step(self, done: int, samples: int, loss: float | None) -> None:
        """After ``done`` batches of the epoch (``samples`` of them in this process's part of
        it, whose train loss is ``loss`` so far): a line if one is due."""
        now = time.perf_counter()
        if not self.enabled or now - self.last < self.every_s:
            return
        self.last = now
        elapsed = now - self.started
        left = (self.batches - done) * elapsed / max(done - self.first, 1)
        cells = [
            f"{self.where}: batch {done}/{self.batches}",
            f"{significant(samples / elapsed)} samples/s",
            f"{duration(elapsed)} into the epoch, about {duration(left)} left",
        ]
        if loss is not None:
            cells.append(f"train loss {loss:.4g} so far")
        log.info("%s", ", ".join(cells))
