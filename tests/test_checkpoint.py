"""aam.training.checkpointing.checkpoint: atomic save, corrupt-file fallback, RNG state, config
checks."""

import logging
import os
import random
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from aam.errors import InputError
from aam.runtime.atomic import atomic_output, remove_stale_temporaries
from aam.training.checkpointing.checkpoint import (
    Checkpointer,
    capture_rng_state,
    check_config_matches,
    checkpoint_paths,
    load_checkpoint,
    previous_path,
    restore_rng_state,
    resume_checkpoint,
    save_checkpoint,
)
from aam.training.checkpointing.preemption import PreemptionFlag
from aam.training.checkpointing.state import TrainState
from aam.training.config import (
    CLASSIFIER_METRICS,
    PRETRAIN_METRICS,
    REGRESSION_METRICS,
    TrainConfig,
    best_metric_of,
)
from aam.training.parallel.distributed import DistContext
from aam.training.schedule import warmup_cosine


def training_state(steps: int = 3) -> dict:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = warmup_cosine(optimizer, total_steps=10)
    for _ in range(steps):
        model(torch.randn(2, 4)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": 2,
        "step": steps,
        "best_metric": 0.25,
        "rng": capture_rng_state(),
        "config": {"d_model": 8, "layers": [1, 2]},
    }


def assert_same(a, b) -> None:
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    else:
        assert a == b


def test_checkpoint_paths(tmp_path):
    assert checkpoint_paths(tmp_path) == (tmp_path / "latest.pt", tmp_path / "best.pt")
    assert previous_path(tmp_path / "latest.pt") == tmp_path / "latest.prev.pt"


def test_round_trip_weights_only(tmp_path):
    latest, _ = checkpoint_paths(tmp_path / "checkpoints")  # directory is created on save
    state = training_state()
    save_checkpoint(latest, state)
    loaded = load_checkpoint(latest)
    assert_same(state, loaded)
    torch.load(latest, weights_only=True)  # the file itself is weights_only-safe


def test_train_state_round_trips_weights_only(tmp_path):
    state = TrainState(step=5, best=0.25, best_epoch=1, history=[{"epoch": 1, "val_loss": 0.25}])
    state.start_epoch()
    state.add({"loss": 2.0}, samples=4)
    state.add({"loss": 1.0}, samples=2)
    save_checkpoint(tmp_path / "latest.pt", {"model": {}, **state.state_dict()})
    resumed = TrainState()
    resumed.load_state_dict(torch.load(tmp_path / "latest.pt", weights_only=True))
    assert resumed == state and resumed.batch == 2 and resumed.seen == 6
    resumed.start_epoch()  # mid-epoch: the sums of the epoch's first part are kept
    assert resumed.train_means() == {"loss": 10.0 / 6}
    resumed.end_epoch({"epoch": 2})
    assert (resumed.epoch, resumed.batch, len(resumed.history)) == (1, 0, 2)
    resumed.start_epoch()
    assert resumed.sums == {} and resumed.seen == 0


def test_missing_returns_none(tmp_path):
    assert load_checkpoint(tmp_path / "latest.pt") is None


def test_keeps_exactly_one_previous_and_no_temp_files(tmp_path):
    latest = tmp_path / "latest.pt"
    for step in range(3):
        save_checkpoint(latest, {"step": step})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.prev.pt", "latest.pt"]
    assert load_checkpoint(latest)["step"] == 2
    assert torch.load(previous_path(latest), weights_only=True)["step"] == 1


def test_truncated_latest_falls_back_to_previous(tmp_path, caplog):
    latest = tmp_path / "latest.pt"
    save_checkpoint(latest, {"step": 1})
    save_checkpoint(latest, training_state())
    data = latest.read_bytes()
    latest.write_bytes(data[: len(data) // 2])
    with caplog.at_level(logging.WARNING, logger="aam.training.checkpointing.checkpoint"):
        assert load_checkpoint(latest) == {"step": 1}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert str(latest) in message and "\n" not in message


def test_missing_latest_uses_previous(tmp_path):
    # A crash between the two renames leaves only the previous file.
    latest = tmp_path / "latest.pt"
    save_checkpoint(previous_path(latest), {"step": 4})
    assert load_checkpoint(latest) == {"step": 4}


def test_both_corrupt_raises_input_error(tmp_path):
    latest = tmp_path / "latest.pt"
    latest.write_bytes(b"garbage")
    previous_path(latest).write_bytes(b"more garbage")
    with pytest.raises(InputError) as info:
        load_checkpoint(latest)
    message = str(info.value)
    assert str(latest) in message and str(previous_path(latest)) in message
    assert "delete" in message and "\n" not in message


def test_fallback_keeps_the_good_previous_file_through_the_next_save(tmp_path, caplog):
    latest = tmp_path / "latest.pt"
    save_checkpoint(latest, {"step": 1})
    save_checkpoint(latest, {"step": 2})
    corrupt = latest.read_bytes()[:40]
    latest.write_bytes(corrupt)
    with caplog.at_level(logging.WARNING, logger="aam.training.checkpointing.checkpoint"):
        state, used = resume_checkpoint(latest)
    assert state == {"step": 1} and used == previous_path(latest)
    assert not latest.exists()
    assert (tmp_path / "latest.pt.corrupt").read_bytes() == corrupt
    assert any("latest.pt.corrupt" in r.getMessage() for r in caplog.records)
    save_checkpoint(latest, {"step": 3})  # nothing unusable is rotated onto latest.prev.pt
    assert load_checkpoint(latest) == {"step": 3}
    assert torch.load(previous_path(latest), weights_only=True) == {"step": 1}


def test_resume_without_fallback_reports_latest_and_moves_nothing(tmp_path):
    latest = tmp_path / "latest.pt"
    assert resume_checkpoint(latest) == (None, latest)
    save_checkpoint(latest, {"step": 1})
    assert resume_checkpoint(latest) == ({"step": 1}, latest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.pt"]


def test_stale_temporaries_are_removed_and_nothing_else(tmp_path):
    stale = [tmp_path / ".latest.pt.4242.tmp", tmp_path / ".best.pt.k2j_x9a1.tmp"]
    kept = [tmp_path / "latest.pt", tmp_path / ".other.pt.1.tmp", tmp_path / "latest.pt.tmp"]
    for path in stale + kept:
        path.write_bytes(b"x")
    assert sorted(remove_stale_temporaries(tmp_path, ("latest.pt", "best.pt"))) == sorted(stale)
    assert sorted(tmp_path.iterdir()) == sorted(kept)
    assert remove_stale_temporaries(tmp_path / "missing", ("latest.pt",)) == []


def test_the_temporary_of_an_interrupted_write_is_what_is_removed(tmp_path):
    with atomic_output(tmp_path / "best.pt") as tmp:  # a run killed here leaves tmp behind
        tmp.write_bytes(b"partial")
        assert remove_stale_temporaries(tmp_path, ("best.pt",)) == [tmp]
        tmp.write_bytes(b"complete")
    assert [p.name for p in tmp_path.iterdir()] == ["best.pt"]


def test_non_dict_checkpoint_is_unusable(tmp_path):
    latest = tmp_path / "latest.pt"
    torch.save([1, 2], latest)
    with pytest.raises(InputError, match="not a checkpoint dict"):
        load_checkpoint(latest)


def test_interrupted_save_keeps_old_file(tmp_path, monkeypatch):
    latest = tmp_path / "latest.pt"
    save_checkpoint(latest, {"step": 1})
    before = latest.read_bytes()

    def failing_save(obj, f, *args, **kwargs):
        f.write(b"PK\x03")
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(RuntimeError, match="disk full"):
        save_checkpoint(latest, {"step": 2})
    assert [p.name for p in tmp_path.iterdir()] == ["latest.pt"]
    assert latest.read_bytes() == before


def draws() -> tuple:
    legacy = (np.random.rand(3).tolist(), np.random.normal())  # noqa: NPY002
    return random.random(), random.gauss(0, 1), legacy, torch.rand(3).tolist()


def test_rng_round_trip_through_checkpoint(tmp_path):
    random.seed(1)
    np.random.seed(1)  # noqa: NPY002
    torch.manual_seed(1)
    random.gauss(0, 1)  # leave cached Gaussians in both Python and numpy state
    np.random.normal()  # noqa: NPY002
    save_checkpoint(tmp_path / "latest.pt", {"rng": capture_rng_state()})
    expected = draws()
    draws()
    restore_rng_state(load_checkpoint(tmp_path / "latest.pt")["rng"])
    assert draws() == expected


def test_config_mismatch_lists_keys(tmp_path):
    saved = {"d_model": 64, "encoder": {"layers": 4, "heads": 4}, "dropout": 0.1}
    check_config_matches(saved, dict(saved), tmp_path / "latest.pt")
    current = {"d_model": 128, "encoder": {"layers": 4, "heads": 8}, "dropout": 0.1, "new": 1}
    with pytest.raises(InputError) as info:
        check_config_matches(saved, current, tmp_path / "latest.pt")
    message = str(info.value)
    assert "d_model: saved 64, current 128" in message
    assert "encoder.heads: saved 4, current 8" in message
    assert "new: saved <missing>, current 1" in message
    assert "dropout" not in message and str(tmp_path / "latest.pt") in message


def test_config_mismatch_truncates_long_lists(tmp_path):
    with pytest.raises(InputError, match=r"\(\+3 more\)"):
        check_config_matches({f"k{i}": i for i in range(8)}, {}, tmp_path / "latest.pt")


def test_preemption_flag_sets_and_restores():
    def previous(signum, frame):
        raise AssertionError("old handler must not run while the flag is active")

    old_usr1 = signal.signal(signal.SIGUSR1, previous)
    old_term = signal.getsignal(signal.SIGTERM)
    try:
        with PreemptionFlag() as flag:
            assert not flag.requested and flag.signal_name is None
            os.kill(os.getpid(), signal.SIGUSR1)
            assert flag.requested and flag.signal_name == "SIGUSR1"
            os.kill(os.getpid(), signal.SIGTERM)
            assert flag.signal_name == "SIGTERM"
        assert signal.getsignal(signal.SIGUSR1) is previous
        assert signal.getsignal(signal.SIGTERM) is old_term
    finally:
        signal.signal(signal.SIGUSR1, old_usr1)


def test_preemption_flag_is_noop_outside_main_thread():
    handlers = []

    def body():
        with PreemptionFlag() as flag:
            handlers.append(signal.getsignal(signal.SIGUSR1))
        assert not flag.requested

    before = signal.getsignal(signal.SIGUSR1)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert handlers == [before]


def test_auto_picks_the_best_epoch_by_the_targets_metric_in_fine_tuning():
    """--best-metric auto (the default): the test's headline metric of a fine-tuned target,
    the loss in pretraining; a metric named is kept."""
    assert best_metric_of("auto", REGRESSION_METRICS) == "val_mae"
    assert best_metric_of("auto", CLASSIFIER_METRICS) == "val_accuracy"
    assert best_metric_of("auto", PRETRAIN_METRICS) == "val_loss"
    assert best_metric_of("val_rmse", REGRESSION_METRICS) == "val_rmse"
    assert TrainConfig().best_metric == "auto"


def _checkpointer(
    directory, config: dict, best_epoch: int, ctx: DistContext | None = None
) -> Checkpointer:
    """A run's Checkpointer (of rank 0 unless ``ctx``) whose state says epoch ``best_epoch``
    was the best."""
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    state = TrainState(best=0.25, best_epoch=best_epoch)
    return Checkpointer(
        directory,
        model,
        optimizer,
        warmup_cosine(optimizer, total_steps=10),
        state,
        config=config,
        ctx=ctx or DistContext(),
        device=torch.device("cpu"),
        every_minutes=0,
        best_metric="val_loss",
        fix="",
    )


def _best(epoch: int, config: dict) -> dict:
    return {
        "model": {"w": torch.full((1,), float(epoch))},
        "row": {"epoch": epoch},
        "config": config,
    }


@pytest.mark.parametrize(
    ("previous", "message"),
    [
        (_best(3, {"code": "other"}), "best.prev.pt was made with a different config: code"),
        (
            _best(2, {"code": "this"}),
            "best.prev.pt: holds epoch 2's weights, not those of the best epoch 3",
        ),
        ({"model": {}, "row": {"epoch": 3}}, "best.prev.pt: records no config"),
        (None, "best.pt: missing, though epoch 3 was the best"),
    ],
    ids=["other-config", "earlier-epoch", "no-config", "neither-file"],
)
def test_the_fallback_best_is_verified_like_the_primary(tmp_path, previous, message):
    """An unreadable best.pt falls back to best.prev.pt only if it holds the best epoch of this
    config, samples and code: another run's or another epoch's weights are one line, never
    the model a run returns."""
    checkpointer = _checkpointer(tmp_path, {"code": "this"}, best_epoch=3)
    (tmp_path / "best.pt").write_bytes(b"torn write")
    if previous is None:
        (tmp_path / "best.pt").unlink()
    else:
        torch.save(previous, tmp_path / "best.prev.pt")
    with pytest.raises(InputError) as stop:
        checkpointer.load_best()
    assert message in str(stop.value) and "--stale-checkpoints restart" in str(stop.value)


def test_a_verified_fallback_best_is_returned(tmp_path):
    checkpointer = _checkpointer(tmp_path, {"code": "this"}, best_epoch=3)
    (tmp_path / "best.pt").write_bytes(b"torn write")
    torch.save(_best(3, {"code": "this"}), tmp_path / "best.prev.pt")
    assert checkpointer.load_best()["model"]["w"].item() == 3.0


def test_every_loss_and_error_is_better_lower():
    """--best-metric val_count_loss or val_unifrac_mae kept the epoch where it was highest."""
    from aam.training.config import LOWER_IS_BETTER, VALIDATION_METRICS

    every = {name for names in VALIDATION_METRICS.values() for name in names}
    higher = {"accuracy", "f1", "auc", "r2", "unifrac_r", "nuc_accuracy"}
    assert LOWER_IS_BETTER == every - higher
    assert {"count_loss", "unifrac_mae"} <= LOWER_IS_BETTER
    checkpointer = _checkpointer(Path("unused"), {}, best_epoch=0)
    checkpointer.best_metric = "val_count_loss"
    assert checkpointer._improved(0.1, best=0.2) and not checkpointer._improved(0.3, best=0.2)


def test_another_rank_takes_the_best_row_without_reading_best_pt(tmp_path):
    """Rank 0 alone writes best.pt and the model; another rank (on another node, or ahead of
    rank 0's write) gets the best epoch's row, never a missing-file error."""
    checkpointer = _checkpointer(tmp_path, {}, best_epoch=2, ctx=DistContext(rank=1, world_size=2))
    checkpointer.state.history = [{"epoch": 1, "val_loss": 0.3}, {"epoch": 2, "val_loss": 0.2}]
    assert not (tmp_path / "best.pt").exists()
    assert checkpointer.load_best() == {"model": {}, "row": {"epoch": 2, "val_loss": 0.2}}
