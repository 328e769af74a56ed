"""Training checkpoints: ``Checkpointer`` keeps a run's ``latest.pt`` and ``best.pt`` (what they
hold, when they are written, resume from them); the functions below write and read one file.

``latest.pt`` is one flat dict: ``model``, ``optimizer``, ``scheduler``, ``rng``, ``config``
(what a resumed run must share, ``check_config_matches``) and the ``TrainState`` fields;
``best.pt`` holds ``model`` and the epoch's ``row`` (with ``--ema-decay``: the moving average
of the weights, which ``latest.pt`` holds too, as ``ema``). Randomness is a function of the
seed and the position in the run, so resuming from ``latest.pt`` ends with the weights of a run
never stopped (docs/training.md, "Resuming").

``save_checkpoint`` writes through ``aam.runtime.atomic.atomic_output``, keeping the old file as
``<stem>.prev.pt``, so a crash leaves a loadable file under one of the two names.
``resume_checkpoint`` moves a file that failed to load aside (``<name>.corrupt``), so the next
save cannot rotate it over the good previous file. Checkpoints hold only what
``torch.load(..., weights_only=True)`` accepts.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from aam.errors import InputError, NonFiniteError
from aam.models.files import read_torch_file
from aam.runtime.atomic import atomic_output, remove_stale_temporaries
from aam.training.checkpointing.state import TrainState
from aam.training.config import LOWER_IS_BETTER, check_best_metric
from aam.training.ema import WeightAverage
from aam.training.parallel.distributed import DistContext, any_rank, broadcast_from_main
from aam.training.parallel.fsdp import (
    is_sharded,
    load_model_state,
    load_optimizer_state,
    local_part,
    model_state,
    optimizer_state,
)

log = logging.getLogger(__name__)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def checkpoint_paths(directory: Path) -> tuple[Path, Path]:
    """Return the ``(latest.pt, best.pt)`` paths inside a checkpoint directory."""
    directory = Path(directory)
    return directory / "latest.pt", directory / "best.pt"


def previous_path(path: Path) -> Path:
    """Return where ``save_checkpoint`` keeps the file it replaced: ``<stem>.prev.pt``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev.pt")


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Atomically write ``state`` to ``path``, keeping the file it replaces as the previous one.
    A full disk raises ``DiskFullError`` (one line) with ``path`` and its previous file as they
    were."""
    path = Path(path)
    previous = previous_path(path)
    with (
        atomic_output(path, keep_previous=previous, what="checkpoint", now=True) as tmp,
        open(tmp, "wb") as handle,
    ):
        torch.save(state, handle)  # to a handle: the archive is not named after the temporary


def _try_load(path: Path, map_location: str | torch.device) -> tuple[dict[str, Any] | None, str]:
    """Load one checkpoint file; return ``(state, "")`` or ``(None, reason)``."""
    if not path.exists():
        return None, "missing"
    try:
        state = read_torch_file(path, map_location)
    except Exception as exc:  # any failure means this file is unusable; report why
        first_line = next(iter(str(exc).strip().splitlines()), "").split(". ")[0]
        return None, f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__
    if not isinstance(state, dict):
        return None, f"holds a {type(state).__name__}, not a checkpoint dict"
    return state, ""


def _load_with_fallback(
    path: Path, map_location: str | torch.device
) -> tuple[dict[str, Any] | None, Path, str]:
    """``(state, file used, why path itself was unusable or "")``; state None if neither exists.

    Raises InputError when both ``path`` and its previous file exist and are unusable.
    """
    prev = previous_path(path)
    if not path.exists() and not prev.exists():
        return None, path, ""
    state, reason = _try_load(path, map_location)
    if state is not None:
        return state, path, ""
    prev_state, prev_reason = _try_load(prev, map_location)
    if prev_state is None:
        raise InputError(
            f"cannot load checkpoint {path} ({reason}) nor {prev} ({prev_reason}); "
            f"delete {path.parent} to start over"
        )
    log.warning("checkpoint %s unusable (%s); using %s", path, reason, prev)
    return prev_state, prev, reason


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any] | None:
    """Load ``path``, falling back to its previous file if it is missing or corrupt.

    Returns None when neither file exists; raises InputError when both are unusable.
    """
    return _load_with_fallback(Path(path), map_location)[0]


def resume_checkpoint(
    path: Path, map_location: str | torch.device = "cpu", tidy: bool = True
) -> tuple[dict[str, Any] | None, Path]:
    """``load_checkpoint`` for resuming: also returns the file actually used. With ``tidy``, a
    ``path`` that exists but failed to load is renamed ``<name>.corrupt``, so the next save does
    not rotate it onto the good previous file it fell back to."""
    path = Path(path)
    state, used, reason = _load_with_fallback(path, map_location)
    if tidy and used != path and path.exists():
        aside = path.with_name(f"{path.name}.corrupt")
        os.replace(path, aside)
        log.warning("moved unusable %s (%s) aside to %s", path, reason, aside.name)
    return state, used


def capture_rng_state() -> dict[str, Any]:
    """Capture the Python, numpy (legacy global), torch CPU and CUDA RNG states."""
    name, keys, pos, has_gauss, cached_gaussian = np.random.get_state()  # noqa: NPY002
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached_gaussian),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restore RNG states from ``capture_rng_state``; CUDA only for devices present now."""
    random.setstate(state["python"])
    name, keys, pos, has_gauss, cached_gaussian = state["numpy"]
    np.random.set_state(  # noqa: NPY002
        (name, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached_gaussian)
    )
    torch.set_rng_state(state["torch"].cpu())
    if torch.cuda.is_available() and "cuda" in state:
        for device, cuda_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state.cpu(), device)


def _flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def config_differences(saved: dict[str, Any], current: dict[str, Any], shown: int = 5) -> str:
    """The keys (nested as ``a.b``) whose saved and current values differ, with both values
    (the first ``shown``); empty when none does."""
    old, new = _flatten(saved), _flatten(current)
    differing = [
        key
        for key in sorted(old.keys() | new.keys())
        if old.get(key, _MISSING) != new.get(key, _MISSING)
    ]
    details = "; ".join(
        f"{key}: saved {old.get(key, _MISSING)!r}, current {new.get(key, _MISSING)!r}"
        for key in differing[:shown]
    )
    return details + (f" (+{len(differing) - shown} more)" if len(differing) > shown else "")


# What a checkpoint holds only since it counted: the command's code, and the train options that
# change the weights a run ends with once the schedule's length counted.
_COUNTED_LATER = {
    "code": (),
    "train": ("epochs", "max_grad_norm", "patience", "best_metric", "precision"),
}


def _recorded(saved: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """``current`` without the keys counted later that ``saved`` lacks (made before they
    counted: such a checkpoint cannot be checked against them)."""
    kept = {k: v for k, v in current.items() if k in saved or k not in _COUNTED_LATER}
    if isinstance(kept.get("train"), dict) and isinstance(saved.get("train"), dict):
        late = set(_COUNTED_LATER["train"]) - saved["train"].keys()
        kept["train"] = {k: v for k, v in kept["train"].items() if k not in late}
    return kept


def check_config_matches(saved: dict[str, Any], current: dict[str, Any], path: Path) -> None:
    """Raise InputError listing keys (nested as ``a.b``) whose saved and current values differ."""
    details = config_differences(saved, current)
    if details:
        raise InputError(
            f"checkpoint {path} was made with a different config: {details}; use the config it "
            "was trained with, a checkpoint trained with this config, or --stale-checkpoints "
            "restart to train afresh"
        )


class Checkpointer:
    """The checkpoints of one run in ``directory``.

    ``latest.pt`` holds every stateful part (model, optimizer, scheduler, RNG states,
    ``state``) and is saved at each epoch end, at the optimizer step when ``every_minutes``
    have passed since the last save, and at the step a preemption signal reached any rank;
    ``best.pt`` holds the weights of the epoch with the best ``best_metric`` (their moving
    average ``ema`` when there is one: what validation scored). Weights that are
    NaN or infinite are never saved (NonFiniteError, ``fix`` says how to cure it). Under DDP
    rank 0 writes; under FSDP every rank gathers the state (collectives) and rank 0 writes.
    A ``latest.pt`` of another config (samples and code included) is refused in one line, or
    with ``stale="restart"`` deleted, with ``best.pt``, and the run starts afresh (one made
    before the code or the epoch count counted, without them, is resumed when refusing,
    restarted else).
    """

    def __init__(
        self,
        directory: Path,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        state: TrainState,
        *,
        config: dict[str, Any],
        ctx: DistContext,
        device: torch.device,
        every_minutes: float,
        best_metric: str,
        fix: str,
        ema: WeightAverage | None = None,
        stale: str = "refuse",
    ) -> None:
        self.latest, self.best = checkpoint_paths(directory)
        self.model, self.optimizer, self.scheduler, self.state = model, optimizer, scheduler, state
        self.config, self.ctx, self.device = config, ctx, device
        self.every_minutes, self.best_metric, self.fix = every_minutes, best_metric, fix
        self.sharded = is_sharded(model)  # FSDP: saves need every rank
        self.ema, self.stale = ema, stale
        self.last_save = time.monotonic()

    def _discard(self, why: str) -> None:
        """Delete this run's checkpoints (another config's): the run starts afresh."""
        log.warning("starting afresh (--stale-checkpoints restart): %s", why)
        self._forget_best()
        if self.ctx.is_main:
            for path in (self.latest, previous_path(self.latest)):
                path.unlink(missing_ok=True)

    def _forget_best(self) -> None:
        """Delete ``best.pt`` and its previous file: weights of a run this one does not
        continue, which a fallback load of an unreadable best.pt would otherwise return."""
        if self.ctx.is_main:
            for path in (self.best, previous_path(self.best)):
                path.unlink(missing_ok=True)

    def kept_weights(self):
        """A context in which the model holds the weights the run keeps (the moving average
        when there is one)."""
        return self.ema.applied() if self.ema else nullcontext()

    def resume(self) -> None:
        """Load ``latest.pt`` (or its previous file) into the stateful parts; a fresh run
        leaves them as they are."""
        if self.ctx.is_main:
            remove_stale_temporaries(self.latest.parent, (self.latest.name, self.best.name))
        where = "cpu" if self.sharded else self.device  # FSDP: each rank moves only its shards
        saved, used = resume_checkpoint(self.latest, where, tidy=self.ctx.is_main)
        self.last_save = time.monotonic()
        if saved is None:  # a fresh run: no best.pt of an earlier one may stand in for its own
            self._forget_best()
            return
        current = self.config
        if self.stale == "refuse":  # by hand, what a checkpoint made before it counted lacks
            current = _recorded(saved["config"], current)
        differences = config_differences(saved["config"], current)
        if differences and self.stale == "restart":
            self._discard(f"{used} was made with a different config: {differences}")
            return
        check_config_matches(saved["config"], current, used)
        load_model_state(self.model, saved["model"])
        load_optimizer_state(self.model, self.optimizer, saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        if self.ema:
            self.ema.load_state_dict(saved["ema"])
        restore_rng_state(saved["rng"])
        self.state.load_state_dict(saved)
        log.info(
            "resumed from %s at epoch %d, batch %d", used, self.state.epoch + 1, self.state.batch
        )

    def step_done(self, preempted: bool) -> bool:
        """After an optimizer step: save ``latest.pt`` if it is due or ``preempted`` is true on
        any rank; return whether the run must stop (every rank agrees)."""
        minutes = (time.monotonic() - self.last_save) / 60
        due = self.every_minutes > 0 and minutes >= self.every_minutes
        stop, due = any_rank([preempted, due], self.ctx)
        if stop or due:
            self.save_latest()
        return stop

    def end_epoch(self, row: dict[str, Any]) -> None:
        """Close the epoch of ``row`` in ``state``: keep ``best.pt`` if its ``best_metric``
        improved (else count a bad epoch), then save ``latest.pt``."""
        state, epoch = self.state, self.state.epoch + 1
        metric = self._metric(row) if self.ctx.is_main else None
        metric = broadcast_from_main(metric, self.ctx)  # every rank takes the same decisions
        if metric is not None and not math.isfinite(metric):
            log.warning(
                "epoch %d: %s is %s; not a candidate for best.pt", epoch, self.best_metric, metric
            )
        if metric is not None and self._improved(metric, state.best):
            state.best, state.best_epoch, state.bad_epochs = metric, epoch, 0
            with self.kept_weights():  # the state dict shares the parameters' storage
                self.check_weights(f"epoch {epoch}")
                weights = model_state(self.model)
                if self.ctx.is_main:
                    save_checkpoint(
                        self.best, {"model": weights, "row": row, "config": self.config}
                    )
        else:
            state.bad_epochs += 1
        state.end_epoch(row)
        self.save_latest()

    def save_latest(self) -> None:
        """Write ``latest.pt`` (every rank calls it)."""
        # Under DDP the weights are the same on every rank; under FSDP every rank gathers them.
        self.check_weights(f"step {self.state.step}")
        if self.ctx.is_main or self.sharded:
            weights = model_state(self.model)
            optimizer = optimizer_state(self.model, self.optimizer)
            if self.ctx.is_main:
                save_checkpoint(
                    self.latest,
                    {
                        "model": weights,
                        "optimizer": optimizer,
                        "scheduler": self.scheduler.state_dict(),
                        **self.state.state_dict(),
                        "rng": capture_rng_state(),
                        "config": self.config,
                        **({"ema": self.ema.state_dict()} if self.ema else {}),
                    },
                )
        self.last_save = time.monotonic()

    def load_best(self) -> dict[str, Any] | None:
        """``best.pt`` (its ``model`` and ``row``), None before any epoch improved. The file read
        (best.pt, or its previous file when best.pt is unusable) must hold the best epoch of
        this config, samples and code: else InputError in one line, never other weights. Other
        ranks than rank 0 (which alone writes best.pt, maybe not yet, maybe on another node,
        and the model) get the best epoch's row and no weights."""
        epoch = self.state.best_epoch
        if not epoch:
            return None
        if not self.ctx.is_main:  # only rank 0 writes best.pt and the model: its row will do
            row = next(r for r in self.state.history if r.get("epoch") == epoch)
            return {"model": {}, "row": row}
        best, used, _ = _load_with_fallback(self.best, "cpu")
        restart = "--stale-checkpoints restart to train afresh"
        if best is None:
            raise InputError(f"{self.best}: missing, though epoch {epoch} was the best; {restart}")
        if "config" not in best:
            raise InputError(f"{used}: records no config (an older aam's); {restart}")
        check_config_matches(best["config"], self.config, used)
        if best["row"].get("epoch") != epoch:
            raise InputError(
                f"{used}: holds epoch {best['row'].get('epoch')}'s weights, not those of the best "
                f"epoch {epoch} ({self.best} is unusable); {restart}"
            )
        return best

    def check_weights(self, where: str) -> None:
        """NonFiniteError if a trainable weight is NaN or infinite. Under FSDP each rank checks
        its shards and all raise if any rank finds one."""
        params = [local_part(p) for p in self.model.parameters() if p.requires_grad]
        finite = not params or bool(torch.stack([torch.isfinite(p).all() for p in params]).all())
        if self.sharded:
            finite = not any_rank([not finite], self.ctx)[0]
        if not finite:
            raise NonFiniteError(f"weights became non-finite by {where}; {self.fix}")

    def _metric(self, row: dict[str, Any]) -> float | None:
        """The row's ``best_metric``; None without validation."""
        measured = tuple(k for k in row if k.startswith("val_"))
        if not measured:
            return None
        check_best_metric(self.best_metric, measured, "in this run")
        key = self.best_metric
        return float(row[key if key.startswith("val_") else f"val_{key}"])

    def _improved(self, value: float, best: float | None) -> bool:
        if not math.isfinite(value):
            return False
        if best is None:
            return True
        lower = self.best_metric.removeprefix("val_") in LOWER_IS_BETTER
        return value < best if lower else value > best
