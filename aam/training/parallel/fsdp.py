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

from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from aam.models.asv_encoder import ASVEncoder
from aam.models.layers import TransformerLayer
from aam.training.device import unwrap

UNITS = (TransformerLayer, ASVEncoder)
_loaded: list[SimpleNamespace] = []  # PyTorch's FSDP2 and DTensor, once shard_model imported them


def _fsdp() -> SimpleNamespace:
    """PyTorch's FSDP2 API, imported by the first ``shard_model``: 2 s of start-up (DTensor,
    distributed checkpoints) that every run without ``--fsdp`` skips. Until then no model is
    sharded, so the other functions take their unsharded path without it."""
    if not _loaded:
        from torch.distributed import device_mesh, tensor

        try:
            from torch.distributed.fsdp import FSDPModule, fully_shard
        except ImportError:  # torch < 2.6 (LUMI's image has 2.5): the same FSDP2, not yet public
            from torch.distributed._composable.fsdp import FSDPModule, fully_shard
        from torch.distributed.checkpoint import state_dict

        api = SimpleNamespace(
            FSDPModule=FSDPModule,
            fully_shard=fully_shard,
            init_device_mesh=device_mesh.init_device_mesh,
            DTensor=tensor.DTensor,
            distribute_tensor=tensor.distribute_tensor,
            get_model_state_dict=state_dict.get_model_state_dict,
            get_optimizer_state_dict=state_dict.get_optimizer_state_dict,
            set_model_state_dict=state_dict.set_model_state_dict,
            # GATHERED: on rank 0's CPU only; FULL: every rank passes the full dict
            GATHERED=state_dict.StateDictOptions(full_state_dict=True, cpu_offload=True),
            FULL=state_dict.StateDictOptions(full_state_dict=True),
        )
        _loaded.append(api)
    return _loaded[0]


def shard_model(model: nn.Module, device: torch.device, world_size: int) -> nn.Module:
    """``fully_shard`` every unit (innermost first), then the root, over ``world_size`` ranks."""
    fsdp = _fsdp()
    mesh = fsdp.init_device_mesh(device.type, (world_size,))
    for module in reversed(list(model.modules())):  # a descendant comes after its ancestor
        if isinstance(module, UNITS):
            fsdp.fully_shard(module, mesh=mesh)
    fsdp.fully_shard(model, mesh=mesh)
    # FSDP takes the first module to run forward as the root. Validation may call the
    # nucleotide encoder first (a run resumed at an epoch's end), so settle the root now.
    model._get_fsdp_state()._lazy_init()
    return model


def is_sharded(model: nn.Module) -> bool:
    """Whether ``model`` (under a torch.compile wrapper or not) is sharded by ``shard_model``."""
    return bool(_loaded) and isinstance(unwrap(model), _fsdp().FSDPModule)


def local_part(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a sharded tensor; any other tensor itself."""
    return tensor.to_local() if _loaded and isinstance(tensor, _fsdp().DTensor) else tensor


def whole(tensor: torch.Tensor) -> torch.Tensor:
    """A sharded tensor gathered (a partial one reduced) on every rank; any other tensor itself."""
    return tensor.full_tensor() if _loaded and isinstance(tensor, _fsdp().DTensor) else tensor


def model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The bare model's ``state_dict()``; under FSDP gathered to rank 0's CPU (empty elsewhere)."""
    bare = unwrap(model)
    if not is_sharded(bare):
        return bare.state_dict()
    fsdp = _fsdp()
    return fsdp.get_model_state_dict(bare, options=fsdp.GATHERED)


def optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """``optimizer.state_dict()`` of the unsharded model (parameters numbered in the order of
    the parameter groups); under FSDP gathered to rank 0's CPU (empty elsewhere)."""
    if not is_sharded(model):
        return optimizer.state_dict()
    bare = unwrap(model)
    # A forward without a backward (validation) leaves the root's parameters gathered, in
    # place of the shards the optimizer holds; free them, or the two would not match.
    bare.reshard()
    fsdp = _fsdp()
    named = fsdp.get_optimizer_state_dict(bare, optimizer, options=fsdp.GATHERED)
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
    fsdp = _fsdp()
    fsdp.set_model_state_dict(bare, dict(state), options=fsdp.FULL)  # it pops keys: a copy


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
    fsdp = _fsdp()
    if isinstance(param, fsdp.DTensor) and torch.is_tensor(value) and value.shape == param.shape:
        return fsdp.distribute_tensor(value.to(param.device), param.device_mesh, param.placements)
    return value
