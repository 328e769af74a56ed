"""`aam unifrac-shard`: shard i of K of a UniFrac matrix (merge with `aam unifrac-gather`)."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from aam.commands.unifrac import add_tree_arguments
from aam.data.outputs import check_output_file
from aam.data.table import load_counts
from aam.options import StoreOnce, checked
from aam.unifrac.io import HDF5_SUFFIXES
from aam.unifrac.pair_sums import DEFAULT_ALPHA, DTYPES, METRICS
from aam.unifrac.shards import ShardSpec, compute_shard, file_sha256, write_shard
from aam.unifrac.tree import load_tree

log = logging.getLogger(__name__)


class OneMetric(StoreOnce):
    why = "a shard holds one metric (`aam unifrac` computes several at once)"


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    """The inputs and settings every shard of one matrix shares (also `aam unifrac-gather`'s,
    which checks each partial file against them)."""
    parser.add_argument("--table", required=True, type=Path, help="BIOM table (HDF5 or JSON)")
    parser.add_argument("--tree", required=True, type=Path, help="rooted newick tree")
    parser.add_argument(
        "--metric",
        required=True,
        action=OneMetric,
        type=checked(str, choices=METRICS),
        metavar="{" + ",".join(METRICS) + "}",
        help="the metric of the matrix (one; `aam unifrac` computes several at once)",
    )
    parser.add_argument(
        "--alpha",
        type=checked(float, minimum=0, maximum=1),
        default=DEFAULT_ALPHA,
        help="generalized UniFrac alpha",
    )
    parser.add_argument(
        "--dtype",
        type=checked(str, choices=tuple(sorted(DTYPES))),
        default="float64",
        metavar="{" + ",".join(sorted(DTYPES)) + "}",
        help="precision of the distances",
    )
    parser.add_argument("--shards", required=True, type=int, help="K: how many shards in all")
    add_tree_arguments(parser)


def spec_from_args(args: argparse.Namespace) -> ShardSpec:
    """The settings of the shards named by the arguments (the files are hashed)."""
    return ShardSpec(
        table_sha256=file_sha256(args.table),
        tree_sha256=file_sha256(args.tree),
        metric=args.metric,
        alpha=args.alpha if args.metric == "generalized" else None,
        dtype=args.dtype,
        prune_missing=args.prune_missing,
        midpoint_root=args.midpoint_root,
        shards=args.shards,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam unifrac-shard`."""
    add_spec_arguments(parser)
    parser.add_argument("--shard", required=True, type=int, help="this shard, 1..K")
    parser.add_argument(
        "--output", required=True, type=Path, help="partial file (.h5) for `aam unifrac-gather`"
    )
    parser.add_argument(
        "--threads", type=checked(int, minimum=1), default=None, help="CPU threads (default: all)"
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: when stderr is a terminal)",
    )


def run(args: argparse.Namespace) -> None:
    """Compute one shard on the built-in CPU engine and write its partial file."""
    output = check_output_file(args.output, HDF5_SUFFIXES, "partial UniFrac")
    table = load_counts(args.table)
    tree = load_tree(args.tree, midpoint_root=args.midpoint_root)
    start = time.perf_counter()
    shard = compute_shard(
        table,
        tree,
        spec_from_args(args),
        args.shard,
        alpha=args.alpha,
        threads=args.threads,
        progress=sys.stderr.isatty() if args.progress is None else args.progress,
        table_name=str(args.table),
        tree_name=str(args.tree),
    )
    write_shard(output, shard)
    log.info(
        "shard %d of %d (rows %d..%d of %d), %s: %.2f s; wrote %s",
        shard.index,
        args.shards,
        shard.start,
        shard.stop - 1,
        len(shard.ids),
        args.metric,
        time.perf_counter() - start,
        output,
    )
