"""TensorBoard event files of a training run (``OUTPUT_DIR/events/``), at the global optimizer
step: each epoch's history row, and within an epoch every ``EVENTS_EVERY_STEPS`` steps the
epoch's running train means (what the row's ``train_`` columns end as), learning rate and
samples/s. Two writers, ``events/train/`` and ``events/val/``, give a ``train_`` column and its
``val_`` twin one tag, so TensorBoard draws them on one chart (the runs ``train`` and ``val``).
Flushed at every epoch end and every ``FLUSH_S`` seconds, so `tensorboard --logdir` follows a
running job offline (no network, no account). Written by the main process only."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from aam.errors import InputError

EVENTS_DIR = "events"  # under the run's output directory
WRITERS = ("train", "val")  # a writer each, of the history columns named <writer>_...
RUN_WRITER = "train"  # the writer of the other columns (lr, samples_per_s, device_busy, ...)
EVENTS_EVERY_STEPS = 10  # optimizer steps between a running epoch's scalars
FLUSH_S = 30  # the writers flush at least this often
EVENT_FILES = "events.out.tfevents.*"  # what a SummaryWriter writes (also this folder's, before)


def tag(column: str) -> tuple[str, str]:
    """A history column's writer and TensorBoard tag: ``train_loss`` -> (train, metrics/loss),
    ``val_loss`` -> (val, metrics/loss), the rest (``lr``, ...) -> (train, run/lr)."""
    for writer in WRITERS:
        if column.startswith(f"{writer}_"):
            return writer, "metrics/" + column.removeprefix(f"{writer}_")
    return RUN_WRITER, f"run/{column}"


class EpochEvents:
    """The writers of one run's events; ``directory`` None: none (another rank)."""

    def __init__(self, directory: Path | None, fresh: bool) -> None:
        """``fresh``: the run starts at epoch 1, so events of an earlier run go first (a
        resumed run appends to its own)."""
        self.writers: dict[str, Any] = {}
        if directory is None:
            return
        folders = (directory, *(directory / name for name in WRITERS))
        for folder in folders:
            if folder.is_symlink():
                raise InputError(
                    f"{folder}: a link, where the run writes its TensorBoard event files; "
                    "remove the link (or choose another --output-dir)"
                )
        if fresh:  # only the event files a run writes: a user's file there stays
            for folder in folders:
                for old in folder.glob(EVENT_FILES) if folder.is_dir() else ():
                    if old.is_file():
                        old.unlink()
        from torch.utils.tensorboard import SummaryWriter  # ~1 s: only where it writes

        self.writers = {
            name: SummaryWriter(log_dir=str(directory / name), flush_secs=FLUSH_S)
            for name in WRITERS
        }

    def write(self, row: dict[str, Any], flush: bool = True) -> None:
        """Every finite number of ``row`` (a history row, or a running epoch's part of one) at
        step ``row["step"]`` (the epoch too, as ``run/epoch``); then flush (unless ``flush`` is
        False)."""
        if not self.writers:
            return
        for column, value in row.items():
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if column != "step" and number and math.isfinite(value):
                writer, name = tag(column)
                self.writers[writer].add_scalar(name, value, global_step=row["step"])
        if flush:
            for writer in self.writers.values():
                writer.flush()

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        self.writers = {}
