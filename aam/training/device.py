"""Device, precision and compilation choices, explicit for CUDA, ROCm and CPU."""

from __future__ import annotations

import contextlib
import logging
import re

import torch
from torch import nn

from aam.devices import TORCH_DEVICE
from aam.errors import InputError
from aam.models.layers import TransformerLayer

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


def compile_wanted(asked: bool | None, device: torch.device) -> bool:
    """Whether to compile: as asked, else (``None``) on CUDA only; never on ROCm (warned)."""
    if torch.version.hip:
        if asked:
            log.warning("--compile: skipped on ROCm (torch.compile fails there); running eagerly")
        return False
    return device.type == "cuda" if asked is None else asked


def compile_layers(model: nn.Module, backend: str = "inductor") -> nn.Module:
    """``torch.compile`` the forward of every transformer layer of ``model``, in place.

    Regional compilation: the layers share their code, so dynamo traces it once per mode
    (training, evaluation, with and without a mask) and every layer of every stack reuses the
    graphs, instead of one whole-model graph per mode (74 s against 18 s of compiling for the
    demo's tiny model on a CPU). The rest of the model (embeddings, pooling, heads, losses) runs
    eagerly. Only ``forward`` is compiled, so FSDP's and DDP's module hooks stay outside the
    graphs, and the state dict keeps its keys. ``backend="eager"`` traces without generating
    code (tests).
    """
    for module in model.modules():
        if isinstance(module, TransformerLayer):
            module.forward = torch.compile(module.forward, backend=backend, **COMPILE_OPTIONS)
    return model


def compiled_graphs() -> int:
    """Graphs torch.compile has made in this process so far (each one a compilation)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def compile_seconds() -> float:
    """Wall seconds torch.compile has spent compiling in this process so far."""
    from torch._dynamo.utils import calculate_time_spent

    return float(calculate_time_spent().get("total_wall_time", 0.0))


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
