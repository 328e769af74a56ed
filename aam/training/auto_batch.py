"""`--batch-size auto`: the largest batch whose predicted peak GPU memory fits a budget.

A probe (the command layer passes ``aam.profiling.probe.memory_curve``) measures peak memory
at a few batch sizes; memory is
about affine in the batch size, so ``choose_batch_size`` fits a line, raises it to lie on or
above every measured point (with the steeper of the fitted and the last measured slope), and
extrapolates, never past ``MAX_BATCH_SIZE`` per process. A rise too small to measure (a
flat, falling or subnormal slope) vouches for the measured sizes only. On a CPU
there is no device memory to fill: the default batch size is kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import torch
from torch import nn

from aam.errors import InputError
from aam.training.config import TrainConfig
from aam.training.device import gpu_memory_mb
from aam.training.inputs.batches import TrainBatches
from aam.training.objective import Objective
from aam.training.parallel.distributed import DistContext, broadcast_from_main

log = logging.getLogger(__name__)
MEMORY_FRACTION = 0.8  # of the GPU's total memory; the rest is headroom for longer samples
PROBE_SIZES = (2, 4, 8, 16)  # per process
CPU_BATCH_SIZE = 8  # TrainConfig's default
# The most samples per process `auto` extrapolates to (from a curve measured up to 16): 4,096x
# the probe's largest size, beyond any GPU's memory for this model; a bound, not a target.
MAX_BATCH_SIZE = 65_536
BYTE_MB = 1 / 2**20  # the smallest rise a memory probe can measure
# (model, objective, its batches, config, device, batch sizes) -> [(batch size, peak MB)],
# up to the first OOM
MemoryProbe = Callable[
    [nn.Module, Objective, TrainBatches, TrainConfig, torch.device, tuple[int, ...]],
    list[tuple[int, float]],
]


def choose_batch_size(
    curve: Sequence[tuple[int, float]],
    budget_mb: float,
    *,
    floor: int = 1,
    ceiling: int | None = None,
) -> int:
    """Largest batch size (at most ``ceiling``) whose conservatively predicted peak memory
    fits ``budget_mb``, from measured ``(batch size, peak MB)`` points; InputError when not
    even ``floor`` fits or the points are too few."""
    sizes = np.array([b for b, _ in curve], dtype=float)
    peaks = np.array([m for _, m in curve], dtype=float)
    if not (np.isfinite(sizes).all() and np.isfinite(peaks).all() and (sizes >= 1).all()):
        raise InputError(
            f"--batch-size auto: the memory probe measured {list(curve)}, not finite positive "
            "sizes and peaks; give a number to --batch-size"
        )
    if len(set(sizes.tolist())) < 2:
        raise InputError(
            f"--batch-size auto: {len(curve)} batch size(s) measured, need 2 to fit a memory "
            "curve (the larger ones ran out of memory?); give a number to --batch-size"
        )
    order = np.argsort(sizes)
    sizes, peaks = sizes[order], peaks[order]
    fitted = np.polyfit(sizes, peaks, 1)[0]
    slope = max(fitted, (peaks[-1] - peaks[-2]) / (sizes[-1] - sizes[-2]), 0.0)
    if slope * (sizes[-1] - sizes[0]) < max(1e-9 * np.abs(peaks).max(), BYTE_MB):
        slope = 0.0  # a rise below a byte or the peaks' round-off: no growth measured
    intercept = float(np.max(peaks - slope * sizes))  # the line lies on or above every point
    if slope > 0:
        predicted = min((budget_mb - intercept) / slope, MAX_BATCH_SIZE)
        best = int(np.floor(predicted * (1 + 1e-9)))  # 1e-9 relative: fit round-off
    else:  # no growth measured: vouch for the measured sizes only
        best = int(sizes.max()) if intercept <= budget_mb else 0
    if ceiling is not None:
        best = min(best, ceiling)
    if best < floor:
        raise InputError(
            f"--batch-size auto: {floor} samples are predicted to need "
            f"{intercept + slope * floor:.0f} MB, over the {budget_mb:.0f} MB budget; lower "
            "--token-limit, use --gradient-checkpointing, or give a number to --batch-size"
        )
    return best


def resolve_batch_size(
    model: nn.Module,
    objective: Objective,
    batches: TrainBatches,
    cfg: TrainConfig,
    device: torch.device,
    probe: MemoryProbe,
) -> int:
    """The global batch size ``auto`` stands for on ``device``, from ``probe``'s memory curve
    of training steps of ``objective`` on ``batches`` with ``cfg`` (every rank gets rank 0's)."""
    ctx = batches.ctx
    budget = gpu_memory_mb(device)
    if budget is None:
        log.info("--batch-size auto: on a CPU, the default batch size %d", CPU_BATCH_SIZE)
        return CPU_BATCH_SIZE
    outcome: tuple[int | None, str | None] = (None, None)
    if ctx.is_main:  # one probe on rank 0's GPU; every rank takes its outcome, error included
        # as one process: its steps must not wait on collectives the other ranks never join
        alone = DistContext()
        single = replace(batches, ctx=alone, pair_group=None)
        curve = probe(model, replace(objective, ctx=alone), single, cfg, device, PROBE_SIZES)
        floor = 2 if objective.use_unifrac else 1
        train = len(batches.study.subset("train"))
        try:
            per_rank = choose_batch_size(
                curve,
                MEMORY_FRACTION * budget,
                floor=floor,
                ceiling=max(floor, train // ctx.world_size),
            )
            outcome = (per_rank * ctx.world_size, None)
            log.info(
                "--batch-size auto: %d (%d per process; peak MB by batch size %s; budget %.0f MB)",
                outcome[0],
                per_rank,
                ", ".join(f"{b}: {m:.0f}" for b, m in curve),
                MEMORY_FRACTION * budget,
            )
        except InputError as err:
            outcome = (None, str(err))
    chosen, error = broadcast_from_main(outcome, ctx)
    if error is not None:
        raise InputError(error)
    return chosen
