"""`aam unifrac`: distance matrices from a BIOM table and a newick tree."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import aam
from aam.data.table import load_counts
from aam.devices import KERNEL_DEVICE
from aam.errors import InputError
from aam.options import checked
from aam.unifrac.engines import ENGINES, compute_unifrac
from aam.unifrac.io import (
    HDF5_SUFFIXES,
    TSV_SUFFIXES,
    check_distance_ids,
    check_distance_output,
    write_distance_matrix,
)
from aam.unifrac.pair_sums import DEFAULT_ALPHA, DTYPES, METRICS
from aam.unifrac.tree import load_tree

log = logging.getLogger(__name__)


def add_tree_arguments(parser: argparse.ArgumentParser) -> None:
    """How the tree meets the table (`aam unifrac` and its shards)."""
    parser.add_argument(
        "--prune-missing",
        action="store_true",
        help="drop ASVs that are not tips of the tree (the dropped read fraction is logged)",
    )
    parser.add_argument(
        "--midpoint-root", action="store_true", help="root an unrooted tree at its midpoint"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam unifrac`."""
    parser.add_argument("--table", required=True, type=Path, help="BIOM table (HDF5 or JSON)")
    parser.add_argument("--tree", required=True, type=Path, help="rooted newick tree")
    parser.add_argument(
        "--metric",
        action="append",
        choices=METRICS,
        required=True,
        help="metric to compute; repeat for several (then --output must contain {metric})",
    )
    parser.add_argument(
        "--alpha", type=float, default=DEFAULT_ALPHA, help="generalized UniFrac alpha"
    )
    parser.add_argument(
        "--output",
        required=True,
        help=f"output file: {'/'.join(HDF5_SUFFIXES)} (matrix + order) or "
        f"{'/'.join(TSV_SUFFIXES)} (skbio lsmat); may contain {{metric}}",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="builtin",
        help="builtin (numba on CPUs, torch on GPUs), or the unifrac or scikit-bio package",
    )
    parser.add_argument(
        "--device", type=checked(str, pattern=KERNEL_DEVICE), default="cpu", help=KERNEL_DEVICE[1]
    )
    parser.add_argument(
        "--dtype", choices=sorted(DTYPES), default="float64", help="precision of the distances"
    )
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: all)")
    add_tree_arguments(parser)
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: when stderr is a terminal)",
    )


def output_paths(template: str, metrics: list[str]) -> dict[str, Path]:
    """One output path per metric, each checked to be a writable distance-matrix file name;
    several metrics need a ``{metric}`` placeholder."""
    if len(metrics) > 1 and "{metric}" not in template:
        raise InputError(
            f"--output {template}: {len(metrics)} metrics need a {{metric}} placeholder "
            "in the output name, e.g. unifrac.{metric}.h5"
        )
    return {m: check_distance_output(template.replace("{metric}", m)) for m in metrics}


def run(args: argparse.Namespace) -> None:
    """Compute and write one distance matrix per requested metric (output names and locations
    are checked first)."""
    metrics = list(dict.fromkeys(args.metric))
    paths = output_paths(args.output, metrics)
    if args.threads is not None and args.threads < 1:
        raise InputError(f"--threads {args.threads}: must be at least 1")
    table = load_counts(args.table)
    for path in paths.values():  # before computing: IDs a TSV output cannot hold
        check_distance_ids(path, table.sample_ids)
    tree = load_tree(args.tree, midpoint_root=args.midpoint_root)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    start = time.perf_counter()
    matrices = compute_unifrac(
        table,
        tree,
        metrics,
        alpha=args.alpha,
        engine=args.engine,
        device=args.device,
        dtype=DTYPES[args.dtype],
        threads=args.threads,
        prune_missing=args.prune_missing,
        progress=progress,
        table_name=str(args.table),
        tree_name=str(args.tree),
    )
    log.info(
        "%d samples, %s: %.2f s with engine %s on %s",
        table.shape[1],
        ", ".join(metrics),
        time.perf_counter() - start,
        args.engine,
        args.device,
    )
    ids = table.sample_ids
    for metric, matrix in matrices.items():
        attrs = {
            "metric": metric,
            "engine": args.engine,
            "dtype": args.dtype,
            "table": str(args.table),
            "tree": str(args.tree),
            "aam_version": aam.__version__,
        }
        if metric == "generalized":
            attrs["alpha"] = args.alpha
        write_distance_matrix(paths[metric], ids, matrix, attrs)
        log.info("wrote %s", paths[metric])
