"""`aam check-data`: the workflow's checks of a dataset's table and metadata against its config
(``aam.workflow.dataset_checks``), then a sha256 manifest of the checked files (rule check_data:
the first job that parses a dataset, before any other job reads it). A command of its own, so
that an edit of the data readers reruns this check, never the staging of the data."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aam.errors import InputError
from aam.runtime.atomic import atomic_output, check_output_path
from aam.runtime.staging import sha256_of
from aam.workflow.dataset_checks import check_dataset

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam check-data`."""
    parser.add_argument("--dataset", required=True, help="the dataset's config name (messages)")
    parser.add_argument("--table", required=True, type=Path, help="BIOM table or table.qza")
    parser.add_argument(
        "--sequences", type=Path, help="FASTA or rep-seqs.qza of the table's feature IDs"
    )
    parser.add_argument("--metadata", required=True, type=Path, help="sample metadata TSV")
    parser.add_argument("--output", required=True, type=Path, help="manifest to write")
    parser.add_argument(
        "--samples",
        type=Path,
        help="JSON to write: how many samples the table and the metadata hold, share, and hold "
        "alone, and how many shared ones have a target (and that as the log's line, for the "
        "landing page)",
    )
    parser.add_argument("--target-column", required=True, help="metadata column of the target")
    parser.add_argument("--classifier", action="store_true", help="the target is categorical")
    parser.add_argument("--categorical-columns", default="", help="covariate columns (a,b)")
    parser.add_argument("--split-column", help="metadata column holding the given split")
    parser.add_argument("--group-column", help="metadata column of the groups (e.g. the study)")
    parser.add_argument("--split-file", type=Path, help="sample_id<TAB>split TSV")
    parser.add_argument(
        "--split-group-column", help="metadata column of the groups the split keeps whole"
    )
    parser.add_argument(
        "--folds", nargs="+", default=[], metavar="RUN=K", help="K folds of cross-validated RUN"
    )
    parser.add_argument(
        "--predict-on",
        nargs="+",
        default=[],
        metavar="RUN=DATASET=METADATA",
        help="RUN predicts DATASET: its METADATA needs the covariate columns",
    )
    parser.add_argument("--shards", type=int, default=1, help="UniFrac shards of its matrix")
    parser.add_argument(
        "--rarefied", action="store_true", help="the table is rarefied first (drops empty samples)"
    )
    parser.add_argument(
        "--drop-samples-without-metadata",
        action="store_true",
        help="leave out table samples without a metadata row (the jobs read the table without "
        "them) instead of stopping",
    )
    parser.add_argument(
        "--lsmat",
        action="store_true",
        help="its UniFrac matrix is written as an lsmat TSV (PCoA): sample IDs must fit one",
    )


def run(args: argparse.Namespace) -> None:
    """Check the dataset; log how its table and metadata meet (and write it, --samples);
    write ``<sha256>  <path>`` of the table and the metadata."""
    check_output_path(args.output, "manifest")
    if args.samples is not None:
        check_output_path(args.samples, "sample counts")
    counts = check_dataset(
        args.dataset,
        args.table,
        args.metadata,
        args.target_column,
        [c for c in args.categorical_columns.split(",") if c],
        args.split_column,
        args.split_file,
        args.classifier,
        folds=_pairs(args.folds, "--folds", int),
        predict_on=[_predicted(item) for item in args.predict_on],
        shards=args.shards,
        group_column=args.group_column,
        split_group_column=args.split_group_column,
        sequences=args.sequences,
        rarefied=args.rarefied,
        lsmat=args.lsmat,
        drop_samples_without_metadata=args.drop_samples_without_metadata,
    )
    line = counts.line(args.dataset, args.target_column)
    log.info("%s", line)
    if args.samples is not None:
        with atomic_output(args.samples) as tmp:
            tmp.write_text(json.dumps(dataclasses.asdict(counts) | {"line": line}, indent=2) + "\n")
    with atomic_output(args.output) as tmp:
        checked = (args.table, args.metadata, *([args.sequences] if args.sequences else []))
        tmp.write_text("".join(f"{sha256_of(p)}  {p}\n" for p in checked))


def _predicted(item: str) -> tuple[str, str, Path]:
    """(run, dataset, metadata file) of a ``--predict-on RUN=DATASET=METADATA`` item."""
    run, dataset, path = (item.split("=", 2) + ["", ""])[:3]
    if not (run and dataset and path):
        raise InputError(f"--predict-on {item}: expected RUN=DATASET=METADATA")
    return run, dataset, Path(path)


def _pairs(items: list[str], flag: str, convert: Callable[[str], Any]) -> dict[str, Any]:
    """KEY -> convert(VALUE) of ``flag KEY=VALUE ...`` arguments."""
    pairs = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            pairs[key] = convert(value) if key and value else None
        except ValueError:
            pairs[key] = None
        if pairs[key] is None:
            raise InputError(f"{flag} {item}: expected KEY=VALUE")
    return pairs
