"""Benchmark: one `aam unifrac` job against K `aam unifrac-shard` jobs and `aam unifrac-gather`.

Every job runs in its own process, one after the other, so each wall time and peak RSS
(``os.wait4``) is that job's alone; the sharded total is the sum of the shards' wall times
plus the gather's (what K jobs cost in CPU time; on a cluster they run side by side). The
gathered matrices are checked to be the single job's, bit for bit, after the last job and in
row blocks: a child's peak RSS includes its parent's at the fork, so this process stays small.

    python benchmarks/resample_table.py --output results/benchmarks/oral10k.biom
    python benchmarks/unifrac_shards.py --table results/benchmarks/oral10k.biom --shards 4 8
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import h5py
import numpy as np

REPO = Path(__file__).resolve().parents[1]


def timed(*args: str | Path) -> tuple[float, float]:
    """Run ``python -m aam ARGS``; its wall time (s) and peak RSS (GB)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "aam", *map(str, args)])
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"aam {args[0]} failed with status {status}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024**2


def same_matrix(one: Path, other: Path, rows: int = 500) -> int:
    """The number of samples; SystemExit unless both files hold the same order and matrix."""
    with h5py.File(one) as a, h5py.File(other) as b:
        n = a["matrix"].shape[0]
        same = a["order"][()].tolist() == b["order"][()].tolist() and b["matrix"].shape == (n, n)
        for lo in range(0, n, rows):
            same = same and np.array_equal(a["matrix"][lo : lo + rows], b["matrix"][lo : lo + rows])
    if not same:
        raise SystemExit(f"{other}: not the single job's matrix ({one})")
    return n


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", type=Path, required=True)
    parser.add_argument("--tree", type=Path, default=REPO / "data/oral/tree.nwk")
    parser.add_argument("--metric", default="unweighted")
    parser.add_argument("--shards", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--workdir", type=Path, default=REPO / "results/benchmarks/shards")
    args = parser.parse_args()
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    inputs = ["--table", args.table, "--tree", args.tree, "--metric", args.metric]
    threads = ["--threads", args.threads, "--no-progress"]
    # Untimed: compiles the numba kernel into its on-disk cache.
    demo = ["--table", REPO / "data/demo/table.biom", "--tree", REPO / "data/demo/tree.nwk"]
    timed("unifrac", *demo, "--metric", args.metric, "--output", work / "warmup.h5", *threads)

    rows = [
        ("1 job", "aam unifrac", *timed("unifrac", *inputs, "--output", work / "one.h5", *threads))
    ]
    for shards in args.shards:
        parts = [work / f"part{k}of{shards}.h5" for k in range(1, shards + 1)]
        for k, part in enumerate(parts, start=1):
            flags = ["--shard", k, "--shards", shards, "--output", part, *threads]
            rows.append(
                (f"{shards} shards", f"shard {k}", *timed("unifrac-shard", *inputs, *flags))
            )
        out = work / f"gathered{shards}.h5"
        flags = ["--shards", shards, "--output", out, "--partials", *parts]
        rows.append((f"{shards} shards", "gather", *timed("unifrac-gather", *inputs, *flags)))
        for part in parts:
            part.unlink()
    n = max(same_matrix(work / "one.h5", work / f"gathered{k}.h5") for k in args.shards)
    print(f"{cpu_name()}, {os.cpu_count()} cores; {date.today()}; {args.threads} threads per job")
    print(f"{args.table}: {n} samples, {args.metric}; every gathered matrix == the single job's")
    print("\n| run | job | wall (s) | peak RSS (GB) |\n|---|---|---|---|")
    for run, job, wall, rss in rows:
        print(f"| {run} | {job} | {wall:.1f} | {rss:.2f} |")
    print("\n| run | jobs | sum of wall times (s) | largest peak RSS of a computing job (GB) |")
    print("|---|---|---|---|")
    for run in dict.fromkeys(row[0] for row in rows):
        mine = [row for row in rows if row[0] == run]
        shard_rss = max(row[3] for row in mine if row[1] != "gather")
        print(f"| {run} | {len(mine)} | {sum(row[2] for row in mine):.1f} | {shard_rss:.2f} |")


if __name__ == "__main__":
    main()
