"""`aam predict`: predictions in the target's own units, metrics when the truth is known, and
with the model's training table and split a domain-shift report of this table."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from aam.analysis.figures import add_label_arguments
from aam.analysis.predict import PredictOptions, predict
from aam.data.split import SPLITS
from aam.options import add_options, checked, from_args
from aam.runtime.figures import add_format_argument
from aam.training.config import RuntimeConfig
from aam.training.data.study_options import StudyOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam predict`."""
    parser.add_argument(
        "--model",
        required=True,
        nargs="+",
        type=Path,
        help="model.pt from `aam finetune`; several: an ensemble (the mean of their predictions, "
        "of their class probabilities for classes) of models of the same target and covariates",
    )
    parser.add_argument("--table", required=True, type=Path, help="BIOM table of the samples")
    parser.add_argument(
        "--output-dir", required=True, type=Path, help="predictions.tsv, metrics.json, plots"
    )
    parser.add_argument(
        "--metadata",
        type=Path,
        help="truth for metrics; needed by models with categorical covariates",
    )
    parser.add_argument("--split", type=Path, help="predict only one split of this split.tsv")
    parser.add_argument(
        "--subset", default="test", choices=SPLITS, help="the split predicted with --split"
    )
    parser.add_argument(
        "--baselines",
        nargs="+",
        default=[],
        type=Path,
        help="`aam baselines` (and `aam embedding-forest`) predictions, scored beside the model "
        "on the same samples",
    )
    parser.add_argument(
        "--group-column",
        help="categorical metadata column (e.g. the study): metrics per group as well "
        "(metrics.json by_group) and the scatter coloured by group; needs --metadata",
    )
    parser.add_argument(
        "--split-group-column",
        help="metadata column of the groups (subjects, studies) the split kept whole: "
        "metrics.json split_groups says whether the test samples' groups have training "
        "samples, and the bootstrap intervals resample whole groups; needs --metadata and "
        "--split (without it, --group-column's groups give split_groups alone)",
    )
    parser.add_argument(
        "--target-column",
        help="metadata column holding the truth (default: the model's target column)",
    )
    parser.add_argument(
        "--training-table",
        type=Path,
        help="the table the model was fine-tuned on: write domain_shift.json (needs "
        "--training-split)",
    )
    parser.add_argument("--training-split", type=Path, help="the split the model was fine-tuned on")
    add_label_arguments(parser)
    add_format_argument(parser)
    parser.add_argument("--scratch", help="node-local dir to copy inputs to first")
    parser.add_argument(
        "--batch-size", type=checked(int, minimum=1), default=32, help="samples per batch"
    )
    add_options(parser, StudyOptions, "predict")
    add_options(parser, RuntimeConfig, "predict")


def run(args: argparse.Namespace) -> None:
    """Predict: the stage is ``aam.analysis.predict.predict`` (flags typed here)."""
    typed = {"reading", "runtime"}
    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(PredictOptions)
        if f.name not in typed
    }
    reading = from_args(StudyOptions, args, val_fraction=0.0)
    predict(PredictOptions(**given, reading=reading, runtime=from_args(RuntimeConfig, args)))
