"""The measured training segment of `aam profile`, and the rocprof command lines.

``profile_training`` builds the study and a ``SequenceEncoder`` as `aam pretrain` does, runs a
few training steps under torch.profiler for the kernel table, then sweeps batch sizes x
attention backends for peak memory and samples/s. A training step is the Trainer's
``TrainStep``: masked nucleotides + UniFrac loss (autocast per ``precision``) -> backward ->
clipping -> AdamW step.
"""

from __future__ import annotations

import copy
import logging
import os
import resource
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from aam.errors import InputError
from aam.models import ModelConfig, SequenceEncoder, effective_attn_implementation
from aam.models.layers import available_backends, set_attn_implementation
from aam.profiling import KERNEL_FILE, MEMORY_FILE, THROUGHPUT_FILE
from aam.profiling.kernels import from_key_averages
from aam.runtime.atomic import atomic_output, write_json
from aam.training.config import TrainConfig, UniFracOptions
from aam.training.device import resolve_device
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import UniFracSource, load_study
from aam.training.objective import Objective
from aam.training.step import TrainStep, build_optimizer

log = logging.getLogger(__name__)
ROCPROF_PREFIX = "aam"


def rocprofv3_command(out_dir: str | os.PathLike[str], argv: list[str]) -> list[str]:
    """``rocprofv3`` kernel trace + stats of ``argv`` as CSV into ``out_dir``."""
    return [
        "rocprofv3",
        "--kernel-trace",
        "--stats",
        "-d",
        str(out_dir),
        "-o",
        ROCPROF_PREFIX,
        "--output-format",
        "csv",
        "--",
        *argv,
    ]


def rocprof_v1_command(out_dir: str | os.PathLike[str], argv: list[str]) -> list[str]:
    """Legacy ``rocprof --stats`` (ROCm <= 6.x): writes ``out_dir/results.stats.csv``."""
    return ["rocprof", "--stats", "-o", str(Path(out_dir) / "results.csv"), *argv]


def model_config(**options: Any) -> ModelConfig:
    """ModelConfig from the command's model options (``layers`` sets every stack)."""
    return ModelConfig.from_options(options)


@dataclass
class ProfileResult:
    """What ``profile_training`` measured (``kernels`` is None when rocprof does the kernels)."""

    kernels: pd.DataFrame | None
    memory: dict[str, Any]
    throughput: dict[str, Any]
    files: list[Path] = field(default_factory=list)


class _RssSampler:
    """Highest resident set size (MB) of this process while the block runs (CPU runs)."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval, self.peak, self._stop = interval, 0.0, threading.Event()

    @staticmethod
    def current() -> float:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.current())
            self._stop.wait(self.interval)

    def __enter__(self) -> _RssSampler:
        self.baseline = self.peak = self.current()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.current())


def device_memory_mb(device: torch.device) -> float:
    """Total memory of the GPU, or of the host for CPU runs."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory / 2**20
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20


class _Segment:
    """A model + optimizer + objective that can run training steps at any batch size."""

    def __init__(
        self,
        model: torch.nn.Module,
        objective: Objective,
        batches: TrainBatches,
        cfg: TrainConfig,
        device: torch.device,
    ) -> None:
        self.device = device
        self.model = model.to(device)
        self.model.train()
        self.batches = batches
        self.optimizer = build_optimizer(self.model, cfg)
        self.train_step = TrainStep(
            self.model,
            objective,
            self.optimizer,
            cfg,
            device,
            asv_embeddings=batches.asv_embeddings,
        )
        self.train = batches.study.subset("train")
        if len(self.train) < 2:
            self.train = np.arange(len(batches.study.samples))
        self.rng = np.random.default_rng(cfg.seed)
        self.generator = torch.Generator(device=device).manual_seed(cfg.seed)

    @classmethod
    def pretraining(
        cls, study, mcfg: ModelConfig, cfg: TrainConfig, device: torch.device
    ) -> _Segment:
        """A fresh seeded ``SequenceEncoder`` pretraining on ``study``."""
        torch.manual_seed(cfg.seed)
        objective = Objective.of(cfg, predictor=False, study=study)
        batches = TrainBatches(
            study, mcfg.token_limit, cfg.asv_sampling, distances=objective.use_unifrac
        )
        return cls(SequenceEncoder(mcfg), objective, batches, cfg, device)

    def step(self, batch_size: int) -> None:
        n = len(self.train)
        pick = self.rng.choice(n, batch_size, replace=batch_size > n)
        batch = self.batches.batch(self.train[pick], self.rng).to(self.device)
        self.train_step(batch, self.generator, where=f"a profiled step of batch size {batch_size}")

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _measure(seg: _Segment, batch_size: int, steps: int) -> dict[str, Any]:
    """Peak memory and samples/s of ``steps`` steps (after one untimed warm-up step)."""
    seg.step(batch_size)
    seg.sync()
    row: dict[str, Any] = {"batch_size": batch_size, "steps": steps}
    if seg.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(seg.device)
        base = torch.cuda.memory_allocated(seg.device) / 2**20
        started = time.perf_counter()
        for _ in range(steps):
            seg.step(batch_size)
        seg.sync()
        seconds = time.perf_counter() - started
        peak = torch.cuda.max_memory_allocated(seg.device) / 2**20
        row.update(peak_memory_mb=peak, memory_delta_mb=peak - base, memory_kind="gpu_allocated")
    else:
        with _RssSampler() as rss:
            started = time.perf_counter()
            for _ in range(steps):
                seg.step(batch_size)
            seconds = time.perf_counter() - started
        process_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        row.update(
            peak_memory_mb=rss.peak,
            memory_delta_mb=rss.peak - rss.baseline,
            memory_kind="cpu_rss",
            process_peak_rss_mb=process_peak,
        )
    row.update(
        seconds=seconds,
        seconds_per_step=seconds / steps,
        samples_per_s=batch_size * steps / seconds if seconds > 0 else 0.0,
    )
    return row


def memory_curve(
    model: torch.nn.Module,
    objective: Objective,
    batches: TrainBatches,
    cfg: TrainConfig,
    device: torch.device,
    batch_sizes: tuple[int, ...],
    steps: int = 1,
) -> list[tuple[int, float]]:
    """``(batch size, peak memory MB)`` of training steps (``objective`` on ``batches`` with
    ``cfg``) of a copy of ``model`` (the model itself is untouched), up to the first size that
    runs out of memory."""
    seg = _Segment(copy.deepcopy(model), objective, batches, cfg, device)
    curve = []
    for batch_size in batch_sizes:
        try:
            curve.append((batch_size, _measure(seg, batch_size, steps)["peak_memory_mb"]))
        except torch.cuda.OutOfMemoryError:
            break
    del seg
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return curve


def kernel_table(seg: _Segment, batch_size: int, steps: int) -> pd.DataFrame:
    """torch.profiler kernel table of ``steps`` training steps (after one warm-up step)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if seg.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)  # HIP on ROCm (Kineto/roctracer)
    seg.step(batch_size)
    seg.sync()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            seg.step(batch_size)
        seg.sync()
    return from_key_averages(prof.key_averages())


def profile_training(
    table: str | Path,
    unifrac: str | Path | None = None,
    *,
    tree: str | Path | None = None,
    steps: int = 3,
    batch_sizes: tuple[int, ...] | list[int] = (8,),
    backends: list[str] | None = None,
    device: str | torch.device = "auto",
    precision: str = "fp32",
    seed: int = 42,
    kernels: bool = True,
    sweep: bool = True,
    output_dir: str | Path | None = None,
    **model_kwargs: Any,
) -> ProfileResult:
    """Profile ``steps`` pretraining steps on ``table`` + UniFrac (from ``tree`` per batch,
    or a ``unifrac`` matrix).

    The kernel table (``kernels``) uses the first batch size and backend; the sweep
    (``sweep``) measures every batch size x backend (``backends`` default: those available on
    the device; on CPU ``math`` and ``auto``). ``model_kwargs`` are ``ModelConfig`` fields.
    With ``output_dir``, writes ``kernel_stats.csv``, ``memory.json`` and ``throughput.json``.
    """
    if steps < 1:
        raise InputError(f"--steps {steps}: must be at least 1")
    batch_sizes = list(batch_sizes)
    if not batch_sizes or min(batch_sizes) < 2:
        raise InputError(f"--batch-sizes {batch_sizes}: the UniFrac loss needs pairs, use 2+")
    dev = device if isinstance(device, torch.device) else resolve_device(device)
    backends = list(backends or available_backends(dev))
    mcfg = model_config(**model_kwargs)
    cfg = TrainConfig(batch_size=batch_sizes[0], precision=precision, seed=seed)
    study = _pretraining_study(table, unifrac, tree, mcfg.max_bp, seed)
    seg = _Segment.pretraining(study, mcfg, cfg, dev)
    meta = {
        "device": str(dev),
        "device_name": _device_name(dev),
        "torch": torch.__version__,
        "hip": torch.version.hip,
        "precision": precision,
        "steps": steps,
        "samples": len(study.samples),
        "model": mcfg.to_dict(),
    }

    table_df = None
    if kernels:
        set_attn_implementation(seg.model, backends[0])
        table_df = kernel_table(seg, batch_sizes[0], steps)
    rows = _sweep(seg, backends, batch_sizes, steps, dev) if sweep else []
    result = _result(meta, rows, table_df, device_memory_mb(dev))
    if output_dir is not None:
        result.files = write_results(result, output_dir)
    return result


MEMORY_KEYS = (
    "backend",
    "effective_backend",
    "batch_size",
    "peak_memory_mb",
    "memory_delta_mb",
    "memory_kind",
    "process_peak_rss_mb",
    "error",
)
SPEED_KEYS = (
    "backend",
    "effective_backend",
    "batch_size",
    "steps",
    "seconds",
    "seconds_per_step",
    "samples_per_s",
    "error",
)


def _sweep(
    seg: _Segment, backends: list[str], batch_sizes: list[int], steps: int, dev: torch.device
) -> list[dict[str, Any]]:
    """One row per backend x batch size: its measurement, or the first line of its error (an
    out-of-memory batch size ends its row, not the sweep)."""
    rows = []
    for backend in backends:
        set_attn_implementation(seg.model, backend)
        for bs in batch_sizes:
            row = {
                "backend": backend,
                "effective_backend": effective_attn_implementation(backend, dev),
            }
            try:
                row.update(_measure(seg, bs, steps))
                row["error"] = None
            except (RuntimeError, torch.cuda.OutOfMemoryError) as err:
                row.update(batch_size=bs, steps=steps, error=str(err).splitlines()[0])
                seg.optimizer.zero_grad(set_to_none=True)
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
            log.info("%s batch %d: %s", backend, bs, _summary(row))
            rows.append(row)
    return rows


def _result(
    meta: dict[str, Any], rows: list[dict], table_df: pd.DataFrame | None, memory_mb: float
) -> ProfileResult:
    """The kernel table and the sweep's rows as memory.json's and throughput.json's records."""
    memory = {
        **meta,
        "device_memory_mb": memory_mb,
        "rows": [{k: r[k] for k in MEMORY_KEYS if k in r} for r in rows],
    }
    throughput = {**meta, "rows": [{k: r[k] for k in SPEED_KEYS if k in r} for r in rows]}
    return ProfileResult(table_df, memory, throughput)


def _summary(row: dict) -> str:
    if row.get("error"):
        return f"failed ({row['error']})"
    return f"{row['samples_per_s']:.1f} samples/s, peak {row['peak_memory_mb']:.0f} MB"


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return platform.processor() or platform.machine()


def write_results(result: ProfileResult, output_dir: str | Path) -> list[Path]:
    """kernel_stats.csv (when measured), memory.json, throughput.json, each atomically."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if result.kernels is not None:
        with atomic_output(out / KERNEL_FILE) as tmp:
            result.kernels.to_csv(tmp, index=False)
        written.append(out / KERNEL_FILE)
    for name, payload in ((MEMORY_FILE, result.memory), (THROUGHPUT_FILE, result.throughput)):
        write_json(out / name, payload, default=str)
        written.append(out / name)
    return written


def _pretraining_study(
    table: str | Path, unifrac: str | Path | None, tree: str | Path | None, max_bp: int, seed: int
):
    """The study profiled steps pretrain on: UniFrac from ``tree`` or the ``unifrac`` matrix."""
    if (tree is None) == (unifrac is None):
        raise InputError("profiling needs one of --tree and --unifrac")
    return load_study(
        Path(table),
        max_bp=max_bp,
        unifrac=UniFracSource(
            tree=Path(tree) if tree is not None else None,
            matrix=Path(unifrac) if unifrac is not None else None,
            options=UniFracOptions(),
        ),
        seed=seed,
    )


def run_steps_only(
    table: str | Path,
    unifrac: str | Path | None = None,
    *,
    tree: str | Path | None = None,
    steps: int,
    batch_size: int,
    backend: str = "auto",
    device: str = "auto",
    precision: str = "fp32",
    seed: int = 42,
    **model_kwargs: Any,
) -> None:
    """Just ``steps`` training steps (plus one warm-up): the process rocprof traces."""
    dev = resolve_device(device)
    mcfg = model_config(**model_kwargs)
    cfg = TrainConfig(batch_size=batch_size, precision=precision, seed=seed)
    study = _pretraining_study(table, unifrac, tree, mcfg.max_bp, seed)
    seg = _Segment.pretraining(study, mcfg, cfg, dev)
    set_attn_implementation(seg.model, backend)
    for _ in range(steps + 1):
        seg.step(batch_size)
    seg.sync()
