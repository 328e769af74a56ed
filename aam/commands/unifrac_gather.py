"""`aam unifrac-gather`: merge the partial files of `aam unifrac-shard` into one matrix file."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import aam
from aam.commands.unifrac_shard import add_spec_arguments, spec_from_args
from aam.unifrac.io import HDF5_SUFFIXES, TSV_SUFFIXES, check_distance_output, write_distance_matrix
from aam.unifrac.shards import gather

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam unifrac-gather`: the shards' own inputs and settings, their files."""
    add_spec_arguments(parser)
    parser.add_argument(
        "--partials",
        required=True,
        nargs="+",
        type=Path,
        help="the partial file of every shard (any order)",
    )
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        help=f"output file: {'/'.join(HDF5_SUFFIXES)} (matrix + order) or "
        f"{'/'.join(TSV_SUFFIXES)} (skbio lsmat), as `aam unifrac` writes",
    )


def run(args: argparse.Namespace) -> None:
    """Check every partial file against the inputs and settings, then write the matrix."""
    output = check_distance_output(args.output)
    ids, matrix = gather(args.partials, spec_from_args(args))
    attrs = {
        "metric": args.metric,
        "engine": "builtin",
        "dtype": args.dtype,
        "table": str(args.table),
        "tree": str(args.tree),
        "aam_version": aam.__version__,
        "shards": args.shards,
    }
    if args.metric == "generalized":
        attrs["alpha"] = args.alpha
    write_distance_matrix(output, ids, matrix, attrs)
    log.info("%d shards, %d samples: wrote %s", args.shards, len(ids), output)
