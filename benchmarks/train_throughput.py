"""Benchmark: training throughput and peak RSS of `aam pretrain` and `aam finetune`.

Settings of the reference measurement of the public AAM implementation (issue #3): embedding
128, 4 heads, 2 layers per stack, max_bp 100, token_limit 256, batch 8, on a seeded 400-sample
subset of the oral data; pretraining also with token-budget batches (``--batch-tokens``).
Each stage runs as its own process (`aam ...`, device auto: the GPU when torch sees one), so its
peak RSS is its own; samples/s is the mean over epochs of history.tsv (training steps only,
validation excluded), whatever the batch shape.

Achieved GFLOP/s of a pretraining run: the matmul FLOPs of every training batch of its epochs
(``step_flops``: linear layers and attention of the three stacks, forward x 3 for forward and
backward), divided by the training seconds of history.tsv, against this CPU's fp32 peak
(``peak_gflops``: cores x clock x 32 FLOPs/cycle, Zen 3 and Zen 4 alike); on a GPU (the stages
run there) GFLOP/s only, no CPU percentage.

    python benchmarks/train_throughput.py [--data ../shared/data/oral] [--epochs 2]
        [--batch-tokens 2048] [--stages pretrain tokens frozen whole]
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
STAGES = ["pretrain", "tokens", "frozen", "whole"]
BATCH_TOKENS = 2048  # the new pretraining setting, beside the reference batch of 8
DIM, LAYERS, TOKEN_LIMIT, MAX_BP, SEED = 128, 2, 256, 100, 42
ZEN4_FP32_FLOPS_PER_CYCLE = 32  # 2 FMA pipes x 8 fp32 lanes (256 bit) x 2 FLOPs


def peak_gflops() -> float:
    """fp32 peak of this CPU: cores x clock (cpu MHz of /proc/cpuinfo) x 32 FLOPs/cycle."""
    mhz = [
        float(line.split(":")[1]) for line in open("/proc/cpuinfo") if line.startswith("cpu MHz")
    ]
    return len(mhz) * max(mhz) / 1e3 * ZEN4_FP32_FLOPS_PER_CYCLE


def gpu_visible() -> bool:
    """Whether the `aam` stages (device auto) run on a GPU: torch sees one."""
    import torch

    return torch.cuda.is_available()


def step_flops(study, positions: np.ndarray) -> float:
    """Training FLOPs of one batch: forward x 3 (the backward costs twice the forward)."""
    from aam.training.meters.flops import stack_flops  # the formula each epoch's `tflops` uses

    samples = study.samples
    lengths = samples.lengths(TOKEN_LIMIT)[positions]
    rows = np.unique(np.concatenate([samples.sample_asvs(p)[0] for p in positions]))
    width = int((samples.tokens[rows] != 0).sum(axis=1).max())  # START + bases
    asv = stack_flops(len(rows), width, LAYERS, DIM)
    sample = stack_flops(len(positions), int(lengths.max()), 2 * LAYERS, DIM)  # + encoder
    return 3 * (asv + sample)


def epoch_flops(table: str, unifrac: str, epochs: int, batch_tokens: int | None) -> list[float]:
    """FLOPs of each epoch's training batches, as `aam pretrain` (seed 42) forms them."""
    from aam.data.batching import batch_indices
    from aam.data.token_batches import token_batches
    from aam.training.inputs.study import UniFracSource, load_study

    study = load_study(
        Path(table), max_bp=MAX_BP, unifrac=UniFracSource(matrix=Path(unifrac)), seed=SEED
    )
    train = study.subset("train")
    lengths = study.samples.lengths(TOKEN_LIMIT)[train]
    out = []
    for epoch in range(epochs):
        rng = np.random.default_rng([SEED, epoch])
        if batch_tokens:
            batches = token_batches(lengths, batch_tokens, rng, min_size=2)
        else:
            batches = batch_indices(len(train), 8, shuffle=True, rng=rng, min_size=2)
        out.append(sum(step_flops(study, train[b]) for b in batches))
    return out


def run(args: list[str]) -> float:
    """Run `aam ARGS`; return its peak RSS in GB."""
    proc = subprocess.Popen([sys.executable, "-m", "aam", *args])
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"aam {' '.join(args)} failed ({status})")
    return usage.ru_maxrss / 1024**2


def throughput(out: Path) -> float:
    return float(pd.read_csv(out / "history.tsv", sep="\t")["samples_per_s"].mean())


def gflops(out: Path, flops: list[float]) -> float:
    """Achieved GFLOP/s of a run's training steps (all epochs)."""
    seconds = pd.read_csv(out / "history.tsv", sep="\t")["epoch_seconds"].sum()
    return sum(flops) / seconds / 1e9


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
    parser.add_argument(
        "--batch-tokens",
        type=int,
        default=BATCH_TOKENS,
        help="token budget of the second pretraining row",
    )
    parser.add_argument(
        "--stages",
        nargs="+",
        choices=STAGES,
        default=STAGES,
        help="rows to run (default all): batch-8 and token-budget pretraining, the fine-tunings",
    )
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
    budget = args.batch_tokens
    tokens = ["--batch-tokens", str(budget)]
    stages = [
        ("pretrain", "pretrain", ["pretrain", "--unifrac", unifrac]),
        (
            f"pretrain, --batch-tokens {budget}",
            "tokens",
            ["pretrain", "--unifrac", unifrac, *tokens],
        ),
        ("fine-tune, --freeze-base", "frozen", ["finetune", *target, "--freeze-base"]),
        ("fine-tune, whole model", "whole", ["finetune", *target, "--unifrac", unifrac]),
    ]
    stages = [stage for stage in stages if stage[1] in args.stages]
    budgets = {"pretrain": None, "tokens": budget}
    flops = {
        name: epoch_flops(table, unifrac, args.epochs, budgets[name])
        for name in budgets
        if name in args.stages
    }
    peak = None if gpu_visible() else peak_gflops()
    rows = []
    for stage, name, (command, *extra) in stages:
        shutil.rmtree(wd / name, ignore_errors=True)  # measure fresh runs, not resumes
        rss = run([command, *common, "--output-dir", str(wd / name), *extra])
        achieved = gflops(wd / name, flops[name]) if name in flops else None
        rows.append((stage, throughput(wd / name), rss, achieved))
    print(
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; "
        f"date {date.today()}; {args.samples} samples, {args.epochs} epochs; "
        + ("on the GPU" if peak is None else f"CPU fp32 peak {peak:.1f} GFLOP/s")
    )
    print()
    print(
        "| stage | samples/s | x public pretraining | peak RSS (GB) | x public RSS | "
        "GFLOP/s (% of peak) |"
    )
    print("|---|---|---|---|---|---|")
    for stage, sps, rss, achieved in rows:
        rate = "-" if achieved is None else f"{achieved:.1f}"
        rate += "" if achieved is None or peak is None else f" ({100 * achieved / peak:.0f}%)"
        print(
            f"| {stage} | {sps:.1f} | {sps / PUBLIC['samples_per_s']:.1f}x | {rss:.2f} | "
            f"{rss / PUBLIC['peak_rss_gb']:.2f} | {rate} |"
        )


if __name__ == "__main__":
    main()
