"""The UniFrac distances of a batch: computed from its reads and the tree (the default), or
read from a user's matrix file by rows. Neither holds anything N x N.

A tree's distances run where the work is cheapest (``--unifrac-engine``): on the training GPU,
on its own stream, the whole batch resident there (``aam.unifrac.batch_device``); or on the
CPU, the numba kernel's tile pairs shared by a pool of threads. Threads, not processes: the
kernel releases the GIL and has no threading layer of its own, so the threads share the
table and tree index without copies, run beside torch's OpenMP threads and the prefetch thread
safely, and fork nothing. Under DDP/FSDP each rank sums the global batch's pairs over its
share of the tree's nodes, the ranks add their partial sums (``combine``, from
``aam.training.inputs.batches``) and each forms only its own samples' rows (``rows``): the work per
rank falls as 1/world.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from aam.data.samples import ReadDraw, SampleSet, sample_reads
from aam.errors import InputError
from aam.runtime.threads import ThreadPool, cpu_share
from aam.unifrac.batch import BatchUniFrac
from aam.unifrac.io import MatrixRows

if TYPE_CHECKING:  # torch only where a tensor is made: `aam split` reads studies without it
    import torch

    from aam.unifrac.batch_device import DeviceBatchUniFrac

log = logging.getLogger(__name__)
WHOLE = (0, 1)  # (rank, world): the whole tree
Combine = Callable[["torch.Tensor"], "torch.Tensor"]  # a tensor summed over the ranks


class PairDistances(Protocol):
    """Distances between any samples of a study, by study position."""

    shareable: bool  # whether ranks can compute partial sums of a block (``tensor``)
    sums_on_device: bool  # whether those partial sums live on the GPU (the gpu engine)

    def block(self, positions: np.ndarray, draw: ReadDraw | None = None) -> np.ndarray:
        """(B, B) float32 distances among ``positions`` (their reads as ``draw`` draws them)."""
        ...

    def on(
        self,
        engine: str,
        threads: int | None,
        device: torch.device,
        share: tuple[int, int] = WHOLE,
    ) -> PairDistances:
        """These distances computed on ``engine`` for training on ``device``, by rank
        ``share`` = (rank, world) when ranks share the work (``tensor(combine=...)``)."""
        ...

    def tensor(
        self,
        positions: np.ndarray,
        draw: ReadDraw | None = None,
        combine: Combine | None = None,
        rows: slice | None = None,
    ) -> torch.Tensor:
        """``block`` as a float32 tensor (on the engine's device); ``rows``: only those rows
        (a rank's own samples against all ``positions``). When ``shareable``, with ``combine``
        (every rank calls it at once): this rank's share of the work, the ranks' partial sums
        added by ``combine``."""
        ...


@dataclass(frozen=True)
class TreeDistances:
    """Exact UniFrac of each batch from its samples' reads and the tree (``BatchUniFrac``):
    follows the reads a batch sees, so a per-epoch rarefaction gets the distances of its draw.
    Serial on the CPU until ``on`` picks an engine."""

    samples: SampleSet
    unifrac: BatchUniFrac
    device_unifrac: DeviceBatchUniFrac | None = None  # the gpu engine
    pool: ThreadPool | None = None  # the cpu engine's threads (None: this thread)
    stream: torch.cuda.Stream | None = None  # the gpu engine's own stream
    rank_unifrac: BatchUniFrac | None = None  # this rank's node share (``combine``)
    rank_device_unifrac: DeviceBatchUniFrac | None = None  # the same on the gpu engine
    shareable = True

    @property
    def sums_on_device(self) -> bool:
        return self.device_unifrac is not None

    def on(
        self,
        engine: str,
        threads: int | None,
        device: torch.device,
        share: tuple[int, int] = WHOLE,
    ) -> TreeDistances:
        """These distances on ``engine`` (gpu, cpu, auto) for training on ``device``;
        ``threads``: the cpu engine's (None: this process's share of the CPUs beside a GPU, one
        thread beside CPU training, whose torch threads own the cores); ``share``: this rank's
        nodes for ``tensor(combine=...)``. InputError, before any step, for a gpu engine
        without a GPU or more threads than CPUs."""
        cpus = cpu_share()
        if threads is not None and threads > cpus:
            raise InputError(
                f"--unifrac-threads {threads}: this process may run on {cpus} CPUs; give at "
                f"most {cpus} (or leave it out)"
            )
        if engine == "gpu" and device.type != "cuda":
            raise InputError(
                f"--unifrac-engine gpu: training runs on {device}, not a GPU; use "
                "--unifrac-engine cpu or auto, or --device cuda on a GPU node"
            )
        if engine == "cpu" or device.type != "cuda":
            # Training on the CPU, torch's threads own the cores: one thread, overlapped.
            workers = threads or (cpus if device.type == "cuda" else 1)
            log.info("batch UniFrac on the CPU, %d thread(s)", workers)
            pool = None if workers == 1 else ThreadPool.of(workers, "aam-unifrac")
            return replace(
                self, pool=pool, rank_unifrac=self.unifrac.node_share(*share, device=False)
            )
        import torch

        from aam.unifrac.batch_device import DeviceBatchUniFrac

        log.info("batch UniFrac on %s", device)
        whole = DeviceBatchUniFrac.on(self.unifrac, device)
        mine = DeviceBatchUniFrac.on(self.unifrac.node_share(*share, device=True), device)
        return replace(
            self,
            device_unifrac=whole,
            rank_device_unifrac=mine,
            stream=torch.cuda.Stream(device),
        )

    def block(self, positions: np.ndarray, draw: ReadDraw | None = None) -> np.ndarray:
        if self.device_unifrac is None:
            return self._host(positions, draw, None)
        return self.tensor(positions, draw).cpu().numpy()

    def tensor(
        self,
        positions: np.ndarray,
        draw: ReadDraw | None = None,
        combine: Combine | None = None,
        rows: slice | None = None,
    ) -> torch.Tensor:
        import torch

        if self.device_unifrac is None:
            return torch.from_numpy(self._host(positions, draw, combine, rows))
        engine = self.device_unifrac if combine is None else self.rank_device_unifrac
        if self.stream is None:  # a torch device without streams (the CPU, in tests)
            return engine.distances(*self._reads(positions, draw), combine, rows).float()
        with torch.cuda.stream(self.stream):
            dist = engine.distances(*self._reads(positions, draw), combine, rows).float()
        self.stream.synchronize()  # ready when handed over; the step's stream may read it
        dist.record_stream(torch.cuda.default_stream(dist.device))  # freed after that read
        return dist

    def _host(
        self,
        positions: np.ndarray,
        draw: ReadDraw | None,
        combine: Combine | None = None,
        rows: slice | None = None,
    ) -> np.ndarray:
        """float32 distances (``rows`` of them) from the CPU kernel (this thread or the pool);
        with ``combine``, from this rank's node share and the ranks' partial sums."""
        import torch

        reads = self._reads(positions, draw)
        if combine is None:
            return self.unifrac.distances(*reads, pool=self.pool, rows=rows).astype(np.float32)
        dist = self.rank_unifrac.distances(
            *reads,
            pool=self.pool,
            combine=lambda a: combine(torch.from_numpy(a)).numpy(),
            rows=rows,
        )
        return dist.astype(np.float32)

    def _reads(self, positions: np.ndarray, draw: ReadDraw | None):
        """The CSR rows (pointers, table ASV indices, reads) of ``positions``."""
        reads = [sample_reads(self.samples, int(s), draw) for s in positions]
        ptr = np.concatenate([[0], np.cumsum([len(asvs) for asvs, _ in reads])])
        asv_idx = np.concatenate([asvs for asvs, _ in reads])
        counts = np.concatenate([counts for _, counts in reads])
        return ptr, asv_idx, counts


@dataclass(frozen=True)
class MatrixDistances:
    """A precomputed matrix (``--unifrac FILE``), read by rows as batches need them."""

    rows: MatrixRows
    row_of: np.ndarray  # study position -> matrix row
    shareable = False
    sums_on_device = False

    def on(
        self,
        engine: str,
        threads: int | None,
        device: torch.device,
        share: tuple[int, int] = WHOLE,
    ) -> MatrixDistances:
        """Read, not computed: the same on every engine and rank."""
        return self

    def block(self, positions: np.ndarray, draw: ReadDraw | None = None) -> np.ndarray:
        if draw is not None:
            raise ValueError("a precomputed matrix cannot follow a per-epoch draw of reads")
        return self.rows.block(self.row_of[np.asarray(positions)]).astype(np.float32)

    def tensor(
        self,
        positions: np.ndarray,
        draw: ReadDraw | None = None,
        combine: Combine | None = None,
        rows: slice | None = None,
    ) -> torch.Tensor:
        import torch

        if combine is not None:
            raise ValueError("a matrix's rows are read whole on every rank")
        block = self.block(positions, draw)  # square: its symmetry is checked
        return torch.from_numpy(block if rows is None else block[rows].copy())
