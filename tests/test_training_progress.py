"""A running epoch reports itself: without a progress bar a log line at least every interval
(batch k/N, samples/s, time elapsed and left, the loss so far), TensorBoard scalars every N
steps at the global step (a train column and its validation twin on one chart), and rates to
three significant digits, never rounded to 0."""

from __future__ import annotations

import itertools
import logging
import re

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tiny_model import tiny_model

from aam.models import SequenceEncoder
from aam.training.config import TrainConfig
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import UniFracSource, load_study
from aam.training.meters import progress
from aam.training.meters.progress import duration, significant
from aam.training.objective import Objective
from aam.training.parallel.distributed import DistContext
from aam.training.trainer import Trainer, epoch_line

EPOCHS = 2


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.000412345, "0.000412"),
        (0.04, "0.0400"),
        (3.214, "3.21"),
        (45.66, "45.7"),
        (99.96, "100"),
        (1234.4, "1234"),
        (0.0, "0"),
    ],
)
def test_significant_keeps_three_digits_and_never_rounds_to_zero(value, text):
    assert significant(value) == text


def test_duration_in_words():
    assert [duration(s) for s in (41.6, 185, 7620)] == ["42 s", "3 min 05 s", "2 h 07 min"]


def test_a_slow_epoch_s_rate_is_not_rounded_to_zero():
    row = {"train_loss": 1.0, "samples_per_s": 0.0412, "epoch_seconds": 931.0}
    assert "0.0412 samples/s, 931.0 s" in epoch_line(row, "val_loss")


@pytest.fixture(scope="module")
def study(small_study):
    return load_study(
        small_study / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(matrix=small_study / "unifrac.h5"),
    )


def trainer(study, tmp_path, **options) -> Trainer:
    """A 2-epoch pretraining of the tiny model on 48 demo samples (batches of 4)."""
    cfg = TrainConfig(epochs=EPOCHS, batch_size=4, checkpoint_every_minutes=0)
    ctx = DistContext()
    objective = Objective.of(cfg, predictor=False, study=study, ctx=ctx)
    batches = TrainBatches(study, 64, ctx=ctx, distances=objective.use_unifrac)
    torch.manual_seed(0)
    model = SequenceEncoder(tiny_model())
    cpu = torch.device("cpu")
    checkpoints = tmp_path / "checkpoints"
    return Trainer(model, objective, batches, cfg, ctx, checkpoints, cpu, {}, **options)


class Clock:
    """``time.perf_counter`` that moves ``tick`` seconds at every reading."""

    def __init__(self, tick: float) -> None:
        self.now = itertools.count(0.0, tick)

    def perf_counter(self) -> float:
        return next(self.now)


def progress_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == progress.__name__]


def test_without_a_bar_a_line_comes_at_the_first_step_after_each_interval(
    study, tmp_path, caplog, monkeypatch
):
    """Every reading of the clock is 0.4 s later and a line is due after 1 s: the epoch's start
    and each step read it once, so a line comes every third step of an epoch (its last step
    excepted: the epoch's own line follows)."""
    caplog.set_level(logging.INFO)
    monkeypatch.setattr(progress, "time", Clock(0.4))
    run = trainer(study, tmp_path, progress_every_s=1.0)
    run.fit()
    lines = progress_lines(caplog)
    counts = [len(run._epoch_batches(epoch)) for epoch in range(EPOCHS)]
    expected = [
        f"epoch {epoch + 1}/{EPOCHS}: batch {k}/{n}"
        for epoch, n in enumerate(counts)
        for k in range(3, n, 3)
    ]
    assert [line.split(",")[0] for line in lines] == expected
    # 3 batches of 4 samples in 1.2 s; 0.4 s a batch for the rest
    left = duration(0.4 * (counts[0] - 3))
    first = f"{expected[0]}, 10.0 samples/s, 1 s into the epoch, about {left} left, train loss "
    assert lines[0].startswith(first), lines[0]
    assert re.fullmatch(r"[0-9.]+ so far", lines[0].removeprefix(first)), lines[0]


def test_no_lines_where_a_progress_bar_shows_the_epoch(study, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    trainer(study, tmp_path, progress=True, progress_every_s=0.0).fit()
    assert progress_lines(caplog) == []


def test_tensorboard_gets_the_running_epoch_at_global_steps_and_train_and_val_on_one_tag(
    study, tmp_path
):
    run = trainer(study, tmp_path, events_dir=tmp_path / "events", events_every_steps=2)
    run.fit()
    train, val = (EventAccumulator(str(tmp_path / "events" / name)) for name in ("train", "val"))
    train.Reload()
    val.Reload()
    ends = [row["step"] for row in run.state.history]  # each epoch's last step
    assert ends == list(itertools.accumulate(len(run._epoch_batches(e)) for e in range(EPOCHS)))
    inside = [step for step in range(2, ends[-1], 2) if step not in ends]
    for tag in ("metrics/loss", "run/lr", "run/samples_per_s"):
        assert [s.step for s in train.Scalars(tag)] == sorted(inside + ends), tag
    assert [s.step for s in val.Scalars("metrics/loss")] == ends
    assert [s.step for s in train.Scalars("run/epoch")] == ends
    losses = {s.step: s.value for s in train.Scalars("metrics/loss")}
    for row in run.state.history:
        assert losses[row["step"]] == pytest.approx(row["train_loss"], rel=1e-6)


def test_a_fresh_run_removes_only_event_files_and_refuses_a_linked_events_folder(tmp_path):
    """Issue 74: a fresh run deleted the whole events/ folder, a user's file in it included,
    and a linked events/ gave a traceback (and would have written through the link)."""
    from aam.errors import InputError
    from aam.training.meters.events import EpochEvents

    events = tmp_path / "events"
    (events / "train").mkdir(parents=True)
    old = [events / "events.out.tfevents.1.old", events / "train/events.out.tfevents.2.old"]
    for path in old:
        path.write_bytes(b"old run")
    notes = events / "notes.txt"
    notes.write_text("mine")
    EpochEvents(events, fresh=True).close()
    assert not any(path.exists() for path in old) and notes.read_text() == "mine"
    assert len(list((events / "val").glob("events.out.tfevents.*"))) == 1  # this run's
    kept = list((events / "train").glob("events.out.tfevents.*"))
    EpochEvents(events, fresh=False).close()  # a resumed run appends: its files stay
    assert all(path.exists() for path in kept)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "events.out.tfevents.3.theirs").write_bytes(b"theirs")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "events").symlink_to(elsewhere)
    with pytest.raises(InputError, match=r"events: a link, where the run writes"):
        EpochEvents(linked / "events", fresh=True)
    assert (elsewhere / "events.out.tfevents.3.theirs").exists()
