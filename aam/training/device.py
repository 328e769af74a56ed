"""Device and precision choices, explicit for CUDA, ROCm and CPU."""

from __future__ import annotations

import contextlib
import logging
import re

import torch
from torch import nn

from aam.device_names import TORCH_DEVICE
from aam.errors import InputError

log = logging.getLogger(__name__)


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` picks the GPU (CUDA or ROCm, both ``cuda`` in torch) when present, else CPU."""
    if not re.fullmatch(TORCH_DEVICE[0], name):
        raise InputError(f"--device {name}: use {TORCH_DEVICE[1]}")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError(f"--device {name}: torch sees no GPU here; use --device cpu or auto")
        if name == "cuda":
            name = f"cuda:{local_rank}"
    return torch.device(name)


def uses_bf16(device: torch.device, precision: str) -> bool:
    """Whether training autocasts to bf16: asked for, or ``auto`` on a GPU that supports it."""
    return precision == "bf16" or (
        precision == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported()
    )


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast when ``uses_bf16``; fp32 otherwise."""
    if not uses_bf16(device, precision):
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def unwrap(model: nn.Module) -> nn.Module:
    """The bare model under a DDP wrapper."""
    return getattr(model, "module", model)


def peak_memory_mb(device: torch.device) -> float:
    """Peak GPU memory allocated by torch, or the process's peak RSS on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def gpu_memory_mb(device: torch.device) -> float | None:
    """Total memory of the GPU ``device`` (MB); None on a CPU."""
    if device.type != "cuda":
        return None
    return torch.cuda.get_device_properties(device).total_memory / 2**20
