"""`aam match-samples`: a BIOM table without its samples that have no row in a metadata file,
ASVs left without reads removed. Rule match_samples runs it for a dataset with
``drop_samples_without_metadata: true``: every later job of the dataset reads the samples both
files describe (a metadata file's rows of other samples are ignored by every command)."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from aam.data.metadata import load_metadata
from aam.data.outputs import check_output_file
from aam.data.reconcile import preview
from aam.data.table import load_table, write_table
from aam.errors import InputError
from aam.options import add_options, from_args, option

log = logging.getLogger(__name__)


@dataclass
class MatchSamplesOptions:
    """The options of `aam match-samples`."""

    table: Path = option(None, "BIOM table of read counts", required=True)
    metadata: Path = option(None, "sample metadata TSV", required=True)
    output: Path = option(None, "BIOM table to write", required=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam match-samples`."""
    add_options(parser, MatchSamplesOptions)


def run(args: argparse.Namespace) -> None:
    """Write the table's samples that have a metadata row to OUTPUT (BIOM HDF5)."""
    opts = from_args(MatchSamplesOptions, args)
    check_output_file(opts.output, (".biom",), "table")
    table = load_table(opts.table)
    rows = set(load_metadata(opts.metadata).index)
    ids = [str(sid) for sid in table.ids()]
    kept = [sid for sid in ids if sid in rows]
    if not kept:
        raise InputError(
            f"{opts.table} and {opts.metadata} share no sample IDs; check that both files "
            "describe the same samples"
        )
    left_out = [sid for sid in ids if sid not in rows]
    matched = table.filter(kept, inplace=False).remove_empty(axis="observation")
    write_table(opts.output, matched, "aam match-samples", "table")
    log.info(
        "%s: %d of %d samples have a row in %s; left out %d without one%s: %s",
        opts.table,
        len(kept),
        len(ids),
        opts.metadata,
        len(left_out),
        f" ({preview(left_out)})" if left_out else "",
        opts.output,
    )
