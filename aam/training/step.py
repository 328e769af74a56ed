"""One training step, shared by the Trainer and the profiler.

The forward (nucleotides masked for the objective's masked-nucleotide term; a frozen base's ASV
embeddings read, not encoded) and the objective's loss of its outputs, under autocast; a NaN or
infinite term stops every rank before the backward; at an accumulation boundary, gradient
clipping, a finite-norm check and the AdamW (+ scheduler) step. A ``NonFiniteError`` is raised
before the optimizer step it would spoil.
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
from aam.training.distributed import DistContext, any_rank
from aam.training.inference import model_outputs
from aam.training.objective import Objective


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
) -> tuple[torch.Tensor, dict[str, float]]:
    """``objective``'s weighted loss of ``model``'s outputs for ``batch`` and its detached terms:
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
    """A training step in two halves: ``loss`` of a micro-batch (forward), and ``update`` at
    an accumulation boundary (clip, AdamW, schedule); ``__call__`` runs a whole step."""

    model: nn.Module
    objective: Objective
    optimizer: torch.optim.Optimizer
    cfg: TrainConfig
    device: torch.device
    ctx: DistContext = field(default_factory=DistContext)
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
    asv_embeddings: torch.Tensor | None = None  # a frozen base's, of every table ASV

    def __post_init__(self) -> None:
        self.fix = fix_hint(self.cfg, self.objective.predictor)

    def __call__(
        self, batch: Batch, generator: torch.Generator, at_step: bool = True, where: str = ""
    ) -> dict[str, float]:
        """Train on ``batch`` (on the device); return its loss terms. ``where`` names the step
        in errors."""
        loss, terms = self.loss(batch, generator, where)
        (loss / self.cfg.grad_accum).backward()
        if at_step:
            self.update(where)
        return terms

    def loss(
        self, batch: Batch, generator: torch.Generator, where: str
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The objective's loss of ``batch`` under autocast and its terms (``generator``: the
        nucleotide masks); NonFiniteError on every rank if a term is NaN or infinite on any rank
        (before any rank's backward)."""
        with autocast(self.device, self.cfg.precision):
            loss, terms = step_loss(
                self.model, self.objective, batch, generator, self.asv_embeddings
            )
        self._check_terms(terms, where)
        return loss, terms

    def update(self, where: str) -> None:
        """Clip the gradients (NonFiniteError if their norm is not finite), then step the
        optimizer and the scheduler."""
        max_norm = self.cfg.max_grad_norm if self.cfg.max_grad_norm > 0 else math.inf
        norm = float(torch.nn.utils.clip_grad_norm_(trainable(self.model), max_norm))
        if not math.isfinite(norm):  # DDP averaged the gradients: every rank sees the same
            raise NonFiniteError(f"gradient norm is {norm} at {where}; {self.fix}")
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scheduler is not None:
            self.scheduler.step()

    def _check_terms(self, terms: dict[str, float], where: str) -> None:
        names = sorted(terms)
        # one tiny all-reduce, so no rank waits in a backward the others skip
        bad = any_rank([not math.isfinite(terms[name]) for name in names], self.ctx, self.device)
        failed = [name for name, flag in zip(names, bad, strict=True) if flag]
        if not failed:
            return
        term = next((name for name in failed if name != "loss"), "loss")  # the culprit, not the sum
        local = terms[term]
        value = f"is {local}" if not math.isfinite(local) else "is non-finite on another rank"
        raise NonFiniteError(f"{term} {value} at {where}; {self.fix}")
