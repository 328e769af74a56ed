"""Benchmark: training throughput and peak RSS of `aam pretrain` and `aam finetune`.

Settings of the reference measurement of the public AAM implementation (issue #3): embedding
128, 4 heads, 2 layers per stack, max_bp 100, token_limit 256, batch 8, on a seeded 400-sample
subset of the oral data. Each stage runs as its own process (`aam ...`, device auto: the GPU
when torch sees one), so its peak RSS is its own; samples/s is the mean over epochs of
history.tsv (training steps only, validation excluded).

    python benchmarks/train_throughput.py [--data ../shared/data/oral] [--epochs 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import biom
import numpy as np
import pandas as pd

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "oral"
MODEL = [
    "--embedding-dim",
    "128",
    "--attention-heads",
    "4",
    "--layers",
    "2",
    "--max-bp",
    "100",
    "--token-limit",
    "256",
    "--batch-size",
    "8",
]
PUBLIC = {"samples_per_s": 3.2, "peak_rss_gb": 5.3}  # public AAM, same settings, same machine type


def run(args: list[str]) -> float:
    """Run `aam ARGS`; return its peak RSS in GB."""
    proc = subprocess.Popen([sys.executable, "-m", "aam", *args])
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"aam {' '.join(args)} failed ({status})")
    return usage.ru_maxrss / 1024**2


def throughput(out: Path) -> float:
    return float(pd.read_csv(out / "history.tsv", sep="\t")["samples_per_s"].mean())


def prepare(data: Path, samples: int, wd: Path) -> tuple[str, str]:
    """A seeded ``samples``-sample subset of ``data``'s table and its unweighted UniFrac matrix,
    written to ``wd``; returns their paths."""
    wd.mkdir(parents=True, exist_ok=True)
    table = biom.load_table(str(data / "table.biom"))
    ids = np.random.default_rng(0).choice(table.ids(), samples, replace=False)
    table = table.filter(ids, inplace=False).remove_empty(axis="observation")
    with biom.util.biom_open(str(wd / "table.biom"), "w") as handle:
        table.to_hdf5(handle, "benchmark")
    unifrac = str(wd / "unifrac.h5")
    tree = str(data / "tree.nwk")
    table_path = str(wd / "table.biom")
    run(
        [
            "unifrac",
            "--table",
            table_path,
            "--tree",
            tree,
            "--metric",
            "unweighted",
            "--output",
            unifrac,
        ]
    )
    return table_path, unifrac


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=Path("results/benchmarks/train"))
    args = parser.parse_args()
    wd = args.workdir
    table, unifrac = prepare(args.data, args.samples, wd)
    data = ["--table", table]
    common = [
        *data,
        *MODEL,
        "--epochs",
        str(args.epochs),
        "--checkpoint-every-minutes",
        "0",
        "--no-progress",
    ]
    encoder = str(wd / "pretrain" / "encoder.pt")
    target = [
        "--metadata",
        str(args.data / "metadata.tsv"),
        "--target-column",
        "age",
        "--pretrained-encoder",
        encoder,
        "--allow-missing-samples",
    ]
    stages = [
        ("pretrain", "pretrain", ["pretrain", "--unifrac", unifrac]),
        ("fine-tune, --freeze-base", "frozen", ["finetune", *target, "--freeze-base"]),
        ("fine-tune, whole model", "whole", ["finetune", *target, "--unifrac", unifrac]),
    ]
    rows = []
    for stage, name, (command, *extra) in stages:
        shutil.rmtree(wd / name, ignore_errors=True)  # measure fresh runs, not resumes
        rss = run([command, *common, "--output-dir", str(wd / name), *extra])
        rows.append((stage, throughput(wd / name), rss))
    print(
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; "
        f"date {date.today()}; {args.samples} samples, {args.epochs} epochs"
    )
    print()
    print("| stage | samples/s | x public pretraining | peak RSS (GB) | x public RSS |")
    print("|---|---|---|---|---|")
    for stage, sps, rss in rows:
        print(
            f"| {stage} | {sps:.1f} | {sps / PUBLIC['samples_per_s']:.1f}x | {rss:.2f} | "
            f"{rss / PUBLIC['peak_rss_gb']:.2f} |"
        )


if __name__ == "__main__":
    main()
