"""One training step, shared by the Trainer and the profiler.

The forward (nucleotides masked for the objective's masked-nucleotide term; a frozen base's ASV
embeddings read, not encoded) and the objective's loss of its outputs, under autocast, and the
backward; at an accumulation boundary, gradient clipping, one host read of the step's loss terms
and gradient norm, and the AdamW (+ scheduler) step. A NaN or infinite term or norm stops every
rank with ``NonFiniteError`` before the optimizer step it would spoil.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from aam.data.batching import Batch
from aam.errors import NonFiniteError
from aam.models import mask_nucleotides
from aam.training.config import TrainConfig
from aam.training.device import autocast, unwrap
from aam.training.inference import model_outputs
from aam.training.objective import Objective
from aam.training.parallel.distributed import DistContext, all_reduce_sum, gradient_sync
from aam.training.parallel.fsdp import whole


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on matrices only (not on biases, norms or embeddings' 1-D tensors)."""
    decay, plain = [], []
    for param in model.parameters():
        if param.requires_grad:
            (decay if param.dim() >= 2 else plain).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0}]


def build_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW over the trainable parameters of the (unwrapped) model."""
    return torch.optim.AdamW(parameter_groups(unwrap(model), cfg.weight_decay), lr=cfg.lr)


def trainable(model: nn.Module) -> list[torch.Tensor]:
    return [p for p in model.parameters() if p.requires_grad]


def fix_hint(cfg: TrainConfig, predictor: bool) -> str:
    """The usual cures of a diverging run, with this run's flag values."""
    clip = cfg.max_grad_norm
    clipping = f"lower --max-grad-norm (now {clip:g})" if clip > 0 else "set --max-grad-norm 1"
    data = ", check the targets for extreme values" if predictor else ""
    return f"lower --lr (now {cfg.lr:g}){data}, or {clipping}"


def step_loss(
    model: nn.Module,
    objective: Objective,
    batch: Batch,
    generator: torch.Generator,
    asv_embeddings: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``objective``'s weighted loss of ``model``'s outputs for ``batch`` and its detached terms
    (on the device):
    with its masked-nucleotide term, the encoder reads MASK at nucleotides drawn with
    ``generator`` (and gets the originals for ASV identity)."""
    nuc_mask = tokens = None
    if objective.use_nucleotides:
        tokens = batch.unique_tokens
        nuc_mask = mask_nucleotides(tokens, objective.mask_rate, generator)[1]
    out = model_outputs(
        model, batch, tokens=tokens, nuc_mask=nuc_mask, asv_embeddings=asv_embeddings
    )
    return objective.loss(out, batch, nuc_mask)


@dataclass
class TrainStep:
    """A training step over one or more micro-batches: each call queues a micro-batch's forward
    and backward; at the accumulation boundary (``at_step``) the update clips the gradients,
    reads the step's loss terms and gradient norm from the device in one host read, checks them
    on every rank and steps AdamW (+ schedule). Nothing else waits for the device."""

    model: nn.Module
    objective: Objective
    optimizer: torch.optim.Optimizer
    cfg: TrainConfig
    device: torch.device
    ctx: DistContext = field(default_factory=DistContext)
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
    asv_embeddings: torch.Tensor | None = None  # a frozen base's, of every table ASV
    pending: list[dict[str, torch.Tensor]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.fix = fix_hint(self.cfg, self.objective.predictor)

    def __call__(
        self, batch: Batch, generator: torch.Generator, at_step: bool = True, where: str = ""
    ) -> list[dict[str, float]]:
        """Forward and backward of ``batch`` (on the device; ``generator``: its nucleotide
        masks), gradients summed over a step's micro-batches (DDP all-reduces them at the last);
        at ``at_step`` the update. The loss terms of each micro-batch the update read ([] before
        the boundary). ``where`` names the step in errors."""
        with gradient_sync(self.model, at_step):
            with autocast(self.device, self.cfg.precision):
                loss, terms = step_loss(
                    self.model, self.objective, batch, generator, self.asv_embeddings
                )
            (loss / self.cfg.grad_accum).backward()
        self.pending.append(terms)
        return self.update(where) if at_step else []

    def update(self, where: str) -> list[dict[str, float]]:
        """Clip the gradients, read the pending micro-batches' terms and the gradient norm
        (NonFiniteError on every rank if one is NaN or infinite on any rank: the weights keep
        their last good values), then step the optimizer and the scheduler; the terms read."""
        max_norm = self.cfg.max_grad_norm if self.cfg.max_grad_norm > 0 else math.inf
        norm = whole(torch.nn.utils.clip_grad_norm_(trainable(self.model), max_norm))
        pending, self.pending = self.pending, []
        terms = self._read(pending, norm, where)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scheduler is not None:
            self.scheduler.step()
        return terms

    def _read(
        self, pending: list[dict[str, torch.Tensor]], norm: torch.Tensor, where: str
    ) -> list[dict[str, float]]:
        """``pending``'s terms and ``norm`` as floats, in the step's one host read (with one
        tiny all-reduce of the non-finite flags, so every rank takes the same branch)."""
        values = torch.stack([v for terms in pending for v in terms.values()] + [norm.double()])
        flags = (~torch.isfinite(values)).double()
        if self.ctx.enabled:
            flags = all_reduce_sum(flags, self.ctx)
        host = torch.cat([values, flags]).tolist()
        local, bad = host[: len(values)], [flag > 0 for flag in host[len(values) :]]
        if bad[-1] and not any(bad[:-1]):  # DDP averaged the gradients: every rank sees it
            raise NonFiniteError(f"gradient norm is {local[-1]} at {where}; {self.fix}")
        read, at = [], 0
        for terms in pending:
            names = list(terms)
            read.append(dict(zip(names, local[at : at + len(names)], strict=True)))
            failed = [name for name, flag in zip(names, bad[at:], strict=False) if flag]
            at += len(names)
            if failed:
                self._raise(failed, read[-1], where)
        return read

    def _raise(self, failed: list[str], terms: dict[str, float], where: str) -> None:
        term = next((name for name in failed if name != "loss"), "loss")  # the culprit, not the sum
        value = terms[term]
        said = f"is {value}" if not math.isfinite(value) else "is non-finite on another rank"
        raise NonFiniteError(f"{term} {said} at {where}; {self.fix}")
