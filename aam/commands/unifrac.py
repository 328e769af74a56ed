"""`aam unifrac`: distance matrices from a BIOM table and a newick tree."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aam
from aam.data.table import load_counts
from aam.device_names import KERNEL_DEVICE
from aam.errors import InputError
from aam.options import add_options, check_options, from_args, option
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


@dataclass
class UnifracInputs:
    """The inputs and settings of a matrix: `aam unifrac`'s, and every shard's of one matrix
    (`aam unifrac-shard`, `aam unifrac-gather`)."""

    table: Path = option(None, "BIOM table (HDF5 or JSON)", required=True)
    tree: Path = option(None, "rooted newick tree", required=True)
    alpha: float = option(DEFAULT_ALPHA, "generalized UniFrac alpha", minimum=0, maximum=1)
    dtype: str = option("float64", "precision of the distances", choices=sorted(DTYPES))
    prune_missing: bool = option(
        False, "drop ASVs that are not tips of the tree (the dropped read fraction is logged)"
    )
    midpoint_root: bool = option(False, "root an unrooted tree at its midpoint")

    def __post_init__(self) -> None:
        check_options(self)


@dataclass
class Computing:
    """How a matrix (or a shard of one) is computed on the CPUs."""

    threads: int | None = option(None, "CPU threads (default: all)", minimum=1)
    progress: bool | None = option(None, "progress bar (default: when stderr is a terminal)")


@dataclass
class UnifracOptions(Computing, UnifracInputs):
    """The options of `aam unifrac`."""

    metric: list[str] = option(
        None,
        "metric to compute; repeat for several (then --output must contain {metric})",
        choices=METRICS,
        required=True,
        repeat=True,
    )
    output: str = option(
        None,
        f"output file: {'/'.join(HDF5_SUFFIXES)} (matrix + order) or "
        f"{'/'.join(TSV_SUFFIXES)} (skbio lsmat); may contain {{metric}}",
        required=True,
    )
    engine: str = option(
        "builtin",
        "builtin (numba on CPUs, torch on GPUs), or the unifrac or scikit-bio package",
        choices=ENGINES,
    )
    device: str = option("cpu", KERNEL_DEVICE[1], pattern=KERNEL_DEVICE)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam unifrac`."""
    add_options(parser, UnifracOptions)


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
    opts = from_args(UnifracOptions, args)
    metrics = list(dict.fromkeys(opts.metric))
    paths = output_paths(opts.output, metrics)
    table = load_counts(opts.table)
    for path in paths.values():  # before computing: IDs a TSV output cannot hold
        check_distance_ids(path, table.sample_ids)
    tree = load_tree(opts.tree, midpoint_root=opts.midpoint_root)
    progress = sys.stderr.isatty() if opts.progress is None else opts.progress
    start = time.perf_counter()
    matrices = compute_unifrac(
        table,
        tree,
        metrics,
        alpha=opts.alpha,
        engine=opts.engine,
        device=opts.device,
        dtype=DTYPES[opts.dtype],
        threads=opts.threads,
        prune_missing=opts.prune_missing,
        progress=progress,
        table_name=str(opts.table),
        tree_name=str(opts.tree),
    )
    log.info(
        "%d samples, %s: %.2f s with engine %s on %s",
        table.shape[1],
        ", ".join(metrics),
        time.perf_counter() - start,
        opts.engine,
        opts.device,
    )
    ids = table.sample_ids
    for metric, matrix in matrices.items():
        attrs = {
            "metric": metric,
            "engine": opts.engine,
            "dtype": opts.dtype,
            "table": str(opts.table),
            "tree": str(opts.tree),
            "aam_version": aam.__version__,
        }
        if metric == "generalized":
            attrs["alpha"] = opts.alpha
        write_distance_matrix(paths[metric], ids, matrix, attrs)
        log.info("wrote %s", paths[metric])
