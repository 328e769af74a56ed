"""Benchmark: peak RSS per rank of 2-process CPU pretraining, DDP vs --fsdp.

Each run is `torchrun --standalone --nproc_per_node 2 -m aam pretrain ...` (gloo, one thread per
rank, one epoch, no validation split). While it runs, every worker's peak RSS (VmHWM in
/proc/PID/status, the counter getrusage's ru_maxrss reads) is polled and kept per LOCAL_RANK:
the whole run's, with the final checkpoint's save. history.tsv gives rank 0's getrusage peak at
the end of the training steps (before any save) and samples/s.

Each pair runs twice: with glibc's default malloc, which keeps most freed tensor memory in its
heap (RSS then shows the high-water mark of the heap, not of live tensors), and with
``MALLOC_MMAP_THRESHOLD_=65536``, which gives every allocation of 64 KiB or more its own mapping,
returned to the system when freed, so RSS follows the live tensors as a GPU's allocated-memory
peak would. Two models on seeded subsets of the oral data:

- ``reference``: the issue #3 settings of train_throughput.py (embedding 128, 4 heads, 2 layers
  per stack, token_limit 256, batch 8; 1.2M parameters), 400 samples;
- ``wide``: embedding 384, 6 heads, 4 layers per stack (21M parameters: 85 MB of weights, as much
  again of gradients, twice that of AdamW moments), token_limit 16, batch 8, 64 samples, so that
  the model and optimizer state outweigh the activations.

    python benchmarks/fsdp_memory.py [--data ../shared/data/oral]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pandas as pd
from train_throughput import DEFAULT_DATA, prepare

COMMON = ["--max-bp", "100", "--batch-size", "8", "--epochs", "1", "--val-fraction", "0"]
MODELS = {
    "reference": (
        400,
        ["--embedding-dim", "128", "--attention-heads", "4", "--layers", "2"]
        + ["--token-limit", "256"],
    ),
    "wide": (
        64,
        ["--embedding-dim", "384", "--attention-heads", "6", "--layers", "4"]
        + ["--token-limit", "16"],
    ),
}
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
ALLOCATORS = {"glibc default": {}, "mmap >= 64 KiB": {"MALLOC_MMAP_THRESHOLD_": "65536"}}


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise ValueError(f"no {field} in /proc/{pid}/status")


def _local_rank(pid: int) -> int:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return int(next(e for e in environ if e.startswith(b"LOCAL_RANK=")).split(b"=")[1])


def peak_rss_per_rank(args: list[str], env: dict[str, str]) -> dict[int, float]:
    """Run torchrun ``args`` with ``env`` added; the peak RSS (GB) of each worker, by local rank."""
    launcher = subprocess.Popen([*TORCHRUN, *args], env={**os.environ, **env})
    children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children")
    peaks: dict[int, float] = {}
    while launcher.poll() is None:
        try:
            for pid in map(int, children.read_text().split()):
                rank = _local_rank(pid)
                peaks[rank] = max(peaks.get(rank, 0.0), _status_kb(pid, "VmHWM") / 1024**2)
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            pass  # a worker starting or exiting; its peak was read on an earlier round
        time.sleep(0.1)
    if launcher.returncode != 0:
        raise SystemExit(f"torchrun {' '.join(args)} failed ({launcher.returncode})")
    return peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=Path("results/benchmarks/fsdp"))
    args = parser.parse_args()
    rows = []
    for model, (samples, flags) in MODELS.items():
        wd = args.workdir / model
        table, unifrac = prepare(args.data, samples, wd)
        for allocator, env in ALLOCATORS.items():
            for mode, extra in (("DDP", []), ("FSDP", ["--fsdp"])):
                out = wd / mode
                shutil.rmtree(out, ignore_errors=True)  # a fresh run, not a resume
                command = ["-m", "aam", "pretrain", "--table", table, "--unifrac", unifrac]
                command += [*COMMON, *flags, "--output-dir", str(out), "--no-progress", *extra]
                peaks = peak_rss_per_rank(command, env)
                epoch = pd.read_csv(out / "history.tsv", sep="\t").iloc[0]
                training = epoch["peak_memory_mb"] / 1024
                rows.append((model, allocator, mode, training, peaks, epoch["samples_per_s"]))
    print(f"machine: {platform.node()}, {os.cpu_count()} cores; date {date.today()}")
    print()
    print(
        "| model | malloc | mode | rank 0 peak RSS, training (GB) | whole run, rank 0 (GB) "
        "| whole run, rank 1 (GB) | samples/s |"
    )
    print("|---|---|---|---|---|---|---|")
    for model, allocator, mode, training, peaks, speed in rows:
        print(
            f"| {model} | {allocator} | {mode} | {training:.2f} | {peaks[0]:.2f} | "
            f"{peaks[1]:.2f} | {speed:.1f} |"
        )


if __name__ == "__main__":
    main()
