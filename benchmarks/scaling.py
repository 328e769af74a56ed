"""Benchmark: pretraining samples/s on 1 and 2 ranks: processes on one node, and one process on
each of the two nodes of the test SLURM cluster (tests/slurm_cluster.py; needs root and the
Debian packages slurm-wlm and munge, as `make test` does).

Settings of benchmarks/train_throughput.py (embedding 128, 4 heads, 2 layers per stack, max_bp
100, token_limit 256, the seeded 400-sample oral subset) with a global batch of 16 (8 per rank on
2 ranks). samples/s is the global rate of history.tsv (training steps), mean over the epochs.

    python benchmarks/scaling.py [--data ../shared/data/oral] [--epochs 2] [--no-cluster]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO / "tests")]
from train_throughput import DEFAULT_DATA, MODEL, prepare, throughput  # noqa: E402

BATCH = ["--batch-size", "16"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]


def pretrain(launcher: list[str], args: list[str], out: Path, env: dict[str, str]) -> float:
    """Run `launcher -m aam pretrain ARGS --output-dir OUT`; its samples/s."""
    shutil.rmtree(out, ignore_errors=True)
    command = [*launcher, "-m", "aam", "pretrain", *args, "--output-dir", str(out)]
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    return throughput(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=Path("results/benchmarks/scaling"))
    parser.add_argument("--no-cluster", action="store_true", help="skip the two-node run")
    args = parser.parse_args()
    wd = args.workdir.resolve()
    table, unifrac = prepare(args.data, args.samples, wd)
    common = ["--table", table, "--unifrac", unifrac, *MODEL, *BATCH, "--epochs", str(args.epochs)]
    common += ["--checkpoint-every-minutes", "0", "--no-progress", "--device", "cpu"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cores = os.cpu_count() or 1
    rows = [
        (
            "1 process",
            1,
            1,
            pretrain([sys.executable], [*common, "--threads", "1"], wd / "p1t1", env),
        ),
        (
            "1 process",
            1,
            cores,
            pretrain([sys.executable], [*common, "--threads", str(cores)], wd / "p1", env),
        ),
        (
            "2 processes, one node (torchrun)",
            2,
            1,
            pretrain([*TORCHRUN, "2"], [*common, "--threads", "1"], wd / "p2", env),
        ),
    ]
    if not args.no_cluster:
        from slurm_cluster import NODE_IFACE, running_cluster

        with running_cluster(Path(tempfile.mkdtemp(prefix="aam-slurm-")), 256, 1_536_000):
            srun = ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "-p", "small"]
            launch = [sys.executable, "-m", "aam.workflow.launch", "--nproc-per-node", "1", "--"]
            node_env = {**env, "GLOO_SOCKET_IFNAME": NODE_IFACE}
            sps = pretrain([*srun, *launch], [*common, "--threads", "1"], wd / "n2", node_env)
            rows.append(("2 nodes x 1 process (test cluster, srun + c10d)", 2, 1, sps))
    base = rows[0][3]
    print(
        f"machine: {platform.node()} {platform.machine()}, {cores} cores; date {date.today()}; "
        f"{args.samples} samples, {args.epochs} epochs, global batch 16"
    )
    print()
    print("| ranks | layout | threads per rank | samples/s | x 1 process, 1 thread |")
    print("|---|---|---|---|---|")
    for layout, ranks, threads, sps in rows:
        print(f"| {ranks} | {layout} | {threads} | {sps:.1f} | {sps / base:.2f}x |")


if __name__ == "__main__":
    main()
