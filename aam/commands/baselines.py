"""`aam baselines`: the mean predictor and a random forest on relative abundances, fitted on
the training samples of a split, predicting every sample (``aam.baselines``)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from aam.atomic import atomic_output
from aam.baselines import BASELINES, fit_predict
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.errors import InputError
from aam.predictions import prediction_table
from aam.training.study import load_study

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam baselines`."""
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
        help="TSV: sample_id, split, model, prediction (prob_<label> columns for classes)",
    )
    parser.add_argument("--trees", type=int, default=500, help="trees of the random forest")
    parser.add_argument("--seed", type=int, default=42, help="seed of the random forest")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of the forest")


def run(args: argparse.Namespace) -> None:
    """Fit every baseline on the split's train samples; write the predictions of all samples."""
    check_output_file(args.output, TSV_SUFFIXES, "baseline predictions")
    if args.trees < 1:
        raise InputError(f"--trees {args.trees}: must be at least 1")
    study = load_study(
        args.table,
        max_bp=1,
        metadata_path=args.metadata,
        target=args.target_column,
        classifier=args.classifier,
        split_path=args.split,
    )
    train = study.subset("train")
    if not len(train):
        raise InputError(f"{args.split}: no train samples to fit the baselines on")
    positions = np.arange(len(study.samples))
    predicted = fit_predict(
        study, train, positions, trees=args.trees, seed=args.seed, threads=args.threads
    )
    ids = list(study.samples.sample_ids)
    split = study.split.reindex(ids).to_numpy()
    tables = []
    for model in BASELINES:
        table = prediction_table(ids, predicted[model], study.classes)
        table.insert(1, "split", split)
        table.insert(2, "model", model)
        tables.append(table)
    with atomic_output(args.output) as tmp:
        pd.concat(tables).to_csv(tmp, sep="\t", index=False, float_format="%.8g")
    log.info("wrote %s: %s fitted on %d train samples", args.output, BASELINES, len(train))
