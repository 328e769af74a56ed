"""`aam baselines`: the constant predictors (the training mean and, for a regression target,
the training median), a random forest on relative abundances, with ``--group-column`` the group
mean and with ``--covariates`` a forest on abundances + those columns, fitted on the training
samples of a split, predicting every sample, or every sample of another study's table
(``aam.analysis.baselines``). Each row names its model's inputs."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

from aam.analysis.baselines import (
    CONSTANTS,
    aligned_abundances,
    fit_predict,
    relative_abundances,
)
from aam.analysis.predictions import MICROBIOME, baseline_table
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.data.split import read_split
from aam.data.table import load_table
from aam.errors import InputError
from aam.options import checked
from aam.runtime.atomic import atomic_output
from aam.training.data.study import Labels, load_study

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam baselines`."""
    add_fit_arguments(parser)
    parser.add_argument(
        "--predict-table",
        type=Path,
        help="predict this other study's BIOM table instead (features: the fitted table's ASVs)",
    )
    parser.add_argument(
        "--group-column",
        help="categorical metadata column (e.g. the study): adds group_mean, each group's "
        "training mean (not with --predict-table: another table's samples have no groups here)",
    )
    parser.add_argument(
        "--covariates",
        nargs="+",
        default=[],
        metavar="COLUMN",
        help="categorical metadata columns AAM reads beside the microbiome: adds "
        "random_forest_covariates, a forest on the abundances + these columns one-hot (not with "
        "--predict-table)",
    )
    parser.add_argument(
        "--pooled-split",
        type=Path,
        help="another `aam split` file of the table: adds random_forest_pooled, the forest "
        "fitted on the train samples and this file's train and val samples (e.g. other "
        "studies' labels beside a new study's few; not with --predict-table)",
    )
    add_forest_options(parser)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of the forest")


def add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    """What a baseline is fitted on and where its predictions go (`aam baselines`, `aam
    embedding-forest`)."""
    parser.add_argument("--table", required=True, type=Path, help="BIOM table")
    parser.add_argument("--metadata", required=True, type=Path, help="sample metadata TSV")
    parser.add_argument("--target-column", required=True, help="metadata column to predict")
    parser.add_argument("--classifier", action="store_true", help="the target is categorical")
    parser.add_argument(
        "--split", required=True, type=Path, help="`aam split` file: fit on its train samples"
    )
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        help="TSV: sample_id, split, model, inputs, prediction (prob_<label> columns for classes)",
    )


def add_forest_options(parser: argparse.ArgumentParser) -> None:
    """The random forest's flags (`aam baselines`, and `aam importance`, which refits it)."""
    trees = checked(int, minimum=1)
    parser.add_argument("--trees", type=trees, default=500, help="trees of the random forest")
    seed = checked(int, minimum=0, maximum=2**32 - 1)  # scikit-learn's random_state
    parser.add_argument("--seed", type=seed, default=42, help="seed of the random forest")


def run(args: argparse.Namespace) -> None:
    """Fit every baseline on the split's train samples; write the predictions of every sample
    of the table (split as in the split file), or of ``--predict-table`` (split empty)."""
    check_output_file(args.output, TSV_SUFFIXES, "baseline predictions")
    group = [args.group_column] if args.group_column else []
    columns = list(dict.fromkeys([*group, *args.covariates]))  # each loaded once, in order
    study = load_study(
        args.table,
        max_bp=1,
        labels=Labels(args.metadata, args.target_column, args.classifier, columns),
        split_path=args.split,
    )
    train = study.subset("train")
    if not len(train):
        raise InputError(f"{args.split}: no train samples to fit the baselines on")
    codes = {c: study.categories[:, k] for k, c in enumerate(columns)}
    groups = codes[args.group_column] if args.group_column else None
    predict_groups = groups
    covariates = np.stack([codes[c] for c in args.covariates], axis=1) if args.covariates else None
    if args.predict_table is None:
        ids = list(study.samples.sample_ids)
        split = study.split.reindex(ids).to_numpy()
        features = relative_abundances(study.samples, np.arange(len(ids)))
    else:
        if groups is not None or covariates is not None:
            log.info(
                "--predict-table: no group_mean or random_forest_covariates (%s's samples have "
                "no groups or covariates here)",
                args.table,
            )
            groups = predict_groups = covariates = None
        other = load_table(args.predict_table)
        ids, split = [str(s) for s in other.ids()], np.full(len(other.ids()), "")
        features = aligned_abundances(other, study.samples.asv_ids, str(args.predict_table))
        _log_unmatched(other, study.samples.asv_ids, args.predict_table)
    pooled = None if args.pooled_split is None else _pooled(args.pooled_split, study)
    if pooled is not None and args.predict_table is not None:
        raise InputError("--pooled-split with --predict-table: fit the pooled forest on one table")
    predicted = fit_predict(
        study,
        train,
        features,
        trees=args.trees,
        seed=args.seed,
        threads=args.threads,
        groups=groups,
        predict_groups=predict_groups,
        covariates=covariates,
        pooled=pooled,
    )
    inputs = {
        **{constant: [] for constant in CONSTANTS},  # they read nothing
        "random_forest": [MICROBIOME],
        "random_forest_covariates": [MICROBIOME, *args.covariates],
        "random_forest_pooled": [MICROBIOME],
        "group_mean": group,
    }
    table = baseline_table(ids, split, predicted, inputs, study.classes)
    with atomic_output(args.output) as tmp:
        table.to_csv(tmp, sep="\t", index=False, float_format="%.8g")
    log.info("wrote %s: %s fitted on %d train samples", args.output, list(predicted), len(train))


def _pooled(path: Path, study) -> np.ndarray:
    """Positions in ``study`` of the train and val samples of split file ``path``; one line
    when it labels none of the study's samples so."""
    labels = read_split(path).reindex(list(study.samples.sample_ids))
    positions = np.flatnonzero(labels.isin(["train", "val"]).to_numpy())
    if not len(positions):
        raise InputError(f"{path}: no train or val sample of the table (--pooled-split)")
    return positions


def _log_unmatched(table, asv_ids: list[str], path: Path) -> None:
    """Log how many of ``table``'s ASVs (and what share of its reads) have no feature."""
    known = set(asv_ids)
    unmatched = np.array([str(asv) not in known for asv in table.ids("observation")])
    reads = np.asarray(table.matrix_data.sum(axis=1)).ravel()
    share = reads[unmatched].sum() / reads.sum()
    log.info(
        "%s: %d of %d ASVs (%.1f%% of the reads) are not in the fitted table: no feature",
        path,
        int(unmatched.sum()),
        len(unmatched),
        100 * share,
    )
