"""Pretraining at GPU speed (issue 38): the batch UniFrac alone, and `aam pretrain` end to end.

Runs on any device; on a GPU it fills the whole table. Two parts, each writing JSON lines:

    # a batch's UniFrac alone, per engine and batch size, and one rank's share at each world
    python benchmarks/gpu_pretrain.py unifrac --data data/oral-full --out unifrac.jsonl
    # `aam pretrain` samples/s, GPU busy and peak memory per batch size and UniFrac source
    python benchmarks/gpu_pretrain.py train --data data/oral-full --out train.jsonl

Engines of the first part: ``cpu1`` (the kernel in one thread, as before issue 38), ``cpuN``
(a pool of all this process's CPUs), ``gpu`` (``aam.unifrac.batch_device``, when a GPU is
there). Batches are seeded draws of the table's samples (with replacement above its size;
`--seed`, else the batch size).
Times are the minimum of ``--repeats`` calls after one warm-up; a GPU call is synchronized.
``parallel_ceiling``: N one-thread calls side by side on N threads against one alone, what
perfectly parallel work of this kind gains on these CPUs (the bound for ``cpuN``).
World rows time every rank's share of one batch on the fastest engine (its node share: the
spread, the pair sums over its nodes and its own samples' rows of the distances; the exchange
of the partial sums between ranks is not in it), the ranks' calls interleaved in each repeat,
and report the slowest (it sets the step's pace) and their mean (the pace of perfectly
balanced shares). Sources of the second part: ``tree-gpu``/``tree-cpu`` (`--tree`,
``--unifrac-engine gpu|cpu``), ``matrix`` (`--unifrac`, the matrix computed first by
`aam unifrac`), each with every ``--compiles`` mode: ``off`` (eager), ``layers``, ``model``
compiled cold (a cache of the run's own), ``model-warm`` (a second process in the cache the
cold run left, as the later jobs of a sweep). Each row has samples/s, GPU busy, TFLOP/s and MFU
of the last epoch, the compile log line (graphs, breaks, seconds, cache hits) and the wall time
of 100 epochs extrapolated from the measured ones.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# The model of the measurements (and of the public AAM's comparison).
MODEL = [
    *("--embedding-dim", "128", "--attention-heads", "4", "--layers", "2"),
    *("--max-bp", "100", "--token-limit", "256", "--precision", "bf16"),
]


def batch_reads(csc, batch: int, rng: np.random.Generator):
    """CSR rows (pointers, ASV indices, reads) of ``batch`` seeded samples of ``csc``."""
    cols = rng.choice(csc.shape[1], batch, replace=batch > csc.shape[1])
    sub = csc[:, cols]
    return sub.indptr, sub.indices, sub.data


def timed(call, repeats: int, sync) -> float:
    """Minimum seconds of ``call()`` over ``repeats`` after one warm-up."""
    return timed_together([call], repeats, sync)[0]


def timed_together(calls: list, repeats: int, sync) -> list[float]:
    """Minimum seconds of each call over ``repeats`` after one warm-up each, the calls
    interleaved (each repeat times every call once): a slow spell of a shared machine slows
    one repeat of every call, not all repeats of one."""
    for call in calls:
        call()
    sync()
    best = [float("inf")] * len(calls)
    for _ in range(repeats):
        for k, call in enumerate(calls):
            start = time.perf_counter()
            call()
            sync()
            best[k] = min(best[k], time.perf_counter() - start)
    return best


def unifrac_part(args: argparse.Namespace) -> list[dict]:
    import biom
    import torch

    from aam.data.table import counts_of
    from aam.runtime.threads import ThreadPool, cpu_share
    from aam.unifrac.batch import BatchUniFrac
    from aam.unifrac.batch_device import DeviceBatchUniFrac
    from aam.unifrac.tree import load_tree

    counts = counts_of(biom.load_table(str(args.data / "table.biom")))
    tree = load_tree(args.data / "tree.nwk")
    host = BatchUniFrac.for_table(counts, tree, args.metric, alpha=0.5)
    csc = counts.matrix.tocsc()
    threads = cpu_share()
    pool = ThreadPool.of(threads)
    gpu = torch.cuda.is_available()
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    keep = lambda partial: partial  # noqa: E731 - one rank's partial sums, not exchanged

    def runner(engine: str, unifrac: BatchUniFrac, combine, rows: slice | None = None):
        """A call computing the distances (``rows`` of them) of a batch's reads on ``engine``."""
        if engine == "gpu":
            on_device = DeviceBatchUniFrac.on(unifrac, "cuda")
            return lambda r: on_device.distances(*r, combine, rows)
        threads_of = None if engine == "cpu1" else pool
        return lambda r: unifrac.distances(*r, pool=threads_of, combine=combine, rows=rows)

    names = ["cpu1", f"cpu{threads}"] + (["gpu"] if gpu else [])
    rows = []
    for batch in args.batches:
        seed = batch if args.seed is None else args.seed
        reads = batch_reads(csc, batch, np.random.default_rng(seed))
        seconds = {}
        for name in names:
            call = runner(name, host, None)
            seconds[name] = timed(lambda c=call, x=reads: c(x), args.repeats, sync)
        fastest = min(seconds, key=seconds.get)
        copies = [reads] * threads
        one = runner("cpu1", host, None)
        side_by_side = timed(
            lambda f=one, x=copies: list(pool.executor.map(f, x)), args.repeats, sync
        )
        worlds, means = {}, {}
        for world in args.worlds:
            calls = []
            for r in range(world):
                own = slice(r * batch // world, (r + 1) * batch // world)  # its samples' rows
                share = host.node_share(r, world, device=fastest == "gpu")
                call = runner(fastest, share, keep, own)
                calls.append(lambda c=call, x=reads: c(x))
            shares = timed_together(calls, args.repeats, sync)
            worlds[str(world)], means[str(world)] = max(shares), sum(shares) / world
        row = {
            "data": str(args.data),
            "metric": args.metric,
            "batch": batch,
            "seed": seed,
            "ms": {k: round(v * 1e3, 2) for k, v in seconds.items()},
            # what perfectly parallel work of this kind gains on this machine's CPUs
            "parallel_ceiling": round(threads * seconds["cpu1"] / side_by_side, 2),
            "world_engine": fastest,
            "world_ms": {k: round(v * 1e3, 2) for k, v in worlds.items()},
            # the ranks' mean: what perfectly balanced shares would each take
            "world_mean_ms": {k: round(v * 1e3, 2) for k, v in means.items()},
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def train_part(args: argparse.Namespace) -> list[dict]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    aam = [sys.executable, "-m", "aam"]
    table, tree = args.data / "table.biom", args.data / "tree.nwk"
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    matrix = work / "unifrac.h5"
    if any(s.startswith("matrix") for s in args.sources) and not matrix.exists():
        subprocess.run(
            [*aam, "unifrac", "--table", table, "--tree", tree, "--metric", "unweighted",
             "--output", matrix],
            check=True, env=env,
        )  # fmt: skip
    rows = []
    for batch in args.batches:
        for source in args.sources:
            for compiled in args.compiles:
                mode, _, warm = compiled.partition("-")
                out = work / f"{source}-{compiled}-{batch}"
                shutil.rmtree(out, ignore_errors=True)  # never resume an earlier run
                flags = ["--unifrac", matrix] if source == "matrix" else []
                flags += [] if source == "matrix" else ["--tree", tree]
                flags += [] if source == "matrix" else ["--unifrac-engine", source[5:]]
                command = [
                    *aam, "pretrain", "--table", table, "--output-dir", out, *MODEL, *flags,
                    "--batch-size", batch, "--epochs", args.epochs, "--compile", mode,
                    "--val-fraction", args.val_fraction, "--attn-implementation",
                    "mem_efficient", "--no-progress",
                ]  # fmt: skip
                # cold: a cache of its own, as a user's first job; warm: the cold run's cache
                cache = work / f"cache-{source}-{mode}-{batch}"
                if not warm:
                    shutil.rmtree(cache, ignore_errors=True)
                row = {"data": str(args.data), "batch": batch, "source": source}
                row |= {"compile": compiled} | timed_run(command, env, cache, args.epochs)
                if "error" not in row:
                    row.update(last_epoch(out / "history.tsv"))
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


def timed_run(command: list, env: dict, cache: Path, epochs: int) -> dict:
    """Wall seconds of `aam pretrain` ``command`` (compile cache ``cache``), the seconds at
    which each epoch's line came, what the compile line says, and the wall time of 100
    epochs extrapolated from them (the first epoch, compile included, then the last epoch's
    pace, validation included)."""
    env = {**env, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    start, marks, tail = time.perf_counter(), [], []
    with subprocess.Popen(
        list(map(str, command)), env=env, stderr=subprocess.PIPE, text=True
    ) as run:
        for line in run.stderr:
            tail = [*tail[-40:], line.rstrip()]
            if " epoch " in line and f"/{epochs}: " in line:
                marks.append(time.perf_counter() - start)
    wall = time.perf_counter() - start
    row: dict = {"wall_s": round(wall, 1), "epoch_marks_s": [round(m, 1) for m in marks]}
    if run.returncode != 0:
        return row | {"error": (tail or ["?"])[-1][:300]}
    summary = [ln for ln in tail if "graph(s)" in ln]
    row["compiled"] = summary[-1].split("torch.compile: ")[-1] if summary else None
    if len(marks) >= 2:
        pace = marks[-1] - marks[-2]
        row["wall_100_epochs_s"] = round(marks[0] + 99 * pace + (wall - marks[-1]), 1)
    return row


def last_epoch(history: Path) -> dict:
    """samples/s, GPU busy, peak memory, TFLOP/s and MFU of a run's last epoch."""
    import pandas as pd

    last = pd.read_csv(history, sep="\t").iloc[-1]
    keys = ("samples_per_s", "device_busy", "peak_memory_mb", "epoch_seconds", "tflops", "mfu")
    return {k: round(float(last[k]), 3) for k in keys if k in last}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("unifrac", "train"))
    parser.add_argument("--data", type=Path, default=REPO / "data" / "oral-full")
    parser.add_argument("--batches", type=int, nargs="+", default=[128, 512, 1024, 2048])
    parser.add_argument("--metric", default="unweighted")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--seed", type=int, help="seed of the unifrac part's batches (default: the batch size)"
    )
    parser.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--sources", nargs="+", default=["tree-gpu", "tree-cpu", "matrix"])
    parser.add_argument(
        "--compiles",
        nargs="+",
        default=["off", "layers", "model", "model-warm"],
        help="--compile modes; MODE-warm: again, in the cache MODE's cold run left",
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--val-fraction", type=float, default=0.05)
    parser.add_argument("--workdir", type=Path, default=Path("results/benchmarks/gpu_pretrain"))
    parser.add_argument("--out", type=Path, required=True, help="JSON lines to write")
    args = parser.parse_args()
    rows = unifrac_part(args) if args.part == "unifrac" else train_part(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
