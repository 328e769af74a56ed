"""`aam unifrac-gather`: merge the partial files of `aam unifrac-shard` into one matrix file."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

import aam
from aam.commands.unifrac_shard import ShardSpecOptions, add_spec_arguments, spec_options
from aam.options import option
from aam.unifrac.io import HDF5_SUFFIXES, TSV_SUFFIXES, check_distance_output, write_distance_matrix
from aam.unifrac.shards import gather

log = logging.getLogger(__name__)


@dataclass
class GatherOptions(ShardSpecOptions):
    """The options of `aam unifrac-gather`: the shards' own inputs and settings, their files."""

    partials: list[Path] = option(
        None, "the partial file of every shard (any order)", required=True
    )
    output: Path = option(
        None,
        f"output file: {'/'.join(HDF5_SUFFIXES)} (matrix + order) or "
        f"{'/'.join(TSV_SUFFIXES)} (skbio lsmat), as `aam unifrac` writes",
        required=True,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam unifrac-gather`: the shards' own inputs and settings, their files."""
    add_spec_arguments(parser, GatherOptions)


def run(args: argparse.Namespace) -> None:
    """Check every partial file against the inputs and settings, then write the matrix."""
    opts = spec_options(GatherOptions, args)
    output = check_distance_output(opts.output)
    ids, matrix = gather(opts.partials, opts.spec())
    attrs = {
        "metric": opts.metric,
        "engine": "builtin",
        "dtype": opts.dtype,
        "table": str(opts.table),
        "tree": str(opts.tree),
        "aam_version": aam.__version__,
        "shards": opts.shards,
    }
    if opts.metric == "generalized":
        attrs["alpha"] = opts.alpha
    write_distance_matrix(output, ids, matrix, attrs)
    log.info("%d shards, %d samples: wrote %s", opts.shards, len(ids), output)
