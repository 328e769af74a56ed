"""Benchmark: the UniFrac distance formula alone, from sums already made (issue 38).

One seeded batch of ``--data``'s samples; its pair sums are made once (packed, as training
makes them; and the square of `aam unifrac`'s kernel), then the formula alone is timed
(minimum of ``--repeats`` calls after a warm-up, the calls interleaved): every row of the
batch on one thread and on this process's CPUs, one rank's rows at ``--world``
(``metrics.row_distances``), and the square's upper triangle (``metrics.upper_distances``,
what `aam unifrac` and its shards run). Prints one JSON line.

    python benchmarks/distance_formula.py [--data data/oral-full] [--batch 2048] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from gpu_pretrain import batch_reads, timed_together


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data/oral-full"))
    parser.add_argument("--metric", default="unweighted")
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--world", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    from aam.data.table import load_counts
    from aam.runtime.threads import ThreadPool, cpu_share
    from aam.unifrac.abundance import NodeAbundance
    from aam.unifrac.batch import BatchUniFrac
    from aam.unifrac.batch_spread import proportions_below
    from aam.unifrac.cpu_kernel import batch_pair_sums, block_pair_sums
    from aam.unifrac.metrics import SUM_FOR_METRIC, row_distances, sample_totals, upper_distances
    from aam.unifrac.tree import load_tree

    counts = load_counts(args.data / "table.biom")
    host = BatchUniFrac.for_table(counts, load_tree(args.data / "tree.nwk"), args.metric, alpha=0.5)
    reads = batch_reads(counts.matrix.tocsc(), args.batch, np.random.default_rng(args.seed))
    proportions, used, _ = proportions_below(*reads, host.ancestors, host.in_tree)
    n, kind, lengths = args.batch, SUM_FOR_METRIC[args.metric], host.lengths[used]
    totals = sample_totals(
        args.metric, NodeAbundance([str(k) for k in range(n)], lengths, proportions), 0.5
    )
    halves = np.zeros(n) if kind == "shared_length" else None
    packed = batch_pair_sums(proportions, lengths, kind, alpha=0.5, dtype=np.float64, halves=halves)
    threads = cpu_share()
    square = block_pair_sums(proportions, lengths, {kind}, 0, n, alpha=0.5, threads=threads)
    pool = ThreadPool.of(threads)
    own = slice(0, n // args.world)
    calls = {
        "rows_all_1_thread": lambda: row_distances(
            args.metric, totals, packed, slice(None), None, halves
        ),
        f"rows_all_{threads}_threads": lambda: row_distances(
            args.metric, totals, packed, slice(None), pool, halves
        ),
        f"rows_of_a_rank_of_{args.world}": lambda: row_distances(
            args.metric, totals, packed, own, None, halves
        ),
        "square_upper_1_thread": lambda: upper_distances(args.metric, totals, square, 0),
    }
    seconds = timed_together(list(calls.values()), args.repeats, lambda: None)
    row = {"data": str(args.data), "metric": args.metric, "batch": n, "seed": args.seed}
    row["ms"] = {name: round(s * 1e3, 2) for name, s in zip(calls, seconds, strict=True)}
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
