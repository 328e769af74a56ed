"""Benchmark: `aam` built-in UniFrac engine vs scikit-bio on the full oral data set.

Each measurement runs in its own worker process so its peak RSS is its own (os.wait4).
The built-in engine computes the three standard metrics together on all samples. scikit-bio
(default engine) is timed on a seeded random subset and scaled by the number of sample pairs:
its cost per pair is constant because it always walks the whole tree. Agreement between the
two is checked on that subset.

    python benchmarks/unifrac.py [--data ../shared/data/oral] [--skbio-samples 250]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import skbio

METRICS = ["unweighted", "weighted_normalized", "weighted_unnormalized"]
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "oral"


def _load(data: Path, n_samples: int | None):
    import biom

    from aam.unifrac.tree import load_tree

    table = biom.load_table(str(data / "table.biom"))
    if n_samples:
        chosen = np.random.default_rng(0).choice(table.ids(), n_samples, replace=False)
        table = table.filter(chosen, inplace=False).remove_empty(axis="observation")
    return table, load_tree(data / "tree.nwk")


def worker(
    engine: str, data: Path, n_samples: int | None, threads: int, together: bool, out: Path
) -> None:
    """Time one engine on the three metrics; write seconds per call and the matrices."""
    from aam.unifrac.engines import compute_unifrac

    table, tree = _load(data, n_samples)
    seconds, matrices = {}, {}
    for metrics in [METRICS] if together else [[m] for m in METRICS]:
        start = time.perf_counter()
        matrices.update(compute_unifrac(table, tree, metrics, engine=engine, threads=threads))
        seconds["+".join(metrics)] = time.perf_counter() - start
    np.savez(out.with_suffix(".npz"), **matrices)
    out.write_text(json.dumps({"n": table.shape[1], "seconds": seconds}))


def run_worker(args: list[str]) -> tuple[dict, float]:
    """Run this script as a worker; return its JSON result and its peak RSS in GB."""
    proc = subprocess.Popen([sys.executable, __file__, "--worker", *args])
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"worker {args} failed with status {status}")
    out = Path(args[args.index("--out") + 1])
    return json.loads(out.read_text()), usage.ru_maxrss / 1024**2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--skbio-samples", type=int, default=250)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--workdir", type=Path, default=Path("results/benchmarks"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--engine", default="builtin", help=argparse.SUPPRESS)
    parser.add_argument("--samples", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--together", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.engine, args.data, args.samples or None, args.threads, args.together, args.out)
        return

    args.workdir.mkdir(parents=True, exist_ok=True)
    common = ["--data", str(args.data), "--threads", str(args.threads)]
    wd = args.workdir
    # Warm-up run compiles the numba kernel into its on-disk cache; it is not timed.
    run_worker([*common, "--samples", "100", "--out", str(wd / "warmup.json")])
    full, full_rss = run_worker([*common, "--together", "--out", str(wd / "builtin_full.json")])
    apart, apart_rss = run_worker([*common, "--out", str(wd / "builtin_apart.json")])
    n_sub = args.skbio_samples
    sub_args = [*common, "--samples", str(n_sub)]
    ours_sub, _ = run_worker([*sub_args, "--out", str(wd / "builtin_sub.json")])
    ref_sub, ref_rss = run_worker([*sub_args, "--engine", "skbio", "--out", str(wd / "skbio.json")])

    ours_m = np.load(wd / "builtin_sub.npz")
    ref_m = np.load(wd / "skbio.npz")
    max_diff = max(float(np.abs(ours_m[m] - ref_m[m]).max()) for m in METRICS)
    n = full["n"]
    scale = (n * (n - 1)) / (n_sub * (n_sub - 1))
    skbio_full = {m: s * scale for m, s in ref_sub["seconds"].items()}
    skbio_total = sum(skbio_full.values())
    ours_total = sum(full["seconds"].values())
    print(
        f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores; date {date.today()}; threads {args.threads}"
    )
    print(f"data: {args.data} ({n} samples)")
    print(f"max |builtin - skbio| on the {n_sub}-sample subset, 3 metrics: {max_diff:.2e}")
    print(
        f"skbio on {n_sub} samples: "
        + ", ".join(f"{m} {s:.1f} s" for m, s in ref_sub["seconds"].items())
        + f"; scaled x{scale:.1f} by pair count to {n} samples: {skbio_total:.0f} s"
    )
    print()
    print("| engine | metric | samples | wall (s) | peak RSS (GB) | speed-up vs skbio |")
    print("|---|---|---|---|---|---|")
    for metric in METRICS:
        ours = apart["seconds"][metric]
        print(
            f"| aam builtin (cpu, fp64) | {metric} | {n} | {ours:.2f} | {apart_rss:.2f} | "
            f"{skbio_full[metric] / ours:.0f}x |"
        )
    print(
        f"| aam builtin (cpu, fp64) | **all three, one call** | {n} | {ours_total:.2f} | "
        f"{full_rss:.2f} | **{skbio_total / ours_total:.0f}x** |"
    )
    for metric in METRICS:
        print(
            f"| scikit-bio {skbio.__version__} (cython) | {metric} | {n} (scaled from {n_sub}) | "
            f"{skbio_full[metric]:.0f} | {ref_rss:.2f} ({n_sub}) | 1x |"
        )


if __name__ == "__main__":
    main()
