"""Benchmark: `aam unifrac` against Striped UniFrac (`ssu`), whole process, side by side.

For each table, metric and precision, `aam unifrac` and `ssu` each run as their own process
(``--repeats`` times, alternating); wall time is the median from start to exit, peak RSS the
largest ``os.wait4`` maximum. `ssu` comes from ``--ssu`` (a unifrac-binaries CPU build, see its
README); where it is missing or cannot run on this CPU, the table says so and shows the
reference figures measured with it on 2026-11-22 (../shared/notes/unifrac.md) instead.
Where both ran, their matrices are compared (max |aam - ssu|).

    python benchmarks/unifrac.py [--sizes 2537 10000] [--repeats 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import h5py
import numpy as np

REPO = Path(__file__).resolve().parents[1]
ORAL = REPO / "data" / "oral"
SSU = REPO.parent / "shared" / "tools" / "ssu"
METRICS = ("unweighted", "weighted_normalized", "weighted_unnormalized")
DTYPES = ("float64", "float32")
# ssu, whole process, 2 threads, on an AVX-512 VM of this kind, 2026-11-22 (the issue's
# figures; the lower end of each measured range): seconds and GB by (samples, metric, dtype).
REFERENCE = {
    (2537, "unweighted", "float64"): (1.7, 0.13),
    (2537, "unweighted", "float32"): (1.6, 0.11),
    (2537, "weighted_normalized", "float64"): (5.2, 0.14),
    (2537, "weighted_normalized", "float32"): (2.7, None),
    (2537, "weighted_unnormalized", "float64"): (5.3, 0.11),
    (2537, "weighted_unnormalized", "float32"): (2.8, None),
    (10000, "unweighted", "float64"): (25.3, 1.63),
    (10000, "weighted_normalized", "float64"): (86.3, 1.67),
}


def measure(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in GB, exit status as Popen gives it) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024**2, code


def aam_command(table: Path, metric: str, dtype: str, threads: int, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "aam",
        "unifrac",
        *("--table", str(table), "--tree", str(ORAL / "tree.nwk"), "--metric", metric),
        *("--dtype", dtype, "--threads", str(threads), "--output", str(out), "--no-progress"),
    ]


def ssu_command(ssu: Path, table: Path, metric: str, dtype: str, out: Path) -> list[str]:
    method = metric + ("_fp64" if dtype == "float64" else "_fp32")
    return [
        str(ssu / "bin" / "ssu"),
        *("-i", str(table), "-t", str(ORAL / "tree.nwk"), "-m", method, "-o", str(out)),
        *("--mode", "one-off", "-r", "hdf5_fp64", "--pcoa", "0", "-n", "1"),
    ]


def ssu_problem(ssu: Path, env: dict[str, str], table: Path, out: Path) -> str | None:
    """Why ``ssu`` cannot be measured here, or None when it runs."""
    if not (ssu / "bin" / "ssu").is_file():
        return f"not found at {ssu}"
    probe = ssu_command(ssu, table, "unweighted", "float32", out)
    run = subprocess.run(probe, env=env, capture_output=True, text=True, check=False)
    code = run.returncode
    if code == 0:
        return None
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if code < 0 and -code == signal.SIGILL:
        cpu = "" if "avx512f" in flags else ": this CPU lacks AVX-512, which the build uses"
        return f"killed by SIGILL{cpu}"
    said = (run.stderr.strip().splitlines() or ["no message"])[-1]
    hint = f" (its runtime packages: {ssu / 'README.md'})" if code == 127 else ""
    return f"exit status {code}: {said}{hint}"


def table_for(samples: int, workdir: Path) -> Path:
    """The oral table (2,537 samples) or a seeded resampling of it to ``samples``."""
    if samples == 2537:
        return ORAL / "table.biom"
    path = workdir / f"oral{samples}.biom"
    if not path.exists():
        script = Path(__file__).with_name("resample_table.py")
        subprocess.run(
            [sys.executable, str(script), "--samples", str(samples), "--output", str(path)],
            check=True,
        )
    return path


def max_difference(ours: Path, theirs: Path) -> float:
    with h5py.File(ours) as a, h5py.File(theirs) as b:
        order = [x.decode() if isinstance(x, bytes) else x for x in b["order"][()]]
        ids = [x.decode() if isinstance(x, bytes) else x for x in a["order"][()]]
        position = {sid: k for k, sid in enumerate(order)}
        take = np.array([position[sid] for sid in ids])
        return float(np.abs(a["matrix"][()] - b["matrix"][()][np.ix_(take, take)]).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2537, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ssu", type=Path, default=SSU)
    parser.add_argument("--workdir", type=Path, default=Path("results/benchmarks"))
    args = parser.parse_args()
    wd = args.workdir
    wd.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": str(args.ssu / "lib"),
        "OMP_NUM_THREADS": str(args.threads),
    }
    problem = ssu_problem(args.ssu, env, ORAL / "table.biom", wd / "ssu_probe.h5")
    for dtype in DTYPES:  # untimed: compiles the numba kernels into their on-disk cache
        measure(aam_command(ORAL / "table.biom", "unweighted", dtype, 1, wd / "warm.h5"))
    print(
        f"machine: {platform.node()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores; date {date.today()}; threads {args.threads}; "
        f"repeats {args.repeats}; ssu: {problem or 'measured here'}"
    )
    print()
    print(
        "| samples | metric | precision | aam wall (s) | aam peak RSS (GB) | ssu wall (s) "
        "| ssu peak RSS (GB) | aam / ssu wall | aam / ssu RSS | max abs diff |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for samples in args.sizes:
        table = table_for(samples, wd)
        for metric in METRICS:
            for dtype in DTYPES:
                ours_out, ssu_out = wd / "aam.h5", wd / "ssu.h5"
                ours, theirs = [], []
                for _ in range(args.repeats):
                    ours.append(measure(aam_command(table, metric, dtype, args.threads, ours_out)))
                    if problem is None:
                        theirs.append(
                            measure(ssu_command(args.ssu, table, metric, dtype, ssu_out), env)
                        )
                if any(code for _, _, code in ours + theirs):
                    raise SystemExit(f"{samples} {metric} {dtype}: a run failed")
                wall, rss = statistics.median(w for w, _, _ in ours), max(r for _, r, _ in ours)
                if theirs:
                    ref_wall = statistics.median(w for w, _, _ in theirs)
                    ref_rss, mark = max(r for _, r, _ in theirs), ""
                    diff = f"{max_difference(ours_out, ssu_out):.1e}"
                else:
                    ref_wall, ref_rss = REFERENCE.get((samples, metric, dtype), (None, None))
                    mark, diff = " (ref.)", "-"
                cells = [
                    f"{ref_wall:.2f}{mark}" if ref_wall else "-",
                    f"{ref_rss:.2f}{mark}" if ref_rss else "-",
                    f"{wall / ref_wall:.2f}" if ref_wall else "-",
                    f"{rss / ref_rss:.2f}" if ref_rss else "-",
                ]
                print(
                    f"| {samples} | {metric} | {dtype} | {wall:.2f} | {rss:.2f} | "
                    + " | ".join(cells)
                    + f" | {diff} |"
                )


if __name__ == "__main__":
    main()
