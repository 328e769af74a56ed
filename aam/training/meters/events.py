"""TensorBoard event files of a training run (``OUTPUT_DIR/events/``): each epoch's history
row as scalars, flushed at the end of every epoch, so `tensorboard --logdir` follows a running
job offline (no network, no account). Written by the main process only."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

EVENTS_DIR = "events"  # under the run's output directory
SECTIONS = {"train_": "train/", "val_": "val/"}  # a history column's prefix -> its tag's


def tag(column: str) -> str:
    """A history column's TensorBoard tag: ``train_loss`` -> ``train/loss``, ``val_mae`` ->
    ``val/mae``, the rest (lr, samples_per_s, device_busy, ...) under ``run/``."""
    for prefix, section in SECTIONS.items():
        if column.startswith(prefix):
            return section + column.removeprefix(prefix)
    return f"run/{column}"


class EpochEvents:
    """The writer of one run's events; ``directory`` None: none (another rank)."""

    def __init__(self, directory: Path | None, fresh: bool) -> None:
        """``fresh``: the run starts at epoch 1, so events of an earlier run go first (a
        resumed run appends to its own)."""
        self.writer = None
        if directory is None:
            return
        if fresh and directory.exists():
            shutil.rmtree(directory)
        from torch.utils.tensorboard import SummaryWriter  # ~1 s: only where it writes

        self.writer = SummaryWriter(log_dir=str(directory))

    def write(self, row: dict[str, Any]) -> None:
        """Every finite number of an epoch's row, at step ``row["epoch"]``; then flush."""
        if self.writer is None:
            return
        for column, value in row.items():
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if column != "epoch" and number and math.isfinite(value):
                self.writer.add_scalar(tag(column), value, global_step=row["epoch"])
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
