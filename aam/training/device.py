"""Device, precision and compilation choices, explicit for CUDA, ROCm and CPU."""

from __future__ import annotations

import contextlib
import logging
import re

import torch
from torch import nn

from aam.devices import TORCH_DEVICE
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


def platform_name() -> str:
    """``rocm``, ``cuda`` or ``cpu``: which build of torch this is and what it can reach."""
    if torch.version.hip:
        return "rocm"
    return "cuda" if torch.cuda.is_available() else "cpu"


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast when asked (``auto``: on GPUs that support it); fp32 otherwise."""
    use_bf16 = precision == "bf16" or (
        precision == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported()
    )
    if not use_bf16:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


# Every batch has its own number of distinct ASVs, samples' widths and, with token batching,
# samples: compiled with static shapes, each new shape is a new graph (~90 s of compiling at
# batch 512 on an H100, measured 2026-11-25). Dynamic shapes give one graph per mode.
COMPILE_OPTIONS = {"dynamic": True}


def maybe_compile(model: nn.Module, enabled: bool) -> nn.Module:
    """``torch.compile`` the model, except on ROCm where its Triton path fails (skipped, warned)."""
    if not enabled:
        return model
    if torch.version.hip:
        log.warning("--compile: skipped on ROCm (torch.compile fails there); running eagerly")
        return model
    return torch.compile(model, **COMPILE_OPTIONS)


def compiled_graphs() -> int:
    """Graphs torch.compile has made in this process so far (each one a compilation)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def unwrap(model: nn.Module) -> nn.Module:
    """The bare model under DDP / torch.compile wrappers."""
    model = getattr(model, "module", model)
    return getattr(model, "_orig_mod", model)


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
