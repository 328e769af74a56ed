"""`aam rarefy`: a BIOM table with every sample subsampled once to ``--rarefy-depth`` reads,
seeded (``aam.data.rarefy.rarefy``): samples with fewer reads are dropped, ASVs left without
reads removed. Rule rarefy runs it for a dataset whose config asks (``rarefy:``), as a user
rarefies an unrarefied table before analysis."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from aam.data.outputs import check_output_file
from aam.data.rarefy import rarefy
from aam.data.table import load_table, write_table
from aam.options import checked

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam rarefy`."""
    parser.add_argument("--table", required=True, type=Path, help="BIOM table of read counts")
    parser.add_argument(
        "--rarefy-depth",
        required=True,
        type=checked(int, minimum=1),
        help="reads drawn from every sample, without replacement",
    )
    parser.add_argument(
        "--seed",
        type=checked(int, minimum=0, maximum=2**32 - 1),
        default=42,
        help="seed of the draw",
    )
    parser.add_argument("--output", required=True, type=Path, help="BIOM table to write")


def run(args: argparse.Namespace) -> None:
    """Write the rarefied table to OUTPUT (BIOM HDF5; nothing is written on an error)."""
    check_output_file(args.output, (".biom",), "rarefied table")
    table = load_table(args.table)
    rarefied, dropped = rarefy(table, args.rarefy_depth, args.seed)
    write_table(args.output, rarefied, "aam rarefy", "rarefied table")
    log.info(
        "%s: %d samples at %d reads (seed %d), %d dropped, %d of %d ASVs kept: %s",
        args.table,
        rarefied.shape[1],
        args.rarefy_depth,
        args.seed,
        len(dropped),
        rarefied.shape[0],
        table.shape[0],
        args.output,
    )
