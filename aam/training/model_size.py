"""The model a training run builds when its options leave its size open: the ``ModelConfig``
defaults on a GPU, the smaller ``CPU_MODEL`` on a CPU (the GPU-sized default took 931 s an
epoch of pretraining on a laptop CPU), said in the log with the option that chooses the other."""

from __future__ import annotations

import logging
from typing import Any

import torch

from aam.models.config import CPU_MODEL, LAYER_STACKS, ModelConfig, ModelOptions

log = logging.getLogger(__name__)
SIZE_OPTIONS = frozenset(CPU_MODEL) | frozenset(LAYER_STACKS)  # any one given: no CPU model


def sized_for(
    options: ModelOptions,
    device: torch.device,
    base: dict[str, Any] | None = None,
    say: bool = True,
) -> ModelOptions:
    """``options``, or on a CPU, when they give no size option (``SIZE_OPTIONS``) and there is
    no pretrained ``base`` (which fixes the size), ``CPU_MODEL`` with them, logged (when
    ``say``)."""
    given = options.names | ({"layers"} if options.layers is not None else set())
    if device.type != "cpu" or base is not None or given & SIZE_OPTIONS:
        return options
    chosen = {**CPU_MODEL, **options.chosen()}
    layers = chosen.pop("layers")
    sizes = ", ".join(f"{name} {value}" for name, value in CPU_MODEL.items())
    gpu = f"--embedding-dim {ModelConfig().embedding_dim}"
    (log.info if say else log.debug)(
        "on the CPU and no model size option given: training the CPU-sized model (%s); any "
        "size option, e.g. %s, trains the GPU-sized default instead (workflow: runs.<run>.model)",
        sizes,
        gpu,
    )
    return ModelOptions(ModelConfig(**chosen), frozenset(chosen), layers)
