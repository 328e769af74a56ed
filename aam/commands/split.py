"""`aam split`: a seeded, recorded train/validation/test assignment of samples."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.data.split import make_split, write_split
from aam.training.study import load_study

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam split`."""
    parser.add_argument("--table", required=True, type=Path)
    parser.add_argument(
        "--metadata",
        type=Path,
        help="with --target-column: only samples that have a target value are assigned",
    )
    parser.add_argument("--target-column")
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        help=f"split file to write ({'/'.join(TSV_SUFFIXES)}): sample_id<TAB>split",
    )
    parser.add_argument("--val-fraction", type=float, default=0.1)
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--allow-missing-samples", action="store_true")


def run(args: argparse.Namespace) -> None:
    """Write OUTPUT as sample_id<TAB>split (its name and location are checked first)."""
    check_output_file(args.output, TSV_SUFFIXES, "split")
    study = load_study(
        args.table,
        max_bp=1,
        metadata_path=args.metadata,
        target=args.target_column,
        allow_missing=args.allow_missing_samples,
    )
    split = make_split(
        study.samples.sample_ids,
        val_fraction=args.val_fraction,
        test_fraction=args.test_fraction,
        seed=args.seed,
    )
    write_split(args.output, split)
    log.info("%s: %s", args.output, split.value_counts().to_dict())
