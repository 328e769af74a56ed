"""CPU threads: what a command asks for, capped at the CPUs this process may run on."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger(__name__)
Item = TypeVar("Item")
Result = TypeVar("Result")


def available_cpus() -> int:
    """CPUs this process may run on: its affinity mask (a SLURM job's allocation, taskset)
    where the OS has one, else every CPU of the machine."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class ThreadPool:
    """Worker threads for compiled kernels that release the GIL, and how many there are (the
    kernels cut their work by it)."""

    executor: ThreadPoolExecutor
    threads: int

    @classmethod
    def of(cls, threads: int, name: str = "aam") -> ThreadPool:
        return cls(ThreadPoolExecutor(threads, name), threads)


def run_each(
    pool: ThreadPool | None, task: Callable[[Item], Result], items: Iterable[Item]
) -> list[Result]:
    """``task`` of every item, in order: on ``pool``'s threads, or in this thread without one."""
    if pool is None:
        return [task(item) for item in items]
    return list(pool.executor.map(task, items))


RANK_CPUS = "AAM_RANK_CPUS"  # set once a rank is bound to its own CPUs (aam.runtime.affinity)


def cpu_share() -> int:
    """This process's share of ``available_cpus()``: torchrun's ranks on the node
    (LOCAL_WORLD_SIZE) share them, unless each rank was bound to its own (RANK_CPUS)."""
    ranks = 1 if os.environ.get(RANK_CPUS) else int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, available_cpus() // max(1, ranks))


def usable_threads(asked: int | None) -> int | None:
    """``asked`` capped at this process's share of ``available_cpus()`` (shared with the other
    ranks torchrun started on the node: LOCAL_WORLD_SIZE), with a note when capped; None stays
    None (the library's own default). More threads than CPUs (a profile's 24 threads per rank
    in a job given fewer cores, a login node) make torch's, OpenMP's and numba's workers spin
    waiting for one another: the same work then costs several times the CPU time."""
    if asked is None:
        return None
    share = cpu_share()
    if asked <= share:
        return asked
    ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    where = f"{available_cpus()} CPUs" + (f" shared by {ranks} ranks" if ranks > 1 else "")
    log.info("--threads %d: this process may run on %s; using %d", asked, where, share)
    return share
