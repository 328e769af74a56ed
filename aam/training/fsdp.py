"""``--fsdp``: parameters, gradients and optimizer state sharded over the ranks with PyTorch's
``fully_shard`` (FSDP2), and the unsharded state dicts that checkpoints hold either way.

Every ``TransformerLayer`` and the nucleotide encoder (``ASVEncoder``, which evaluation and
the ASV-embedding cache call on their own) is a unit; the rest of the model belongs to the
root. A unit's parameters are all-gathered just before its forward and freed after it; its
gradients are reduce-scattered and averaged over the ranks, as DDP averages them. Every rank
must run the same units in the same order: under FSDP every rank also runs validation.

Checkpoints never hold shards: ``model_state`` and ``optimizer_state`` return what an unsharded
model and its ``torch.optim`` optimizer return (gathered to rank 0; collectives under FSDP, so
every rank calls them), and ``load_model_state`` / ``load_optimizer_state`` take that format.
A checkpoint written with ``--fsdp`` therefore resumes without it, and the other way round.

With ``--grad-accum`` every micro-batch still reduce-scatters its gradients (DDP skips the
all-reduce before a step's last batch, ``distributed.gradient_sync``): FSDP2's equivalent,
``set_requires_gradient_sync(False)``, keeps each rank's unsharded gradients until the last
micro-batch, as much gradient memory as DDP (what ``--fsdp`` is used to avoid), and changes
the rounding of the summed gradients.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, distribute_tensor

try:
    from torch.distributed.fsdp import FSDPModule, fully_shard
except ImportError:  # torch < 2.6 (LUMI's image has 2.5): the same FSDP2, not yet public
    from torch.distributed._composable.fsdp import FSDPModule, fully_shard

from aam.models.asv_encoder import ASVEncoder
from aam.models.layers import TransformerLayer
from aam.training.device import unwrap

UNITS = (TransformerLayer, ASVEncoder)
GATHERED = StateDictOptions(full_state_dict=True, cpu_offload=True)  # on rank 0's CPU only
FULL = StateDictOptions(full_state_dict=True)  # every rank passes the full dict


def shard_model(model: nn.Module, device: torch.device, world_size: int) -> nn.Module:
    """``fully_shard`` every unit (innermost first), then the root, over ``world_size`` ranks."""
    mesh = init_device_mesh(device.type, (world_size,))
    for module in reversed(list(model.modules())):  # a descendant comes after its ancestor
        if isinstance(module, UNITS):
            fully_shard(module, mesh=mesh)
    fully_shard(model, mesh=mesh)
    # FSDP takes the first module to run forward as the root. Validation may call the
    # nucleotide encoder first (a run resumed at an epoch's end), so settle the root now.
    model._get_fsdp_state()._lazy_init()
    return model


def is_sharded(model: nn.Module) -> bool:
    """Whether ``model`` (under a torch.compile wrapper or not) is sharded by ``shard_model``."""
    return isinstance(unwrap(model), FSDPModule)


def local_part(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a sharded tensor; any other tensor itself."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The bare model's ``state_dict()``; under FSDP gathered to rank 0's CPU (empty elsewhere)."""
    bare = unwrap(model)
    if not is_sharded(bare):
        return bare.state_dict()
    return get_model_state_dict(bare, options=GATHERED)


def optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """``optimizer.state_dict()`` of the unsharded model (parameters numbered in the order of
    the parameter groups); under FSDP gathered to rank 0's CPU (empty elsewhere)."""
    if not is_sharded(model):
        return optimizer.state_dict()
    bare = unwrap(model)
    # A forward without a backward (validation) leaves the root's parameters gathered, in
    # place of the shards the optimizer holds; free them, or the two would not match.
    bare.reshard()
    named = get_optimizer_state_dict(bare, optimizer, options=GATHERED)
    if not named:
        return {}
    order = [name for group in named["param_groups"] for name in group["params"]]
    number = {name: k for k, name in enumerate(order)}
    return {
        "state": {number[name]: state for name, state in named["state"].items()},
        "param_groups": [
            {**group, "params": [number[name] for name in group["params"]]}
            for group in named["param_groups"]
        ],
    }


def load_model_state(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load a full ``state_dict()`` (every rank passes it; under FSDP each keeps its shard)."""
    bare = unwrap(model)
    if not is_sharded(bare):
        bare.load_state_dict(state)
        return
    set_model_state_dict(bare, dict(state), options=FULL)  # it pops keys: give it a copy


def load_optimizer_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
) -> None:
    """Load an ``optimizer_state`` dict (every rank passes it; under FSDP each keeps its shard
    of the moments)."""
    if is_sharded(model):
        params = [param for group in optimizer.param_groups for param in group["params"]]
        moments = {
            k: {key: _shard_like(value, params[k]) for key, value in entry.items()}
            for k, entry in state["state"].items()
        }
        state = {**state, "state": moments}
    optimizer.load_state_dict(state)


def _shard_like(value: Any, param: torch.Tensor) -> Any:
    """``value`` sharded as ``param`` if it is a tensor of the parameter's shape (a moment)."""
    if isinstance(param, DTensor) and torch.is_tensor(value) and value.shape == param.shape:
        return distribute_tensor(value.to(param.device), param.device_mesh, param.placements)
    return value
