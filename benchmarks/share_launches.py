"""What one rank's share of a batch's UniFrac costs the host on the `gpu` engine (issue 38).

On a GPU a rank's node share at world 16 is bound by launching kernels, not by computing:
this counts the aten ops one share call dispatches (views included; each non-view op is a
kernel launch on a GPU) and times the call on a batch small enough that the device has next to
nothing to do, so the time is the host's: Python, the dispatcher and the launches. Runs the
engine on the GPU when there is one, else its code on the CPU (then the time is the host
overhead of CPU torch, a proxy for the launch-bound time).

    python benchmarks/share_launches.py --data data/oral-full --batch 16 --world 16
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_pretrain import batch_reads, timed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data/oral-full"))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--world", type=int, default=16)
    parser.add_argument("--calls", type=int, default=200, help="calls per timed repeat")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    import biom
    import torch

    from aam.data.table import counts_of
    from aam.profiling.dispatched import DispatchedOps
    from aam.unifrac.batch import BatchUniFrac
    from aam.unifrac.batch_device import DeviceBatchUniFrac
    from aam.unifrac.metrics import METRICS
    from aam.unifrac.tree import load_tree

    gpu = torch.cuda.is_available()
    device, sync = ("cuda", torch.cuda.synchronize) if gpu else ("cpu", lambda: None)
    torch.set_num_threads(1)  # on the CPU: the host's time, not a parallel kernel's
    counts = counts_of(biom.load_table(str(args.data / "table.biom")))
    tree = load_tree(args.data / "tree.nwk")
    reads = batch_reads(counts.matrix.tocsc(), args.batch, np.random.default_rng(args.batch))
    own = slice(0, max(1, args.batch // args.world))
    for metric in METRICS:
        host = BatchUniFrac.for_table(counts, tree, metric, alpha=0.5)
        share = DeviceBatchUniFrac.on(host.node_share(0, args.world, device=True), device)

        def call(s=share):
            return s.distances(*reads, lambda partial: partial, own)

        call()
        with DispatchedOps() as dispatched:
            call()
        seconds = timed(lambda: [call() for _ in range(args.calls)], args.repeats, sync)
        row = {
            "device": torch.cuda.get_device_name() if gpu else "cpu",
            "data": str(args.data),
            "metric": metric,
            "batch": args.batch,
            "world": args.world,
            "ops": sum(dispatched.ops.values()),
            "host_reads": dispatched.ops["aten._local_scalar_dense"],
            "us_per_call": round(seconds / args.calls * 1e6, 1),
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
