"""`aam rarefy`: a BIOM table with every sample subsampled once to ``--rarefy-depth`` reads,
seeded (``aam.data.rarefy.rarefy``): samples with fewer reads are dropped, ASVs left without
reads removed. Rule rarefy runs it for a dataset whose config asks (``rarefy:``), as a user
rarefies an unrarefied table before analysis."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from aam.data.outputs import check_output_file
from aam.data.rarefy import rarefy
from aam.data.table import load_table, write_table
from aam.options import SEED, add_options, check_options, from_args, option

log = logging.getLogger(__name__)


@dataclass
class RarefyOptions:
    """The options of `aam rarefy`."""

    table: Path = option(None, "BIOM table of read counts", required=True)
    rarefy_depth: int = option(
        None, "reads drawn from every sample, without replacement", required=True, minimum=1
    )
    seed: int = option(42, "seed of the draw", **SEED)
    output: Path = option(None, "BIOM table to write", required=True)

    def __post_init__(self) -> None:
        check_options(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam rarefy`."""
    add_options(parser, RarefyOptions)


def run(args: argparse.Namespace) -> None:
    """Write the rarefied table to OUTPUT (BIOM HDF5; nothing is written on an error)."""
    opts = from_args(RarefyOptions, args)
    check_output_file(opts.output, (".biom",), "rarefied table")
    table = load_table(opts.table)
    rarefied, dropped = rarefy(table, opts.rarefy_depth, opts.seed)
    write_table(opts.output, rarefied, "aam rarefy", "rarefied table")
    log.info(
        "%s: %d samples at %d reads (seed %d), %d dropped, %d of %d ASVs kept: %s",
        opts.table,
        rarefied.shape[1],
        opts.rarefy_depth,
        opts.seed,
        len(dropped),
        rarefied.shape[0],
        table.shape[0],
        opts.output,
    )
