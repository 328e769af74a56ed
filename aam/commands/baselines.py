"""`aam baselines`: the constant predictors (the training mean and, for a regression target,
the training median), a random forest on relative abundances, with ``--group-column`` the group
mean and with ``--covariates`` a forest on abundances + those columns, fitted on the training
samples of a split, predicting every sample, or every sample of another study's table
(``aam.analysis.baselines``). Each row names its model's inputs."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aam.analysis.baselines import (
    CONSTANTS,
    aligned_abundances,
    fit_predict,
    relative_abundances,
)
from aam.analysis.prediction_tables import MICROBIOME, baseline_table
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.data.split import read_split
from aam.data.table import load_table
from aam.errors import InputError
from aam.options import SEED, add_options, check_options, from_args, option
from aam.runtime.atomic import atomic_output
from aam.training.inputs.study import Labels, load_study

log = logging.getLogger(__name__)


@dataclass
class FitOptions:
    """What a baseline is fitted on and where its predictions go (`aam baselines`, `aam
    embedding-forest`)."""

    table: Path = option(None, "BIOM table", required=True)
    metadata: Path = option(None, "sample metadata TSV", required=True)
    target_column: str = option(None, "metadata column to predict", required=True)
    classifier: bool = option(False, "the target is categorical")
    split: Path = option(None, "`aam split` file: fit on its train samples", required=True)
    output: Path = option(
        None,
        "TSV: sample_id, split, model, inputs, prediction (prob_<label> columns for classes)",
        required=True,
    )


@dataclass
class ForestOptions:
    """The random forest's options (`aam baselines`, `aam embedding-forest`, and `aam
    importance`, which refits it)."""

    trees: int = option(500, "trees of the random forest", minimum=1)
    seed: int = option(42, "seed of the random forest", **SEED)


@dataclass
class BaselinesOptions(ForestOptions, FitOptions):
    """The options of `aam baselines` (its fit's, its forest's and its own); the models that
    cannot predict another table are refused with ``--predict-table`` here."""

    predict_table: Path | None = option(
        None,
        "predict this other study's BIOM table instead (features: the fitted table's ASVs)",
    )
    group_column: str | None = option(
        None,
        "categorical metadata column (e.g. the study): adds group_mean, each group's "
        "training mean (not with --predict-table: another table's samples have no groups here)",
    )
    covariates: list[str] = option(
        [],
        "categorical metadata columns AAM reads beside the microbiome: adds "
        "random_forest_covariates, a forest on the abundances + these columns one-hot (not "
        "with --predict-table)",
        metavar="COLUMN",
    )
    pooled_split: Path | None = option(
        None,
        "another `aam split` file of the table: adds random_forest_pooled, the forest fitted "
        "on the train samples and this file's train and val samples (e.g. other studies' "
        "labels beside a new study's few; not with --predict-table)",
    )
    threads: int = option(1, "CPU threads of the forest")

    def __post_init__(self) -> None:
        check_options(self)
        if self.pooled_split is not None and self.predict_table is not None:
            raise InputError(
                "--pooled-split with --predict-table: fit the pooled forest on one table"
            )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam baselines`."""
    add_options(parser, BaselinesOptions)


def add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``FitOptions`` (`aam embedding-forest`)."""
    add_options(parser, FitOptions)


def add_forest_options(parser: argparse.ArgumentParser) -> None:
    """The flags of ``ForestOptions`` (`aam embedding-forest`, `aam importance`)."""
    add_options(parser, ForestOptions)


def run(args: argparse.Namespace) -> None:
    """Fit every baseline on the split's train samples; write the predictions of every sample
    of the table (split as in the split file), or of ``--predict-table`` (split empty)."""
    opts = from_args(BaselinesOptions, args)
    check_output_file(opts.output, TSV_SUFFIXES, "baseline predictions")
    group = [opts.group_column] if opts.group_column else []
    columns = list(dict.fromkeys([*group, *opts.covariates]))  # each loaded once, in order
    study = load_study(
        opts.table,
        max_bp=1,
        labels=Labels(opts.metadata, opts.target_column, opts.classifier, columns),
        split_path=opts.split,
    )
    train = study.subset("train")
    if not len(train):
        raise InputError(f"{opts.split}: no train samples to fit the baselines on")
    codes = {c: study.categories[:, k] for k, c in enumerate(columns)}
    groups = codes[opts.group_column] if opts.group_column else None
    predict_groups = groups
    covariates = np.stack([codes[c] for c in opts.covariates], axis=1) if opts.covariates else None
    if opts.predict_table is None:
        ids = list(study.samples.sample_ids)
        split = study.split.reindex(ids).to_numpy()
        features = relative_abundances(study.samples, np.arange(len(ids)))
    else:
        if groups is not None or covariates is not None:
            log.info(
                "--predict-table: no group_mean or random_forest_covariates (%s's samples have "
                "no groups or covariates here)",
                opts.table,
            )
            groups = predict_groups = covariates = None
        other = load_table(opts.predict_table)
        ids, split = [str(s) for s in other.ids()], np.full(len(other.ids()), "")
        features = aligned_abundances(other, study.samples.asv_ids, str(opts.predict_table))
        _log_unmatched(other, study.samples.asv_ids, opts.predict_table)
    pooled = None if opts.pooled_split is None else _pooled(opts.pooled_split, study)
    predicted = fit_predict(
        study,
        train,
        features,
        trees=opts.trees,
        seed=opts.seed,
        threads=opts.threads,
        groups=groups,
        predict_groups=predict_groups,
        covariates=covariates,
        pooled=pooled,
    )
    inputs = {
        **{constant: [] for constant in CONSTANTS},  # they read nothing
        "random_forest": [MICROBIOME],
        "random_forest_covariates": [MICROBIOME, *opts.covariates],
        "random_forest_pooled": [MICROBIOME],
        "group_mean": group,
    }
    table = baseline_table(ids, split, predicted, inputs, study.classes)
    with atomic_output(opts.output) as tmp:
        table.to_csv(tmp, sep="\t", index=False, float_format="%.8g")
    log.info("wrote %s: %s fitted on %d train samples", opts.output, list(predicted), len(train))


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
