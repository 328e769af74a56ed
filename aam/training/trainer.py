"""The training loop: AdamW, warm-up + cosine, clipping, accumulation, early stopping,
crash-safe checkpoints and exact resume.

Randomness is a function of (seed, epoch, batch) and (seed, optimizer step, rank): the batch
order, ASV sub-sampling, nucleotide masks and dropout of a step do not depend on how the run
got there, so a run resumed from ``latest.pt`` ends with the same weights as one never stopped.

A NaN or infinite loss term or gradient norm (``TrainStep``) or weight stops the run with
``NonFiniteError`` before the optimizer step or the save it would spoil: checkpoints keep their
last good state.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from aam.atomic import remove_stale_temporaries
from aam.data.batching import Batch, batch_indices
from aam.data.token_batches import token_batches
from aam.errors import InputError, NonFiniteError
from aam.training.checkpoint import (
    capture_rng_state,
    check_config_matches,
    checkpoint_paths,
    load_checkpoint,
    restore_rng_state,
    resume_checkpoint,
    save_checkpoint,
)
from aam.training.config import TrainConfig, check_best_metric, metric_names
from aam.training.device import peak_memory_mb
from aam.training.distributed import all_reduce_sum, broadcast_from_main
from aam.training.evaluation import PairTruth, evaluate
from aam.training.fsdp import (
    is_sharded,
    load_model_state,
    load_optimizer_state,
    local_part,
    model_state,
    optimizer_state,
)
from aam.training.memory import release_free_memory
from aam.training.objective import Objective
from aam.training.preemption import PreemptionFlag
from aam.training.prefetch import Prefetch
from aam.training.schedule import warmup_cosine
from aam.training.state import TrainState
from aam.training.step import TrainStep, build_optimizer, trainable

log = logging.getLogger(__name__)
LOWER_IS_BETTER = {"loss", "mae", "rmse", "unifrac_loss", "nuc_loss", "target_loss"}


class Preempted(Exception):
    """A SLURM signal arrived; ``latest.pt`` was saved and the job should exit to be resumed."""


@dataclass
class TrainResult:
    """Weights to publish (best epoch, or last if there is no validation set) and history."""

    state_dict: dict[str, torch.Tensor]
    history: list[dict[str, Any]]
    best_epoch: int
    best_metrics: dict[str, float] = field(default_factory=dict)


def validation_metrics(objective: Objective) -> tuple[str, ...]:
    """The ``val_`` metrics that validation reports for ``objective`` (the UniFrac ones only
    when the validation set has pairs)."""
    groups = ["loss"]
    groups += ["nucleotides"] if objective.use_nucleotides else []
    groups += ["unifrac"] if objective.use_unifrac else []
    if objective.predictor:
        groups += ["target", "classifier" if objective.study.classes else "regression"]
    return metric_names(*groups)


def step_seed(seed: int, *parts: int) -> int:
    """A 63-bit seed derived from ``seed`` and ``parts`` (stable across runs)."""
    return int(np.random.SeedSequence([seed, *parts]).generate_state(1, np.uint64)[0] >> 1)


class Trainer:
    """Runs ``objective`` on ``model`` over the study's train split, validating each epoch."""

    def __init__(
        self,
        model: nn.Module,
        objective: Objective,
        cfg: TrainConfig,
        checkpoint_dir: Path,
        device: torch.device,
        resume_config: dict[str, Any],
        progress: bool = False,
    ) -> None:
        self.model, self.objective, self.cfg = model, objective, cfg
        self.device, self.progress = device, progress
        self.ctx = objective.ctx
        self.sharded = is_sharded(model)  # FSDP: saves and validation need every rank
        self.latest, self.best = checkpoint_paths(checkpoint_dir)
        self.resume_config = resume_config
        self.train_positions = objective.study.subset("train")
        self.val_positions = objective.study.subset("val")
        self.val_pairs = PairTruth(objective, self.val_positions)  # computed at first use
        if len(self.val_positions):  # before any step: a metric this run cannot measure
            check_best_metric(cfg.best_metric, validation_metrics(objective), "in this run")
        elif cfg.patience > 0:  # it would stop after --patience epochs, improving on nothing
            raise InputError(
                f"--patience {cfg.patience}: early stopping needs validation samples and this "
                "run has none; set --val-fraction above 0 or mark samples val in --split, or "
                "drop --patience"
            )
        self.min_size = 2 if objective.use_unifrac else 1
        if objective.use_unifrac and cfg.batch_size < 2:
            raise InputError(f"--batch-size {cfg.batch_size}: the UniFrac loss needs pairs, use 2+")
        if not cfg.batch_tokens and cfg.batch_size % self.ctx.world_size:
            raise InputError(
                f"--batch-size {cfg.batch_size} is the global batch: it must divide evenly over "
                f"{self.ctx.world_size} processes"
            )
        lengths = objective.study.samples.lengths(objective.token_limit)
        self.train_lengths = lengths[self.train_positions]
        # Token batching gives each epoch its own number of batches: the schedule counts them all.
        total_steps = sum(
            math.ceil(len(self._epoch_batches(epoch)) / cfg.grad_accum)
            for epoch in range(cfg.epochs)
        )
        self.optimizer = build_optimizer(model, cfg)
        self.scheduler = warmup_cosine(self.optimizer, max(1, total_steps), cfg.warmup_fraction)
        self.step = TrainStep(model, objective, self.optimizer, device, self.scheduler)
        self.state = TrainState()
        self.stepped = False  # whether this process has trained on a batch yet

    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """The global batches of ``epoch`` (study positions), the same on every rank: each
        splits evenly over the ranks and has pairs when the UniFrac loss needs them."""
        rng = np.random.default_rng([self.cfg.seed, epoch])
        world = self.ctx.world_size
        if self.cfg.batch_tokens:
            batches = token_batches(
                self.train_lengths,
                self.cfg.batch_tokens,
                rng,
                min_size=self.min_size,
                multiple=world,
            )
            return [self.train_positions[b] for b in batches]
        batches = batch_indices(
            len(self.train_positions),
            self.cfg.batch_size,
            shuffle=True,
            rng=rng,
            min_size=max(self.min_size, world),
        )
        out = [b[: len(b) - len(b) % world] for b in batches]  # equal share per rank
        return [self.train_positions[b] for b in out if len(b)]

    def fit(self) -> TrainResult:
        """Train to the end (or early stop), resuming from ``latest.pt`` when it exists."""
        state = self.state
        self._resume()
        last_save = time.monotonic()
        with PreemptionFlag() as flag:
            while state.epoch < self.cfg.epochs and not self._stop_early():
                started, timed = time.perf_counter(), 0
                state.start_epoch()
                batches = self._epoch_batches(state.epoch)
                desc = f"epoch {state.epoch + 1}/{self.cfg.epochs}"
                bar = tqdm(
                    total=len(batches),
                    initial=state.batch,
                    disable=not self.progress,
                    desc=desc,
                    leave=False,
                )
                self.model.train()
                todo = range(state.batch, len(batches))
                calls = [(batches[b], state.epoch, b) for b in todo]
                with Prefetch(self._make_batch, calls) as ahead:
                    for b, batch in zip(todo, ahead, strict=True):
                        at_step = (b + 1) % self.cfg.grad_accum == 0 or b + 1 == len(batches)
                        terms = self._train_batch(batch, state.epoch, b, at_step)
                        if not self.stepped and self.ctx.is_main:  # training has started
                            log.info("first step done (epoch %d, batch %d)", state.epoch + 1, b + 1)
                        self.stepped = True
                        timed += len(batches[b])
                        state.add(terms, len(batches[b]))
                        bar.update(1)
                        if not at_step:
                            continue
                        minutes = (time.monotonic() - last_save) / 60
                        every = self.cfg.checkpoint_every_minutes
                        stop, due = self._agree(flag.requested, every > 0 and minutes >= every)
                        if stop or due:
                            self._save_latest()
                            last_save = time.monotonic()
                        if stop:
                            signal_name = flag.signal_name or "a signal to another rank"
                            raise Preempted(f"{signal_name}: saved {self.latest}; rerun to resume")
                bar.close()
                state.end_epoch(self._end_epoch(timed, time.perf_counter() - started))
                self._save_latest()
                last_save = time.monotonic()
        return self._result()

    def _agree(self, *flags: bool) -> list[bool]:
        """Each flag, true if it is true on any rank: every rank saves and stops together (under
        FSDP a save is a collective)."""
        if not self.ctx.enabled:
            return list(flags)
        votes = torch.tensor(flags, dtype=torch.float32, device=self.device)
        return (all_reduce_sum(votes, self.ctx) > 0).tolist()

    def _make_batch(self, positions: np.ndarray, epoch: int, b: int) -> Batch:
        """Batch ``b`` of ``epoch``: this rank's samples and the global batch's UniFrac (run
        ahead of the step in the prefetch thread; a function of (seed, epoch, b) only)."""
        return self.objective.batch(
            positions, np.random.default_rng([self.cfg.seed, 2, epoch, b]), epoch
        )

    def _train_batch(self, batch: Batch, epoch: int, b: int, at_step: bool) -> dict:
        """Forward and backward of one batch; an optimizer step when ``at_step``."""
        cfg, ctx, step = self.cfg, self.ctx, self.state.step
        torch.manual_seed(step_seed(cfg.seed, 1, step, ctx.rank))  # dropout of this step
        generator = torch.Generator(device=self.device)
        generator.manual_seed(step_seed(cfg.seed, 3, epoch, b, ctx.rank))
        where = f"epoch {epoch + 1}, step {step + 1}"
        terms = self.step(batch.to(self.device), generator, at_step, where)
        if at_step:
            self.state.step = step + 1
        return terms

    def _check_weights(self, where: str) -> None:
        """NonFiniteError if a trainable weight is NaN or infinite: such weights are never saved.
        Under FSDP each rank checks its shards and all raise if any rank finds one."""
        params = [local_part(p) for p in trainable(self.model)]
        finite = not params or bool(torch.stack([torch.isfinite(p).all() for p in params]).all())
        if self.sharded:
            finite = not self._agree(not finite)[0]
        if not finite:
            raise NonFiniteError(f"weights became non-finite by {where}; {self.step.fix()}")

    def _end_epoch(self, timed: int, seconds: float) -> dict:
        """Validate, return the epoch's row, keep best.pt; ``timed`` samples took ``seconds``."""
        state, epoch = self.state, self.state.epoch
        release_free_memory()  # the steps' freed activations: keep peak RSS from creeping
        row: dict[str, Any] = {"epoch": epoch + 1, "step": state.step}
        row["lr"] = self.scheduler.get_last_lr()[0]
        row.update({f"train_{k}": v for k, v in state.train_means().items()})
        if len(self.val_positions) and (self.ctx.is_main or self.sharded):
            metrics = evaluate(
                self.objective, self.model, self.val_positions, self.device, self.val_pairs
            )
            row.update({f"val_{k}": v for k, v in metrics.items()})
            release_free_memory()
        row["samples_per_s"] = timed / seconds if seconds > 0 else 0.0
        row["epoch_seconds"] = seconds
        row["peak_memory_mb"] = peak_memory_mb(self.device)
        metric = self._metric_value(row) if self.ctx.is_main else None
        metric = broadcast_from_main(metric, self.ctx)  # every rank takes the same decisions
        if metric is not None and not math.isfinite(metric):
            log.warning(
                "epoch %d: %s is %s; not a candidate for best.pt",
                epoch + 1,
                self.cfg.best_metric,
                metric,
            )
        if metric is not None and self._improved(metric, state.best):
            state.best, state.best_epoch, state.bad_epochs = metric, epoch + 1, 0
            self._check_weights(f"epoch {epoch + 1}")
            weights = model_state(self.model)
            if self.ctx.is_main:
                save_checkpoint(self.best, {"model": weights, "row": row})
        else:
            state.bad_epochs += 1
        (log.info if self.ctx.is_main else log.debug)(
            "epoch %d: %s",
            epoch + 1,
            ", ".join(f"{k} {v:.4g}" for k, v in row.items() if isinstance(v, float)),
        )
        return row

    def _metric_value(self, row: dict) -> float | None:
        if not len(self.val_positions):
            return None
        key = self.cfg.best_metric
        measured = tuple(k for k in row if k.startswith("val_"))
        check_best_metric(key, measured, "in this run")
        return float(row[key if key.startswith("val_") else f"val_{key}"])

    def _improved(self, value: float, best: float | None) -> bool:
        if not math.isfinite(value):
            return False
        if best is None:
            return True
        lower = self.cfg.best_metric.removeprefix("val_") in LOWER_IS_BETTER
        return value < best if lower else value > best

    def _stop_early(self) -> bool:
        stop = self.cfg.patience > 0 and self.state.bad_epochs >= self.cfg.patience
        if stop:
            log.info("early stop: no improvement in %d epochs", self.cfg.patience)
        return stop

    def _save_latest(self) -> None:
        # Under DDP the weights are the same on every rank; under FSDP every rank gathers them.
        self._check_weights(f"step {self.state.step}")
        if not (self.ctx.is_main or self.sharded):
            return
        weights, optimizer = model_state(self.model), optimizer_state(self.model, self.optimizer)
        if not self.ctx.is_main:
            return
        save_checkpoint(
            self.latest,
            {
                "model": weights,
                "optimizer": optimizer,
                "scheduler": self.scheduler.state_dict(),
                **self.state.state_dict(),
                "rng": capture_rng_state(),
                "config": self.resume_config,
            },
        )

    def _resume(self) -> None:
        """Load ``latest.pt`` (or its previous file) into the model, optimizer, scheduler, RNGs
        and ``self.state``; a fresh run leaves them as they are."""
        if self.ctx.is_main:
            remove_stale_temporaries(self.latest.parent, (self.latest.name, self.best.name))
        where = "cpu" if self.sharded else self.device  # FSDP: each rank moves only its shards
        saved, used = resume_checkpoint(self.latest, where, tidy=self.ctx.is_main)
        if saved is None:
            return
        check_config_matches(saved["config"], self.resume_config, used)
        load_model_state(self.model, saved["model"])
        load_optimizer_state(self.model, self.optimizer, saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        restore_rng_state(saved["rng"])
        self.state.load_state_dict(saved)
        log.info(
            "resumed from %s at epoch %d, batch %d", used, self.state.epoch + 1, self.state.batch
        )

    def _result(self) -> TrainResult:
        state = self.state
        if len(self.val_positions) and not state.best_epoch:
            raise NonFiniteError(
                f"validation {self.cfg.best_metric} was non-finite in every epoch, so there is "
                f"no model to keep; {self.step.fix()}"
            )
        best = load_checkpoint(self.best, map_location="cpu") if state.best_epoch else None
        if best is None:
            self._check_weights(f"step {state.step}")
            weights = {k: v.detach().cpu() for k, v in model_state(self.model).items()}
            return TrainResult(weights, state.history, best_epoch=len(state.history))
        metrics = {k: v for k, v in best["row"].items() if k.startswith("val_")}
        return TrainResult(best["model"], state.history, state.best_epoch, metrics)
