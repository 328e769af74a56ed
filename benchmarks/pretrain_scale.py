"""`aam pretrain` at corpus scale: peak RSS, time to first step and samples/s against N.

For each sample count the table is the oral study (N = 2,537) or a seeded resampling of it
(``resample_table.py``); the tree is the oral tree. Every run pretrains the issue's tiny model
(embedding 32, 1 layer, batch 16, CPU) for one epoch of ``--steps`` steps: a seeded split puts
``steps x 16`` samples in train, 320 in val and the rest in test, so the WHOLE table is loaded,
indexed and checked as in a real run while the measured epoch stays short. Two ways to get
UniFrac are compared:

* ``batch``: ``--tree`` (each batch's distances computed from its reads, the default);
* ``matrix``: ``--unifrac`` of a matrix made first by ``aam unifrac`` (only up to
  ``--matrix-max`` samples: the N x N file is the cost this issue removes).

Measured per run, from outside the process: peak RSS (``wait4``), time from launch to the
trainer's "first step done" line, the epoch's samples/s (history.tsv) and, with a matrix, the
seconds of its whole-matrix check before training (the log's "checked every distance" line).

    python benchmarks/pretrain_scale.py --samples 2537 10000 25000 100000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
ORAL = REPO / "data" / "oral"
BATCH = 16
VAL = 320
MODEL = ["--embedding-dim", "32", "--layers", "1", "--batch-size", str(BATCH)]


def measured(argv: list[str], marker: str | None = None) -> dict:
    """Run ``argv``; its wall time, peak RSS (GB) and the seconds until ``marker`` on stderr."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=REPO)
    first, lines = None, []
    for line in proc.stderr:
        lines.append(line)
        if marker and first is None and marker in line:
            first = time.perf_counter() - started
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{''.join(lines[-20:])}")
    checked = [re.search(r"checked every distance .* in ([0-9.]+) s", line) for line in lines]
    check_s = next((float(m.group(1)) for m in checked if m), None)
    return {
        "wall_s": wall,
        "peak_rss_gb": usage.ru_maxrss / 2**20,
        "first_step_s": first,
        "matrix_check_s": check_s,
    }


def table_for(samples: int, work: Path) -> Path:
    """The oral table, or its seeded resampling to ``samples`` (made once, then reused)."""
    if samples == 2537:
        return ORAL / "table.biom"
    path = work / f"oral{samples}.biom"
    if not path.exists():
        script = REPO / "benchmarks" / "resample_table.py"
        subprocess.run(
            [sys.executable, script, "--samples", str(samples), "--output", path], check=True
        )
    return path


def split_for(table: Path, steps: int, work: Path) -> Path:
    """A seeded split: ``steps`` batches of train samples, VAL val samples, the rest test."""
    import h5py

    with h5py.File(table, "r") as h5:
        ids = h5["sample/ids"].asstr()[()]
    order = np.random.default_rng(0).permutation(len(ids))
    labels = np.full(len(ids), "test", dtype=object)
    labels[order[: steps * BATCH]] = "train"
    labels[order[steps * BATCH : steps * BATCH + VAL]] = "val"
    path = work / f"{table.stem}.split{steps}.tsv"
    pd.DataFrame({"sample_id": ids, "split": labels}).to_csv(path, sep="\t", index=False)
    return path


def pretrain(table: Path, split: Path, source: list[str], out: Path, threads: int) -> dict:
    """One measured `aam pretrain` epoch; its samples/s from history.tsv."""
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, "-m", "aam", "pretrain", "--table", str(table), *source]
    argv += ["--split", str(split), "--output-dir", str(out), "--epochs", "1", *MODEL]
    argv += ["--threads", str(threads), "--no-progress", "--seed", "42"]
    row = measured(argv, marker="first step done")
    history = pd.read_csv(out / "history.tsv", sep="\t")
    row["samples_per_s"] = float(history["samples_per_s"].iloc[-1])
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[2537, 10_000, 25_000, 100_000])
    parser.add_argument("--steps", type=int, default=20, help="training steps of the epoch")
    parser.add_argument("--matrix-max", type=int, default=25_000, help="largest N with a matrix")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1, help="runs per case (median kept)")
    parser.add_argument("--work", type=Path, default=REPO / "results" / "benchmarks")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    tree = ORAL / "tree.nwk"
    rows = []
    for n in args.samples:
        table = table_for(n, args.work)
        split = split_for(table, args.steps, args.work)
        sources = {"batch": ["--tree", str(tree)]}
        if n <= args.matrix_max:
            matrix = args.work / f"{table.stem}.unweighted.h5"
            made = measured(
                [
                    sys.executable,
                    "-m",
                    "aam",
                    "unifrac",
                    "--table",
                    str(table),
                    "--tree",
                    str(tree),
                    "--metric",
                    "unweighted",
                    "--threads",
                    str(args.threads),
                    "--output",
                    str(matrix),
                ]
            )
            print(
                f"N={n}: aam unifrac {made['wall_s']:.1f} s, {made['peak_rss_gb']:.2f} GB, "
                f"{matrix.stat().st_size / 1e9:.2f} GB file",
                flush=True,
            )
            sources["matrix"] = ["--unifrac", str(matrix)]
        runs = {name: [] for name in sources}
        for _ in range(args.repeats):  # interleaved, so drifts of the machine hit both alike
            for name, source in sources.items():
                out = args.work / f"pretrain-{n}-{name}"
                runs[name].append(pretrain(table, split, source, out, args.threads))
        for name, done in runs.items():
            row = {
                key: None if done[0][key] is None else float(np.median([r[key] for r in done]))
                for key in done[0]
            }
            row.update(samples=n, distances=name, repeats=len(done))
            if name == "matrix":
                row["matrix_file_gb"] = matrix.stat().st_size / 1e9
            rows.append(row)
            print(json.dumps(row), flush=True)
    frame = pd.DataFrame(rows)
    (args.work / "pretrain_scale.json").write_text(frame.to_json(orient="records", indent=1))
    print(frame.to_markdown(index=False, floatfmt=".3g"))


if __name__ == "__main__":
    main()
