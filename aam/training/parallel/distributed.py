"""Multi-process training under torchrun: process group set-up and the embedding gather.

Each rank encodes its slice of the global batch; ``gather`` returns every rank's sample
embeddings, so each rank's rows of the pairwise UniFrac loss (its samples against the whole
global batch, ``aam.training.losses.unifrac_row_loss``) add up to the loss of single-process
training over all pairs, and its gradient.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from aam.runtime.affinity import bind, cpulist, gpu_locality, rank_cpus
from aam.runtime.threads import RANK_CPUS


@dataclass(frozen=True)
class DistContext:
    """Rank layout of this process (world_size 1 without torchrun)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    # The group that carries host values (votes, rank 0's choices): gloo beside an NCCL/RCCL
    # default group, so they never wait on the device; None: the default group (gloo on CPUs).
    host: dist.ProcessGroup | None = field(default=None, compare=False, repr=False)

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device_type: str) -> DistContext:
    """Join the process group torchrun describes (NCCL/RCCL on GPUs, gloo on CPUs); on GPUs
    also a gloo group for host values (``DistContext.host``)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return DistContext()
    on_gpu = device_type == "cuda"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if on_gpu else "gloo")
    return DistContext(
        rank=dist.get_rank(),
        world_size=world,
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        host=dist.new_group(backend="gloo") if on_gpu else None,
    )


def bind_rank_cpus(on_gpu: bool) -> str | None:
    """Under torchrun with several ranks on the node: bind this rank to its own CPUs (near its
    GPU where sysfs says which, ``aam.runtime.affinity``), before any thread pool is sized;
    the line to log (its GPU, CPUs, NUMA node). None for a lone process."""
    local, world = (
        int(os.environ.get("LOCAL_RANK", "0")),
        int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
    )
    if world < 2 or not hasattr(os, "sched_getaffinity"):
        return None
    gpu, node, near = "none (CPU)", None, [None] * world
    if on_gpu and torch.cuda.device_count() >= world:
        places = [_pci_address(torch.cuda.get_device_properties(r)) for r in range(world)]
        localities = [gpu_locality(place) if place else None for place in places]
        near = [where.cpus if where else None for where in localities]
        node = localities[local].numa_node if localities[local] else None
        gpu = f"{torch.cuda.get_device_name(local)} ({places[local] or 'PCI address unknown'})"
    cpus = rank_cpus(local, world, sorted(os.sched_getaffinity(0)), near)
    bind(cpus)
    os.environ[RANK_CPUS] = cpulist(cpus)
    return f"local rank {local} of {world}: GPU {gpu}, CPUs {cpulist(cpus)}, NUMA node {node}"


def _pci_address(properties: object) -> str | None:
    """The PCI address sysfs names a GPU by, from torch's device properties (None where this
    torch does not give it)."""
    parts = [getattr(properties, f"pci_{name}_id", None) for name in ("domain", "bus", "device")]
    if any(part is None for part in parts):
        return None
    domain, bus, device = parts
    return f"{domain:04x}:{bus:02x}:{device:02x}.0"


def gather(local: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """Every rank's ``local`` (equal shapes) concatenated in rank order, without gradient."""
    if not ctx.enabled:
        return local.detach()
    parts = [torch.empty_like(local) for _ in range(ctx.world_size)]
    dist.all_gather(parts, local.detach().contiguous())
    return torch.cat(parts)


def all_reduce_sum(value: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """Sum of ``value`` over ranks (a copy; ``value`` itself is unchanged)."""
    if not ctx.enabled:
        return value
    total = value.detach().clone()
    dist.all_reduce(total)
    return total


def pair_group(ctx: DistContext, on_device: bool = False) -> dist.ProcessGroup | None:
    """A group of all ranks for the UniFrac partial sums of each batch (every rank calls this at
    the same point, with the same ``on_device``): batches are made in a prefetch thread, and a
    group of their own keeps those exchanges apart from the training step's collectives on the
    default group. ``on_device`` (the gpu engine's sums live on the GPU): NCCL (RCCL on ROCm),
    so they are added without leaving the device; else gloo, on the host."""
    if not ctx.enabled:
        return None
    return dist.new_group(backend="nccl" if on_device else "gloo")


def sum_shares(share: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """The sum over the ranks of ``group`` of each one's ``share``, on ``share``'s device, added
    in place where the group's backend reaches that device (NCCL on a GPU, gloo on the CPU),
    else through a host copy (a GPU tensor on a gloo group)."""
    through_host = share.device.type != "cpu" and dist.get_backend(group) == "gloo"
    total = share.cpu() if through_host else share
    dist.all_reduce(total, group=group)
    return total.to(share.device)


def any_rank(flags: list[bool], ctx: DistContext) -> list[bool]:
    """Each flag, true if it is true on any rank (so every rank takes the same branch); the
    votes travel on the host group: no device work to wait for (it ran after every step)."""
    if not ctx.enabled:
        return list(flags)
    votes = torch.tensor(flags, dtype=torch.float32)
    dist.all_reduce(votes, group=ctx.host)
    return (votes > 0).tolist()


def gradient_sync(model: torch.nn.Module, at_step: bool) -> AbstractContextManager:
    """DDP: gradients are all-reduced only at a step's last micro-batch (``no_sync`` before it;
    each rank sums its micro-batches' gradients, the last backward averages the sums)."""
    ddp = isinstance(model, torch.nn.parallel.DistributedDataParallel)
    return model.no_sync() if ddp and not at_step else nullcontext()


def rank_rows(size: int, ctx: DistContext) -> slice:
    """This rank's contiguous share of a global batch of ``size`` (it must divide evenly)."""
    share = size // ctx.world_size
    return slice(ctx.rank * share, (ctx.rank + 1) * share)


def rank_slice(indices, ctx: DistContext):
    """This rank's samples of a global batch (``rank_rows``)."""
    return indices[rank_rows(len(indices), ctx)]


def broadcast_from_main(value, ctx: DistContext):
    """Rank 0's ``value`` (any picklable object) on every rank."""
    if not ctx.enabled:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0, group=ctx.host)
    return box[0]
