"""`aam tree`: phylogeny of a table's ASV sequences (``aam.unifrac.phylogeny``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aam.unifrac.phylogeny import FASTA_SUFFIXES, NEWICK_SUFFIXES, make_tree


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--table",
        required=True,
        type=Path,
        help="BIOM table whose observation IDs are the ASV sequences",
    )
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        help=f"newick tree to write ({', '.join(NEWICK_SUFFIXES)}); tip names are the sequences",
    )
    parser.add_argument(
        "--threads", type=_positive_int, default=1, help="threads for MAFFT (default: 1)"
    )
    parser.add_argument(
        "--keep-alignment",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"also write the MAFFT alignment (FASTA: {', '.join(FASTA_SUFFIXES)}); headers are "
        "the sequences",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def run(args: argparse.Namespace) -> None:
    """Build the tree of `aam tree`."""
    make_tree(args.table, args.output, threads=args.threads, keep_alignment=args.keep_alignment)
