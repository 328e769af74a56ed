"""`aam taxonomy`: each ASV of a table classified by the RDP classifier trained on a training
set, as QIIME 2's taxonomy.tsv (``aam.analysis.rdp``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from aam.analysis.rdp import DEBIAN_JAR, classify_table
from aam.options import add_options, check_options, from_args, option

# A JVM memory size: digits and an optional unit (k, m, g).
HEAP = (r"[1-9][0-9]*[kKmMgG]?", "a size like 512m or 4g")


@dataclass
class TaxonomyOptions:
    """The options of `aam taxonomy`."""

    table: Path = option(None, "BIOM table whose observation IDs are the ASVs", required=True)
    training_sequences: Path = option(
        None,
        "RDP training FASTA, the lineage in each header (e.g. trainset19_072023.fa)",
        required=True,
    )
    training_taxa: Path = option(
        None,
        "RDP taxonomy of taxid*name*parent*depth*rank lines (e.g. *_db_taxid.txt)",
        required=True,
    )
    output: Path = option(None, "taxonomy.tsv (Feature ID, Taxon, Confidence)", required=True)
    confidence: float = option(
        0.8,
        "lineages are cut above the first rank of lower bootstrap confidence",
        minimum=0,
        maximum=1,
    )
    rdp_jar: Path = option(DEBIAN_JAR, "the RDP classifier's jar")
    java_heap: str = option("4g", "the JVM's -Xmx (a full training set: GBs)", pattern=HEAP)

    def __post_init__(self) -> None:
        check_options(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam taxonomy`."""
    add_options(parser, TaxonomyOptions)


def run(args: argparse.Namespace) -> None:
    """Train, classify, write the taxonomy."""
    opts = from_args(TaxonomyOptions, args)
    classify_table(
        opts.table,
        opts.training_sequences,
        opts.training_taxa,
        opts.output,
        confidence=opts.confidence,
        jar=opts.rdp_jar,
        heap=opts.java_heap,
    )
