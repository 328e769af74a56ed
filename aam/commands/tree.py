"""`aam tree`: phylogeny of a table's ASV sequences (``aam.unifrac.phylogeny``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from aam.options import add_options, check_options, from_args, option
from aam.unifrac.phylogeny import FASTA_SUFFIXES, NEWICK_SUFFIXES, make_tree


@dataclass
class TreeOptions:
    """The options of `aam tree`."""

    table: Path = option(
        None, "BIOM table whose observation IDs are the ASV sequences", required=True
    )
    output: Path = option(
        None,
        f"newick tree to write ({', '.join(NEWICK_SUFFIXES)}); tip names are the sequences",
        required=True,
    )
    threads: int = option(1, "threads for MAFFT", minimum=1)
    keep_alignment: Path | None = option(
        None,
        f"also write the MAFFT alignment (FASTA: {', '.join(FASTA_SUFFIXES)}); headers are "
        "the sequences",
        metavar="PATH",
    )

    def __post_init__(self) -> None:
        check_options(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam tree`."""
    add_options(parser, TreeOptions)


def run(args: argparse.Namespace) -> None:
    """Build the tree of `aam tree`."""
    opts = from_args(TreeOptions, args)
    make_tree(opts.table, opts.output, threads=opts.threads, keep_alignment=opts.keep_alignment)
