"""`aam taxonomy`: each ASV of a table classified by the RDP classifier trained on a training
set, as QIIME 2's taxonomy.tsv (``aam.analysis.rdp``)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from aam.analysis.rdp import DEBIAN_JAR, classify_table
from aam.options import checked


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam taxonomy`."""
    parser.add_argument(
        "--table", required=True, type=Path, help="BIOM table whose observation IDs are the ASVs"
    )
    parser.add_argument(
        "--training-sequences",
        required=True,
        type=Path,
        help="RDP training FASTA, the lineage in each header (e.g. trainset19_072023.fa)",
    )
    parser.add_argument(
        "--training-taxa",
        required=True,
        type=Path,
        help="RDP taxonomy of taxid*name*parent*depth*rank lines (e.g. *_db_taxid.txt)",
    )
    parser.add_argument(
        "--output", required=True, type=Path, help="taxonomy.tsv (Feature ID, Taxon, Confidence)"
    )
    parser.add_argument(
        "--confidence",
        type=checked(float, minimum=0, maximum=1),
        default=0.8,
        help="lineages are cut above the first rank of lower bootstrap confidence",
    )
    parser.add_argument("--rdp-jar", type=Path, default=DEBIAN_JAR, help="the RDP classifier's jar")
    parser.add_argument(
        "--java-heap", type=_heap, default="4g", help="the JVM's -Xmx (a full training set: GBs)"
    )


def _heap(text: str) -> str:
    """A JVM memory size: digits and an optional unit (k, m, g)."""
    if not re.fullmatch(r"[1-9][0-9]*[kKmMgG]?", text):
        raise argparse.ArgumentTypeError(f"expected a size like 512m or 4g, got {text!r}")
    return text


def run(args: argparse.Namespace) -> None:
    """Train, classify, write the taxonomy."""
    classify_table(
        args.table,
        args.training_sequences,
        args.training_taxa,
        args.output,
        confidence=args.confidence,
        jar=args.rdp_jar,
        heap=args.java_heap,
    )
