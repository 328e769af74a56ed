"""Each training rank on its own CPUs: of the CPUs the job gives the node's ranks (the affinity
mask torchrun's processes inherit), those local to the rank's GPU (the PCI device's
``local_cpulist`` in sysfs), shared evenly by the ranks whose GPUs have the same ones; without
that locality, an equal contiguous slice by local rank. On LUMI-G two GCDs share a NUMA node and
the allocation's cores, so this is the one-rank-per-GCD binding done in the process, whatever
srun bound (since Slurm 22.05 a job step no longer inherits --cpus-per-task)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SYSFS_PCI = Path("/sys/bus/pci/devices")


@dataclass(frozen=True)
class GpuLocality:
    """A GPU's PCI address and what sysfs says is near it (None where it says nothing)."""

    address: str  # domain:bus:device.function, e.g. 0000:c1:00.0
    cpus: frozenset[int] | None
    numa_node: int | None


def parse_cpulist(text: str) -> frozenset[int]:
    """``0-3,8,10-11`` -> {0, 1, 2, 3, 8, 10, 11}."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    return frozenset(cpus)


def gpu_locality(address: str, sysfs: Path = SYSFS_PCI) -> GpuLocality:
    """The CPUs and NUMA node sysfs lists for the PCI device ``address``."""
    device = sysfs / address
    try:
        cpus = parse_cpulist((device / "local_cpulist").read_text())
    except (OSError, ValueError):
        cpus = None
    try:
        node = int((device / "numa_node").read_text())
    except (OSError, ValueError):
        node = None
    return GpuLocality(address, cpus or None, node if node is not None and node >= 0 else None)


def rank_cpus(
    local_rank: int, local_world: int, allowed: list[int], near: list[frozenset[int] | None]
) -> list[int]:
    """The CPUs of ``local_rank`` of ``local_world`` ranks, from the node's ``allowed`` ones:
    its share of those near its GPU (``near[r]``: the CPUs near rank r's GPU, None unknown) with
    the ranks whose GPUs have the same ones, else an equal contiguous slice of ``allowed``."""
    allowed = sorted(allowed)
    if len(near) == local_world and near[local_rank]:
        mine = sorted(near[local_rank] & set(allowed))
        peers = [r for r, cpus in enumerate(near) if cpus and sorted(cpus & set(allowed)) == mine]
        if len(mine) >= len(peers):
            k, n = peers.index(local_rank), len(peers)
            return mine[k * len(mine) // n : (k + 1) * len(mine) // n]
    n = len(allowed)
    if n < local_world:  # fewer CPUs than ranks: they share them all
        return allowed
    return allowed[local_rank * n // local_world : (local_rank + 1) * n // local_world]


def bind(cpus: list[int]) -> None:
    """Restrict this process (and the threads it starts later) to ``cpus``."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)


def cpulist(cpus: list[int]) -> str:
    """{0, 1, 2, 5} -> ``0-2,5`` (as sysfs and taskset write them)."""
    runs: list[str] = []
    for cpu in sorted(cpus):
        if runs and cpu == int(runs[-1].rsplit("-", 1)[-1]) + 1:
            runs[-1] = f"{runs[-1].split('-')[0]}-{cpu}"
        else:
            runs.append(str(cpu))
    return ",".join(runs)
