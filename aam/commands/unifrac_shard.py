"""`aam unifrac-shard`: shard i of K of a UniFrac matrix (merge with `aam unifrac-gather`)."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from aam.commands.unifrac import Computing, UnifracInputs
from aam.data.outputs import check_output_file
from aam.data.table import load_counts
from aam.options import StoreOnce, add_options, checked, from_args, option
from aam.unifrac.io import HDF5_SUFFIXES
from aam.unifrac.pair_sums import METRICS
from aam.unifrac.shards import ShardSpec, compute_shard, file_sha256, write_shard
from aam.unifrac.tree import load_tree

log = logging.getLogger(__name__)


class OneMetric(StoreOnce):
    why = "a shard holds one metric (`aam unifrac` computes several at once)"


@dataclass
class ShardSpecOptions(UnifracInputs):
    """The inputs and settings every shard of one matrix shares (also `aam unifrac-gather`'s,
    which checks each partial file against them). ``metric`` is the one flag written by hand
    (``add_spec_arguments``): a second --metric is refused, not silently taken."""

    shards: int = option(None, "K: how many shards in all", required=True)
    metric: str = ""  # --metric (add_spec_arguments)

    def spec(self) -> ShardSpec:
        """The settings of the shards these options name (the files are hashed)."""
        return ShardSpec(
            table_sha256=file_sha256(self.table),
            tree_sha256=file_sha256(self.tree),
            metric=self.metric,
            alpha=self.alpha if self.metric == "generalized" else None,
            dtype=self.dtype,
            prune_missing=self.prune_missing,
            midpoint_root=self.midpoint_root,
            shards=self.shards,
        )


def add_spec_arguments(parser: argparse.ArgumentParser, cls: type[ShardSpecOptions]) -> None:
    """The flags of ``cls``, a ``ShardSpecOptions``, and its --metric: a flag of one value that
    refuses a second (``StoreOnce``), which an ``option`` field cannot declare."""
    add_options(parser, cls)
    parser.add_argument(
        "--metric",
        required=True,
        action=OneMetric,
        type=checked(str, choices=METRICS),
        metavar="{" + ",".join(METRICS) + "}",
        help="the metric of the matrix (one; `aam unifrac` computes several at once)",
    )


def spec_options(cls: type[ShardSpecOptions], args: argparse.Namespace) -> ShardSpecOptions:
    """The ``cls`` instance of the parsed flags (``add_spec_arguments``)."""
    return from_args(cls, args, metric=args.metric)


@dataclass
class ShardOptions(Computing, ShardSpecOptions):
    """The options of `aam unifrac-shard`."""

    shard: int = option(None, "this shard, 1..K", required=True)
    output: Path = option(None, "partial file (.h5) for `aam unifrac-gather`", required=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam unifrac-shard`."""
    add_spec_arguments(parser, ShardOptions)


def run(args: argparse.Namespace) -> None:
    """Compute one shard on the built-in CPU engine and write its partial file."""
    opts = spec_options(ShardOptions, args)
    output = check_output_file(opts.output, HDF5_SUFFIXES, "partial UniFrac")
    table = load_counts(opts.table)
    tree = load_tree(opts.tree, midpoint_root=opts.midpoint_root)
    start = time.perf_counter()
    shard = compute_shard(
        table,
        tree,
        opts.spec(),
        opts.shard,
        alpha=opts.alpha,
        threads=opts.threads,
        progress=sys.stderr.isatty() if opts.progress is None else opts.progress,
        table_name=str(opts.table),
        tree_name=str(opts.tree),
    )
    write_shard(output, shard)
    log.info(
        "shard %d of %d (rows %d..%d of %d), %s: %.2f s; wrote %s",
        shard.index,
        opts.shards,
        shard.start,
        shard.stop - 1,
        len(shard.ids),
        opts.metric,
        time.perf_counter() - start,
        output,
    )
