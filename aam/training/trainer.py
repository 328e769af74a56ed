"""The training loop: AdamW, warm-up + cosine, clipping, accumulation, early stopping;
checkpoints and exact resume by ``aam.training.checkpointing.checkpoint.Checkpointer``.

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
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from aam.data.batching import Batch, batch_indices
from aam.data.token_batches import token_batches
from aam.errors import InputError, NonFiniteError
from aam.training.checkpointing.checkpoint import Checkpointer
from aam.training.checkpointing.preemption import PreemptionFlag
from aam.training.checkpointing.state import TrainState
from aam.training.config import (
    TrainConfig,
    best_metric_of,
    check_best_metric,
    metric_names,
    scorable_metric,
)
from aam.training.device import peak_memory_mb, unwrap, uses_bf16
from aam.training.ema import WeightAverage
from aam.training.evaluation import PairTruth, evaluate
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.prefetch import Prefetch
from aam.training.meters.busy import DeviceBusy
from aam.training.meters.events import EVENTS_EVERY_STEPS, EpochEvents
from aam.training.meters.flops import MatmulRate
from aam.training.meters.memory import release_free_memory
from aam.training.meters.progress import PROGRESS_EVERY_S, EpochProgress, significant
from aam.training.objective import Objective
from aam.training.parallel.distributed import DistContext
from aam.training.parallel.fsdp import is_sharded, model_state
from aam.training.schedule import warmup_cosine
from aam.training.step import TrainStep, build_optimizer

log = logging.getLogger(__name__)


class Preempted(Exception):
    """A SLURM signal or Ctrl-C arrived; ``latest.pt`` was saved and the job should exit to be
    resumed."""


# The numbers of the per-epoch log line (those a row has); history.tsv holds every column.
EPOCH_LINE = ("train_loss", "val_loss", "val_mae", "val_accuracy", "val_unifrac_r")


def epoch_line(row: dict, best_metric: str) -> str:
    """The few numbers of an epoch that matter: train and validation loss, the validation
    metric of the target (or of the UniFrac fit) and the run's ``best_metric``, throughput."""
    keys = [k for k in dict.fromkeys((*EPOCH_LINE, best_metric)) if isinstance(row.get(k), float)]
    cells = [f"{k.replace('_', ' ')} {row[k]:.4g}" for k in keys]
    cells.append(f"{significant(row['samples_per_s'])} samples/s, {row['epoch_seconds']:.1f} s")
    if "tflops" in row:  # and the share of the device's peak where it is known
        mfu = f" ({row['mfu']:.0%} MFU)" if "mfu" in row else ""
        cells.append(f"{row['tflops']:.3g} TFLOP/s{mfu}")
    if "device_busy" in row:
        cells.append(f"GPU busy {row['device_busy']:.0%}")
    return ", ".join(cells) + " (every column: history.tsv)"


@dataclass
class TrainResult:
    """Weights to publish (best epoch, or last if there is no validation set) and history."""

    state_dict: dict[str, torch.Tensor]
    history: list[dict[str, Any]]
    best_epoch: int
    best_metrics: dict[str, float] = field(default_factory=dict)
    best_metric: str | None = None  # what picked best_epoch (None: no validation, the last)


def validation_metrics(objective: Objective) -> tuple[str, ...]:
    """The ``val_`` metrics that validation reports for ``objective`` (the UniFrac ones only
    when the validation set has pairs)."""
    groups = ["loss"]
    groups += ["nucleotides"] if objective.use_nucleotides else []
    groups += ["unifrac"] if objective.use_unifrac else []
    if objective.predictor:
        groups += ["target", "classifier" if objective.classifier else "regression"]
    return metric_names(*groups)


def step_seed(seed: int, *parts: int) -> int:
    """A 63-bit seed derived from ``seed`` and ``parts`` (stable across runs)."""
    return int(np.random.SeedSequence([seed, *parts]).generate_state(1, np.uint64)[0] >> 1)


class Trainer:
    """Runs ``objective`` on ``model`` over the train split of the study ``batches`` reads,
    validating each epoch; a running epoch logs a line every ``progress_every_s`` seconds
    without a progress bar and writes its scalars every ``events_every_steps`` steps."""

    def __init__(
        self,
        model: nn.Module,
        objective: Objective,
        batches: TrainBatches,
        cfg: TrainConfig,
        ctx: DistContext,
        checkpoint_dir: Path,
        device: torch.device,
        resume_config: dict[str, Any],
        progress: bool = False,
        stale_checkpoints: str = "refuse",
        events_dir: Path | None = None,
        progress_every_s: float = PROGRESS_EVERY_S,
        events_every_steps: int = EVENTS_EVERY_STEPS,
    ) -> None:
        best_metric = best_metric_of(cfg.best_metric, validation_metrics(objective))
        cfg = replace(cfg, best_metric=scorable_metric(best_metric, batches.study, ctx.is_main))
        self.model, self.objective, self.cfg, self.ctx = model, objective, cfg, ctx
        self.batches, self.device, self.progress = batches, device, progress
        self.sharded = is_sharded(model)  # FSDP: validation needs every rank
        study = batches.study
        self.train_positions = study.subset("train")
        self.val_positions = study.subset("val")
        self.val_pairs = PairTruth(batches, self.val_positions, cfg.seed)  # computed at first use
        _check_options(cfg, objective, ctx, bool(len(self.val_positions)), self.sharded)
        self.min_size = 2 if objective.use_unifrac else 1
        self.train_lengths = study.samples.lengths(batches.token_limit)[self.train_positions]
        # Token batching gives each epoch its own number of batches: the schedule counts them all.
        total_steps = sum(
            math.ceil(len(self._epoch_batches(epoch)) / cfg.grad_accum)
            for epoch in range(cfg.epochs)
        )
        self.optimizer = build_optimizer(model, cfg)
        bf16 = uses_bf16(device, cfg.precision)
        self.rate = MatmulRate(unwrap(model), device, bf16, batches.asv_embeddings is None)
        self.scheduler = warmup_cosine(self.optimizer, max(1, total_steps), cfg.warmup_fraction)
        self.step = TrainStep(
            model,
            objective,
            self.optimizer,
            cfg,
            device,
            ctx,
            self.scheduler,
            asv_embeddings=batches.asv_embeddings,
        )
        self.state = TrainState()
        self.ema = WeightAverage(model, cfg.ema_decay) if cfg.ema_decay else None
        self.checkpointer = Checkpointer(
            checkpoint_dir,
            model,
            self.optimizer,
            self.scheduler,
            self.state,
            config=resume_config,
            ctx=ctx,
            device=device,
            every_minutes=cfg.checkpoint_every_minutes,
            best_metric=cfg.best_metric,
            fix=self.step.fix,
            ema=self.ema,
            stale=stale_checkpoints,
        )
        self.stepped = False  # whether this process has trained on a batch yet
        self.busy = DeviceBusy(device)
        self.events_dir = events_dir if ctx.is_main else None
        self.running = EpochProgress(progress_every_s, enabled=ctx.is_main and not progress)
        self.events_every_steps = events_every_steps

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
        state, cfg = self.state, self.cfg
        self.checkpointer.resume()
        events = EpochEvents(self.events_dir, fresh=state.epoch == 0 and state.batch == 0)
        with PreemptionFlag() as flag, closing(events):
            while state.epoch < cfg.epochs and not self._stop_early():
                row = self._epoch(flag, events)
                self.checkpointer.end_epoch(row)
                events.write(row)
        return self._result()

    def _epoch(self, flag: PreemptionFlag, events: EpochEvents) -> dict:
        """One epoch from where the state stands (a resumed one from its next batch), its
        batches made ahead in a thread, its progress logged and written to ``events``; its
        history row. A signal (``flag``) stops it at the next checkpoint: Preempted."""
        state, cfg = self.state, self.cfg
        started, samples = time.perf_counter(), 0
        state.start_epoch()
        batches = self._epoch_batches(state.epoch)
        self.model.train()
        todo = range(state.batch, len(batches))
        self.running.start(f"epoch {state.epoch + 1}/{cfg.epochs}", len(batches), state.batch)
        calls = [(batches[b], state.epoch, b) for b in todo]
        with Prefetch(self._make_batch, calls) as ahead, self._bar(batches) as bar:
            for b, batch in zip(todo, ahead, strict=True):
                at_step = (b + 1) % cfg.grad_accum == 0 or b + 1 == len(batches)
                terms = self._train_batch(batch, b, at_step)  # a step's micro-batches, at_step
                self.rate.add(batch)
                self._first_step_done(b)
                samples += len(batches[b])
                bar.update(1)
                if not at_step:
                    continue
                for k, batch_terms in enumerate(terms, start=b + 1 - len(terms)):
                    state.add(batch_terms, len(batches[k]))
                if b + 1 < len(batches):  # the epoch's last step: its row follows
                    self._report(events, samples, time.perf_counter() - started)
                if self.checkpointer.step_done(flag.requested):
                    signal_name = flag.signal_name or "a signal to another rank"
                    latest = self.checkpointer.latest
                    raise Preempted(f"{signal_name}: saved {latest}; rerun to resume")
        return self._validate(samples, time.perf_counter() - started)

    def _report(self, events: EpochEvents, samples: int, seconds: float) -> None:
        """After a step inside the running epoch (``samples`` in ``seconds`` so far): its log
        line when one is due, and every ``events_every_steps`` steps its scalars."""
        state = self.state
        means = state.train_means()
        self.running.step(state.batch, samples, means.get("loss"))
        if state.step % self.events_every_steps == 0:
            running = {"step": state.step, **{f"train_{k}": v for k, v in means.items()}}
            running["lr"] = self.scheduler.get_last_lr()[0]
            running["samples_per_s"] = samples / seconds
            events.write(running, flush=False)

    def _train_batch(self, batch: Batch, b: int, at_step: bool) -> list[dict[str, float]]:
        """Forward and backward of batch ``b`` (gradients accumulate over a step's batches); at
        a step's last batch (``at_step``) the update (clip, AdamW, learning-rate schedule) and
        the weight average, and the loss terms of the step's batches ([] before)."""
        state = self.state
        generator, where = self._seed(state.epoch, b), self._where(state)
        with self.busy.step():
            terms = self.step(batch.to(self.device), generator, at_step, where)
            if at_step:
                state.step += 1
                if self.ema:
                    self.ema.update()
        return terms

    def _bar(self, batches: list[np.ndarray]) -> tqdm:
        desc = f"epoch {self.state.epoch + 1}/{self.cfg.epochs}"
        return tqdm(
            total=len(batches),
            initial=self.state.batch,
            disable=not self.progress,
            desc=desc,
            leave=False,
        )

    def _seed(self, epoch: int, b: int) -> torch.Generator:
        """Seed this step's dropout; return the generator of batch ``b``'s nucleotide masks."""
        cfg, rank = self.cfg, self.ctx.rank
        torch.manual_seed(step_seed(cfg.seed, 1, self.state.step, rank))  # dropout of this step
        generator = torch.Generator(device=self.device)
        return generator.manual_seed(step_seed(cfg.seed, 3, epoch, b, rank))

    @staticmethod
    def _where(state: TrainState) -> str:
        return f"epoch {state.epoch + 1}, step {state.step + 1}"

    def _first_step_done(self, b: int) -> None:
        if not self.stepped and self.ctx.is_main:  # training has started
            log.info("first step done (epoch %d, batch %d)", self.state.epoch + 1, b + 1)
        self.stepped = True

    def _make_batch(self, positions: np.ndarray, epoch: int, b: int) -> Batch:
        """Batch ``b`` of ``epoch``: this rank's samples and the global batch's UniFrac (run
        ahead of the step in the prefetch thread; a function of (seed, epoch, b) only), in pinned
        memory for a GPU."""
        rng = np.random.default_rng([self.cfg.seed, 2, epoch, b])
        batch = self.batches.batch(positions, rng, epoch, shared=True)
        return batch.pinned() if self.device.type == "cuda" else batch

    def _validate(self, samples: int, seconds: float) -> dict:
        """The epoch's row: train means, validation metrics, speed (``samples`` took
        ``seconds``) and peak memory."""
        state, epoch = self.state, self.state.epoch
        release_free_memory()  # the steps' freed activations: keep peak RSS from creeping
        row: dict[str, Any] = {"epoch": epoch + 1, "step": state.step}
        row["lr"] = self.scheduler.get_last_lr()[0]
        row.update({f"train_{k}": v for k, v in state.train_means().items()})
        if len(self.val_positions) and (self.ctx.is_main or self.sharded):
            with self.checkpointer.kept_weights():  # what the run keeps is what is scored
                metrics = evaluate(
                    self.objective,
                    self.model,
                    self.batches,
                    self.val_positions,
                    self.device,
                    batch_size=self.cfg.batch_size,
                    seed=self.cfg.seed,
                    pairs=self.val_pairs,
                )
            row.update({f"val_{k}": v for k, v in metrics.items()})
            release_free_memory()
        row["samples_per_s"] = samples / seconds if seconds > 0 else 0.0
        row["epoch_seconds"] = seconds
        row.update(self.rate.columns(seconds))
        busy = self.busy.fraction(seconds)
        if busy is not None:  # a GPU: the share of the training window it computed
            row["device_busy"] = busy
        row["peak_memory_mb"] = peak_memory_mb(self.device)
        (log.info if self.ctx.is_main else log.debug)(
            "epoch %d/%d: %s", epoch + 1, self.cfg.epochs, epoch_line(row, self.cfg.best_metric)
        )
        return row

    def _stop_early(self) -> bool:
        stop = self.cfg.patience > 0 and self.state.bad_epochs >= self.cfg.patience
        if stop:
            log.info("early stop: no improvement in %d epochs", self.cfg.patience)
        return stop

    def _result(self) -> TrainResult:
        state = self.state
        if len(self.val_positions) and not state.best_epoch:
            raise NonFiniteError(
                f"validation {self.cfg.best_metric} was non-finite in every epoch, so there is "
                f"no model to keep; {self.step.fix}"
            )
        best = self.checkpointer.load_best()
        if best is None:
            with self.checkpointer.kept_weights():
                self.checkpointer.check_weights(f"step {state.step}")
                weights = {k: v.detach().cpu().clone() for k, v in model_state(self.model).items()}
            return TrainResult(weights, state.history, best_epoch=len(state.history))
        metrics = {k: v for k, v in best["row"].items() if k.startswith("val_")}
        return TrainResult(
            best["model"], state.history, state.best_epoch, metrics, self.cfg.best_metric
        )


def _check_options(
    cfg: TrainConfig, objective: Objective, ctx: DistContext, has_val: bool, sharded: bool
) -> None:
    """InputError, before any step, for options this run cannot honour: a best metric it does
    not measure, early stopping without validation samples, single-sample batches for the
    UniFrac loss, a global batch that does not divide over the ranks, EMA under FSDP."""
    if has_val:
        check_best_metric(cfg.best_metric, validation_metrics(objective), "in this run")
    elif cfg.patience > 0:  # it would stop after --patience epochs, improving on nothing
        raise InputError(
            f"--patience {cfg.patience}: early stopping needs validation samples and this "
            "run has none; set --val-fraction above 0 or mark samples val in --split, or "
            "drop --patience"
        )
    if objective.use_unifrac and cfg.batch_size < 2:
        raise InputError(f"--batch-size {cfg.batch_size}: the UniFrac loss needs pairs, use 2+")
    if not cfg.batch_tokens and cfg.batch_size % ctx.world_size:
        raise InputError(
            f"--batch-size {cfg.batch_size} is the global batch: it must divide evenly over "
            f"{ctx.world_size} processes"
        )
    if cfg.ema_decay and sharded:
        raise InputError(
            f"--ema-decay {cfg.ema_decay} with --fsdp: the moving average needs whole "
            "weights on each process; drop --fsdp (DDP) or --ema-decay"
        )
