"""`aam split`: a seeded, recorded train/validation/test assignment of samples, one fold of
a seeded K-fold partition (cross-validation), or a nested fraction of a split's training
samples (a learning-curve point), or a few labelled samples of a left-out group (a new-study
point)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from aam.data.metadata import metadata_column
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.data.split import (
    UNUSED,
    given_split,
    make_fold_split,
    make_split,
    nested_split,
    new_study_split,
    one_class_warnings,
    read_split,
    write_split,
)
from aam.data.table import load_table
from aam.errors import InputError
from aam.options import checked
from aam.training.data.study import Labels, load_study
from aam.training.data.study_options import StudyOptions

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam split`."""
    parser.add_argument(
        "--table", required=True, type=Path, help="BIOM table: its samples are split"
    )
    parser.add_argument(
        "--metadata",
        type=Path,
        help="with --target-column: only samples that have a target value are assigned (the "
        "table's others are listed unused)",
    )
    parser.add_argument("--target-column", help="metadata column of the target (with --metadata)")
    parser.add_argument(
        "--classifier",
        action="store_true",
        help="the target is categorical: folds (--folds) and the draws of whole groups "
        "(--group-column) are stratified by class, and a side holding one class is warned of",
    )
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        help=f"split file to write ({'/'.join(TSV_SUFFIXES)}): sample_id<TAB>split",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--from-column",
        help="use this metadata column's train/val/test labels instead of a seeded split",
    )
    source.add_argument(
        "--from-file",
        type=Path,
        help="use this sample_id<TAB>split file's labels instead of a seeded split",
    )
    parser.add_argument(
        "--folds",
        type=int,
        help="K-fold cross-validation: write fold --fold's split (its samples test, "
        "--val-fraction of the others val; --test-fraction is not used); with --from-file the "
        "folds partition that split's train and val samples and its others are unused (a "
        "search's scoring folds: no test sample is in any fold)",
    )
    parser.add_argument("--fold", type=int, help="which fold (1..K) with --folds")
    parser.add_argument(
        "--group-column",
        help="metadata column of groups (a subject, a study) kept whole: no group has samples "
        "on two sides of the split or of any fold (with --metadata)",
    )
    parser.add_argument(
        "--test-group",
        help="leave one group out: this --group-column value's samples are the test samples, "
        "--val-fraction of the others (whole groups) validation (--test-fraction not used)",
    )
    parser.add_argument(
        "--train-fraction",
        type=float,
        help="with --from-file: keep a seeded fraction of its train and of its val samples "
        "(nested: a smaller fraction keeps a subset of a larger one's), label the others "
        "unused, its test samples unchanged (a learning-curve point)",
    )
    parser.add_argument(
        "--new-study-size",
        type=checked(int, minimum=1),
        help="with --from-file, a leave-one-group-out split: draw this many labelled samples "
        "(--val-fraction of them val) of its test samples, the new study, from a pool of "
        "--pool-size; the study's samples outside the pool stay test, all others are unused "
        "(a new-study point; --group-column keeps its subjects whole)",
    )
    parser.add_argument(
        "--pool-size",
        type=checked(int, minimum=1),
        help="with --new-study-size: the new study's samples any point may label (drawn with "
        "--pool-seed), so every size and seed is tested on the same samples",
    )
    parser.add_argument(
        "--pool-seed",
        type=checked(int, minimum=0, maximum=2**32 - 1),
        default=0,
        help="with --new-study-size: seed of the pool's draw",
    )
    parser.add_argument(
        "--val-fraction", type=float, default=0.1, help="fraction of samples for validation"
    )
    parser.add_argument(
        "--test-fraction", type=float, default=0.2, help="fraction of samples for the test set"
    )
    parser.add_argument(
        "--seed",
        type=checked(int, minimum=0, maximum=2**32 - 1),
        default=42,
        help="seed of the split",
    )
    parser.add_argument(
        "--allow-missing-samples",
        action="store_true",
        help="split the samples shared by the table and the metadata instead of failing",
    )


def run(args: argparse.Namespace) -> None:
    """Write OUTPUT as sample_id<TAB>split (its name and location are checked first)."""
    check_output_file(args.output, TSV_SUFFIXES, "split")
    if (args.fold is None) != (args.folds is None):
        raise InputError("--folds and --fold go together: --folds K --fold k (k in 1..K)")
    given = args.from_column or args.from_file
    new_study = args.new_study_size is not None
    if new_study and (args.from_file is None or args.pool_size is None):
        raise InputError("--new-study-size: needs --from-file and --pool-size")
    if given and (args.test_group or (args.group_column and not new_study and not args.folds)):
        raise InputError(
            "--group-column/--test-group: a given split (--from-column/--from-file) is kept as "
            "it is; drop one of them"
        )
    if args.folds is not None and args.from_column:
        raise InputError("--folds with --from-column: folds are drawn, not given; drop one")
    if args.folds is not None and (args.train_fraction is not None or new_study):
        raise InputError(
            "--folds with --train-fraction/--new-study-size: one kind of split; drop one"
        )
    if args.test_group is not None and args.folds is not None:
        raise InputError("--test-group with --folds: folds leave out their own groups; drop one")
    if args.train_fraction is not None and args.from_file is None:
        raise InputError("--train-fraction: needs --from-file, the split whose samples it keeps")
    study = load_study(
        args.table,
        max_bp=1,
        labels=Labels.of(args.metadata, target=args.target_column, classifier=args.classifier),
        reading=StudyOptions(allow_missing_samples=args.allow_missing_samples),
    )
    ids = study.samples.sample_ids
    groups = _groups(args, ids)
    classes = study.class_labels()  # a classifier's class per sample (None: not a classifier)
    if args.folds is not None:
        split = _fold_split(args, study, ids, groups)
    elif args.from_column:
        labels = metadata_column(args.metadata, args.from_column, "--from-column")
        source = f"{args.metadata} column {args.from_column!r}"
        split = given_split(labels, ids, source)
    elif args.from_file:
        split = given_split(read_split(args.from_file), ids, str(args.from_file))
        if args.train_fraction is not None:
            split = nested_split(split, fraction=args.train_fraction, seed=args.seed)
        elif new_study:
            split = new_study_split(
                split,
                size=args.new_study_size,
                pool_size=args.pool_size,
                seed=args.seed,
                pool_seed=args.pool_seed,
                val_fraction=args.val_fraction,
                groups=None if groups is None else pd.Series(groups, index=ids),
            )
    else:
        split = make_split(
            ids,
            val_fraction=args.val_fraction,
            test_fraction=args.test_fraction,
            seed=args.seed,
            groups=groups,
            test_group=args.test_group,
            classes=None if classes is None else list(classes),
        )
    split = _every_sample(split, args.table)
    write_split(args.output, split)
    log.info("%s: %s", args.output, split.value_counts().to_dict())
    if classes is not None:
        group_of = None if groups is None else pd.Series(groups, index=ids)
        for line in one_class_warnings(split, classes, str(args.output), group_of):
            log.warning("%s", line)


def _every_sample(split: pd.Series, table: Path) -> pd.Series:
    """``split`` over every sample of ``table``, in its order: the samples it leaves out (no
    target value, no metadata row) ``unused``, so that a command reading the table and the
    split (pretraining, prediction) finds each of them there."""
    ids = pd.Index([str(sid) for sid in load_table(table).ids()], name="sample_id")
    return split.reindex(ids).fillna(UNUSED).rename("split")


def _fold_split(args: argparse.Namespace, study, ids: list[str], groups) -> pd.Series:
    """Fold --fold of --folds over the samples (with --from-file: over its train and val
    samples only, its others unused), stratified by class for a classifier, keeping
    --group-column's groups whole."""
    keep = np.ones(len(ids), dtype=bool)
    if args.from_file:
        given = given_split(read_split(args.from_file), ids, str(args.from_file))
        keep = given.reindex(ids).isin(["train", "val"]).to_numpy()
        if not keep.any():
            raise InputError(f"{args.from_file}: no train or val sample to draw folds from")
    classes = [study.classes[k] for k in study.targets] if study.classes else None
    pool = [i for i, k in zip(ids, keep, strict=True) if k]
    folds = make_fold_split(
        pool,
        folds=args.folds,
        fold=args.fold,
        val_fraction=args.val_fraction,
        seed=args.seed,
        classes=None if classes is None else [c for c, k in zip(classes, keep, strict=True) if k],
        groups=None if groups is None else [g for g, k in zip(groups, keep, strict=True) if k],
    )
    return folds.reindex(pd.Index(ids, name="sample_id")).fillna("unused").rename("split")


def _groups(args: argparse.Namespace, ids: list[str]) -> list[str] | None:
    """Each sample's --group-column value (None without one); one line for a missing column,
    a sample without a group, or no --metadata."""
    if args.group_column is None:
        if args.test_group is not None:
            raise InputError(f"--test-group {args.test_group}: needs --group-column")
        return None
    groups = metadata_column(args.metadata, args.group_column, "--group-column").reindex(ids)
    missing = groups.index[groups.isna()]
    if len(missing):
        raise InputError(
            f"{args.metadata}: column {args.group_column!r} (--group-column) is empty for "
            f"{len(missing)} sample(s) (e.g. {missing[0]}); give every sample its group"
        )
    return [str(value).strip() for value in groups]
