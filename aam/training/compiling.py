"""What torch.compile covers in a training run (``--compile``), what it cost, and its cache.

The cache: inductor's and Triton's compiled code under ``TORCHINDUCTOR_CACHE_DIR`` (torch's
default: a folder of /tmp). The workflow points every job at one folder of its work directory
(``compile_cache`` in the config), so the second and later jobs of a sweep, fold, ensemble or
learning curve on the same model shape load the code instead of generating it; torch writes
each entry to a temporary name and renames it, so concurrent jobs may share the folder.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch
from torch import nn

from aam.device_names import COMPILE_MODES
from aam.errors import InputError
from aam.models.layers import TransformerLayer, pin_sdpa_backends

log = logging.getLogger(__name__)


# Every batch has its own number of distinct ASVs, samples' widths and, with token batching,
# samples: compiled with static shapes, each new shape is a new graph (~90 s of compiling at
# batch 512 on an H100, measured 2026-11-25). Dynamic shapes give one graph per mode.
COMPILE_OPTIONS = {"dynamic": True}
# The whole model against the layers alone: `aam pretrain` samples/s of each at batch 2,048 on
# 100,000 samples on an H200, and the seconds more the whole model takes to compile cold (98 s
# against 18 s), benchmarks/README.md ("Compiling the whole model", 2026-11-28).
LAYERS_SAMPLES_PER_S, MODEL_SAMPLES_PER_S, MODEL_EXTRA_COMPILE_S = 5_668.0, 16_674.0, 80.0
# The planned samples (epochs x training samples) from which the whole model's faster steps
# repay its extra compiling: ~0.69 M.
MODEL_PAYS_FROM = round(
    MODEL_EXTRA_COMPILE_S / (1 / LAYERS_SAMPLES_PER_S - 1 / MODEL_SAMPLES_PER_S)
)


# What each mode that ``compile_mode`` returns compiles, for the log.
COMPILED = {
    "model": "the whole model, compiled at its first calls",
    "layers": "the transformer layers, compiled at their first calls",
    "off": "off, the model runs eagerly",
}


def compile_mode(asked: str, device: torch.device, planned_samples: int) -> tuple[str, str]:
    """What to compile (``model``, ``layers`` or ``off``) and why, for a run of
    ``planned_samples`` on ``device``: as asked, except ``auto``, which never compiles on a
    CPU or on ROCm (the seeds' Triton failures) and on CUDA compiles the whole model from
    ``MODEL_PAYS_FROM`` planned samples."""
    if asked not in COMPILE_MODES:
        raise InputError(f"--compile {asked}: use one of {', '.join(COMPILE_MODES)}")
    if asked != "auto":
        if torch.version.hip and asked != "off":
            log.warning("--compile %s on ROCm: asked for; torch.compile has failed there", asked)
        return asked, "asked for"
    if device.type != "cuda":
        return "off", f"auto on {device.type}: compiling costs more than it saves there"
    if torch.version.hip:
        return "off", "auto on ROCm: torch.compile's Triton path has failed there"
    if planned_samples >= MODEL_PAYS_FROM:
        return "model", f"auto: {planned_samples:,} planned samples >= {MODEL_PAYS_FROM:,}"
    return "layers", f"auto: {planned_samples:,} planned samples < {MODEL_PAYS_FROM:,}"


def compile_as(model: nn.Module, mode: str, device: torch.device) -> nn.Module:
    """``model`` compiled as ``mode`` (``model``, ``layers`` or ``off``) says, in place."""
    if mode == "model":
        return compile_model(model, device)
    if mode == "layers":
        return compile_layers(model, device)
    return model


def compile_model(model: nn.Module, device: torch.device, backend: str = "inductor") -> nn.Module:
    """``torch.compile`` the forward of ``model`` whole, in place (one graph per mode: training,
    evaluation, with and without masks; the forward reads nothing back to the host). Only
    ``forward`` is compiled, so DDP's module hooks stay outside and the state dict keeps its
    keys. The masked nucleotides' logits have a data-dependent count, captured in the graph.
    The attention kernels are pinned for the process (``pin_sdpa_backends``)."""
    import torch._dynamo

    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    pin_sdpa_backends(model, device)
    model.forward = torch.compile(model.forward, backend=backend, **COMPILE_OPTIONS)
    return model


def compile_layers(model: nn.Module, device: torch.device, backend: str = "inductor") -> nn.Module:
    """``torch.compile`` the forward of every transformer layer of ``model``, in place.

    Regional compilation: the layers share their code, so dynamo traces it once per mode
    (training, evaluation, with and without a mask) and every layer of every stack reuses the
    graphs, instead of one whole-model graph per mode (74 s against 18 s of compiling for the
    demo's tiny model on a CPU). The rest of the model (embeddings, pooling, heads, losses) runs
    eagerly. Only ``forward`` is compiled, so FSDP's and DDP's module hooks stay outside the
    graphs, and the state dict keeps its keys. ``backend="eager"`` traces without generating
    code (tests).
    """
    pin_sdpa_backends(model, device)
    for module in model.modules():
        if isinstance(module, TransformerLayer):
            module.forward = torch.compile(module.forward, backend=backend, **COMPILE_OPTIONS)
    return model


def compiled_graphs() -> int:
    """Graphs torch.compile has made in this process so far (each one a compilation)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def graph_breaks() -> int:
    """Graph breaks torch.compile has met in this process so far (0: each mode one graph)."""
    from torch._dynamo.utils import counters

    return int(sum(counters["graph_break"].values()))


def compile_seconds() -> float:
    """Wall seconds torch.compile has spent compiling in this process so far."""
    from torch._dynamo.utils import calculate_time_spent

    return float(calculate_time_spent().get("total_wall_time", 0.0))


def cache_dir() -> Path:
    """The folder inductor (and Triton, unless ``TRITON_CACHE_DIR`` says otherwise) caches in."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir

    return Path(inductor_cache_dir())


def cache_use() -> dict[str, int]:
    """This process's lookups of the compile caches so far: FX graphs (inductor's generated
    code) and AOT autograd (the traced forward and backward), hits and misses of each."""
    from torch._dynamo.utils import counters

    inductor, aot = counters["inductor"], counters["aot_autograd"]
    return {
        "graph_hits": int(inductor["fxgraph_cache_hit"]),
        "graph_misses": int(inductor["fxgraph_cache_miss"]),
        "autograd_hits": int(aot["autograd_cache_hit"]),
        "autograd_misses": int(aot["autograd_cache_miss"]),
        "autograd_bypasses": int(aot["autograd_cache_bypass"]),
    }


def folder_mb(folder: Path) -> float:
    """Megabytes of the files under ``folder`` (0 if it does not exist)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += (Path(root) / name).stat().st_size
            except OSError:  # removed by a concurrent job meanwhile
                pass
    return total / 2**20


def compile_summary() -> str:
    """One log line of this process's compiling: graphs, breaks, seconds, the cache's use."""
    use, folder = cache_use(), cache_dir()
    return (
        f"torch.compile: {compiled_graphs()} graph(s), {graph_breaks()} graph break(s), "
        f"compiled in {compile_seconds():.0f} s; cache {folder} ({folder_mb(folder):.0f} MB): "
        f"graphs {use['graph_hits']} hit(s) {use['graph_misses']} miss(es), autograd "
        f"{use['autograd_hits']} hit(s) {use['autograd_misses']} miss(es) "
        f"{use['autograd_bypasses']} bypass(es)"
    )
