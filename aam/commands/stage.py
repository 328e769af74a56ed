"""`aam stage`: copy inputs into the work area, verified, with a sha256 manifest
(``aam.staging``); with --check-dataset, first the workflow's checks of the dataset's data
(``aam.workflow.dataset_checks``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aam.errors import InputError
from aam.staging import stage_files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam stage`."""
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument("--manifest", default="manifest.sha256", help="manifest file name")
    parser.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="copy PATH to OUTPUT_DIR/NAME (repeat)",
    )
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="like --file, for a newick tree: checked first (readable, named unique tips, "
        "branch lengths), so a bad tree stops here, named by PATH, before any job reads it",
    )
    checks = parser.add_argument_group(
        "dataset checks (the workflow's)",
        "with --check-dataset NAME, the files staged as table.biom and metadata.tsv are checked "
        "first as config datasets.NAME; a problem is one line naming the config field",
    )
    checks.add_argument("--check-dataset", metavar="NAME", help="the dataset's config name")
    checks.add_argument(
        "--check-only",
        action="store_true",
        help="copy nothing: the manifest lists the checked files (the workflow's stage_check)",
    )
    checks.add_argument("--target-column", help="metadata column of the target")
    checks.add_argument("--classifier", action="store_true", help="the target is categorical")
    checks.add_argument("--categorical-columns", default="", help="covariate columns (a,b)")
    checks.add_argument("--split-column", help="metadata column holding the given split")
    checks.add_argument("--split-file", type=Path, help="sample_id<TAB>split TSV")
    checks.add_argument(
        "--folds", nargs="+", default=[], metavar="RUN=K", help="K folds of cross-validated RUN"
    )
    checks.add_argument(
        "--covariates",
        nargs="+",
        default=[],
        metavar="RUN=A,B",
        help="covariate columns of the model of RUN, which predicts this dataset",
    )
    checks.add_argument("--shards", type=int, default=1, help="UniFrac shards of its matrix")


def run(args: argparse.Namespace) -> None:
    """Check every --tree, then stage every --file and --tree and write the manifest (default
    OUTPUT_DIR/manifest.sha256)."""
    files, trees = _named(args.file, "--file"), _named(args.tree, "--tree")
    if not files and not trees:
        raise InputError("nothing to stage; give --file NAME=PATH or --tree NAME=PATH")
    if args.check_dataset:
        _check_dataset(args, files)
    if trees:
        from aam.unifrac.tree import check_tree

        for path in trees.values():
            check_tree(path)
    stage_files(args.output_dir, {**files, **trees}, args.manifest, copy=not args.check_only)


def _named(items: list[str], flag: str) -> dict[str, Path]:
    """NAME -> PATH of ``flag NAME=PATH`` arguments."""
    files = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or "/" in name:
            raise InputError(f"{flag} {item}: expected NAME=PATH with a plain file NAME")
        files[name] = Path(path)
    return files


def _check_dataset(args: argparse.Namespace, files: dict[str, Path]) -> None:
    """The workflow's checks of dataset --check-dataset (``aam.workflow.dataset_checks``)."""
    from aam.workflow.dataset_checks import check_dataset

    if not args.target_column or not {"table.biom", "metadata.tsv"} <= files.keys():
        raise InputError(
            "--check-dataset: give --target-column and --file table.biom=PATH "
            "--file metadata.tsv=PATH"
        )
    check_dataset(
        args.check_dataset,
        files["table.biom"],
        files["metadata.tsv"],
        args.target_column,
        [c for c in args.categorical_columns.split(",") if c],
        args.split_column,
        args.split_file,
        args.classifier,
        folds=_pairs(args.folds, "--folds", int),
        covariates=_pairs(args.covariates, "--covariates", lambda cols: cols.split(",")),
        shards=args.shards,
    )


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
