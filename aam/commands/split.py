"""`aam split`: a seeded, recorded train/validation/test assignment of samples, one fold of
a seeded K-fold partition (cross-validation), or a nested fraction of a split's training
samples (a learning-curve point), or a few labelled samples of a left-out group (a new-study
point)."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
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
from aam.options import SEED, add_options, check_options, from_args, option
from aam.training.inputs.study import Labels, load_study
from aam.training.inputs.study_options import StudyOptions

log = logging.getLogger(__name__)


@dataclass
class SplitOptions:
    """The options of `aam split`; the combinations that make no split are refused here."""

    table: Path = option(None, "BIOM table: its samples are split", required=True)
    output: Path = option(
        None,
        f"split file to write ({'/'.join(TSV_SUFFIXES)}): sample_id<TAB>split",
        required=True,
    )
    metadata: Path | None = option(
        None,
        "with --target-column: only samples that have a target value are assigned (the "
        "table's others are listed unused)",
    )
    target_column: str | None = option(None, "metadata column of the target (with --metadata)")
    classifier: bool = option(
        False,
        "the target is categorical: folds (--folds) and the draws of whole groups "
        "(--group-column) are stratified by class, and a side holding one class is warned of",
    )
    from_column: str | None = option(
        None,
        "use this metadata column's train/val/test labels instead of a seeded split",
        exclusive="source",
    )
    from_file: Path | None = option(
        None,
        "use this sample_id<TAB>split file's labels instead of a seeded split",
        exclusive="source",
    )
    folds: int | None = option(
        None,
        "K-fold cross-validation: write fold --fold's split (its samples test, --val-fraction "
        "of the others val; --test-fraction is not used); with --from-file the folds "
        "partition that split's train and val samples and its others are unused (a search's "
        "scoring folds: no test sample is in any fold)",
        minimum=2,
    )
    fold: int | None = option(None, "which fold (1..K) with --folds", minimum=1)
    group_column: str | None = option(
        None,
        "metadata column of groups (a subject, a study) kept whole: no group has samples on "
        "two sides of the split or of any fold (with --metadata)",
    )
    test_group: str | None = option(
        None,
        "leave one group out: this --group-column value's samples are the test samples, "
        "--val-fraction of the others (whole groups) validation (--test-fraction not used)",
    )
    train_fraction: float | None = option(
        None,
        "with --from-file: keep a seeded fraction of its train and of its val samples "
        "(nested: a smaller fraction keeps a subset of a larger one's), label the others "
        "unused, its test samples unchanged (a learning-curve point)",
        exclusive_minimum=0,
        maximum=1,
    )
    new_study_size: int | None = option(
        None,
        "with --from-file, a leave-one-group-out split: draw this many labelled samples "
        "(--val-fraction of them val) of its test samples, the new study, from a pool of "
        "--pool-size; the study's samples outside the pool stay test, all others are unused "
        "(a new-study point; --group-column keeps its subjects whole)",
        minimum=1,
    )
    pool_size: int | None = option(
        None,
        "with --new-study-size: the new study's samples any point may label (drawn with "
        "--pool-seed), so every size and seed is tested on the same samples",
        minimum=1,
    )
    pool_seed: int = option(0, "with --new-study-size: seed of the pool's draw", **SEED)
    val_fraction: float = option(0.1, "fraction of samples for validation", minimum=0, maximum=1)
    test_fraction: float = option(0.2, "fraction of samples for the test set", minimum=0, maximum=1)
    seed: int = option(42, "seed of the split", **SEED)
    allow_missing_samples: bool = option(
        False, "split the samples shared by the table and the metadata instead of failing"
    )

    def __post_init__(self) -> None:
        check_options(self)
        given = self.from_column or self.from_file
        new_study = self.new_study_size is not None
        if (self.fold is None) != (self.folds is None):
            raise InputError("--folds and --fold go together: --folds K --fold k (k in 1..K)")
        if new_study and (self.from_file is None or self.pool_size is None):
            raise InputError("--new-study-size: needs --from-file and --pool-size")
        if given and (self.test_group or (self.group_column and not new_study and not self.folds)):
            raise InputError(
                "--group-column/--test-group: a given split (--from-column/--from-file) is kept "
                "as it is; drop one of them"
            )
        if self.folds is not None and self.from_column:
            raise InputError("--folds with --from-column: folds are drawn, not given; drop one")
        if self.folds is not None and (self.train_fraction is not None or new_study):
            raise InputError(
                "--folds with --train-fraction/--new-study-size: one kind of split; drop one"
            )
        if self.test_group is not None and self.folds is not None:
            raise InputError(
                "--test-group with --folds: folds leave out their own groups; drop one"
            )
        if self.train_fraction is not None and self.from_file is None:
            raise InputError(
                "--train-fraction: needs --from-file, the split whose samples it keeps"
            )
        if self.test_group is not None and self.group_column is None:
            raise InputError(f"--test-group {self.test_group}: needs --group-column")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam split`."""
    add_options(parser, SplitOptions)


def run(args: argparse.Namespace) -> None:
    """Write OUTPUT as sample_id<TAB>split (its name and location are checked first)."""
    opts = from_args(SplitOptions, args)
    check_output_file(opts.output, TSV_SUFFIXES, "split")
    new_study = opts.new_study_size is not None
    study = load_study(
        opts.table,
        max_bp=1,
        labels=Labels.of(opts.metadata, target=opts.target_column, classifier=opts.classifier),
        reading=StudyOptions(allow_missing_samples=opts.allow_missing_samples),
    )
    ids = study.samples.sample_ids
    groups = _groups(opts, ids)
    classes = study.class_labels()  # a classifier's class per sample (None: not a classifier)
    if opts.folds is not None:
        split = _fold_split(opts, study, ids, groups)
    elif opts.from_column:
        labels = metadata_column(opts.metadata, opts.from_column, "--from-column")
        source = f"{opts.metadata} column {opts.from_column!r}"
        split = given_split(labels, ids, source)
    elif opts.from_file:
        split = given_split(read_split(opts.from_file), ids, str(opts.from_file))
        if opts.train_fraction is not None:
            split = nested_split(split, fraction=opts.train_fraction, seed=opts.seed)
        elif new_study:
            split = new_study_split(
                split,
                size=opts.new_study_size,
                pool_size=opts.pool_size,
                seed=opts.seed,
                pool_seed=opts.pool_seed,
                val_fraction=opts.val_fraction,
                groups=None if groups is None else pd.Series(groups, index=ids),
            )
    else:
        split = make_split(
            ids,
            val_fraction=opts.val_fraction,
            test_fraction=opts.test_fraction,
            seed=opts.seed,
            groups=groups,
            test_group=opts.test_group,
            classes=None if classes is None else list(classes),
        )
    split = _every_sample(split, opts.table)
    write_split(opts.output, split)
    log.info("%s: %s", opts.output, split.value_counts().to_dict())
    if classes is not None:
        group_of = None if groups is None else pd.Series(groups, index=ids)
        for line in one_class_warnings(split, classes, str(opts.output), group_of):
            log.warning("%s", line)


def _every_sample(split: pd.Series, table: Path) -> pd.Series:
    """``split`` over every sample of ``table``, in its order: the samples it leaves out (no
    target value, no metadata row) ``unused``, so that a command reading the table and the
    split (pretraining, prediction) finds each of them there."""
    ids = pd.Index([str(sid) for sid in load_table(table).ids()], name="sample_id")
    return split.reindex(ids).fillna(UNUSED).rename("split")


def _fold_split(opts: SplitOptions, study, ids: list[str], groups) -> pd.Series:
    """Fold --fold of --folds over the samples (with --from-file: over its train and val
    samples only, its others unused), stratified by class for a classifier, keeping
    --group-column's groups whole."""
    keep = np.ones(len(ids), dtype=bool)
    if opts.from_file:
        given = given_split(read_split(opts.from_file), ids, str(opts.from_file))
        keep = given.reindex(ids).isin(["train", "val"]).to_numpy()
        if not keep.any():
            raise InputError(f"{opts.from_file}: no train or val sample to draw folds from")
    classes = [study.classes[k] for k in study.targets] if study.classes else None
    pool = [i for i, k in zip(ids, keep, strict=True) if k]
    folds = make_fold_split(
        pool,
        folds=opts.folds,
        fold=opts.fold,
        val_fraction=opts.val_fraction,
        seed=opts.seed,
        classes=None if classes is None else [c for c, k in zip(classes, keep, strict=True) if k],
        groups=None if groups is None else [g for g, k in zip(groups, keep, strict=True) if k],
    )
    return folds.reindex(pd.Index(ids, name="sample_id")).fillna("unused").rename("split")


def _groups(opts: SplitOptions, ids: list[str]) -> list[str] | None:
    """Each sample's --group-column value (None without one); one line for a missing column,
    a sample without a group, or no --metadata."""
    if opts.group_column is None:
        return None
    groups = metadata_column(opts.metadata, opts.group_column, "--group-column").reindex(ids)
    missing = groups.index[groups.isna()]
    if len(missing):
        raise InputError(
            f"{opts.metadata}: column {opts.group_column!r} (--group-column) is empty for "
            f"{len(missing)} sample(s) (e.g. {missing[0]}); give every sample its group"
        )
    return [str(value).strip() for value in groups]
