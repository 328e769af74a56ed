"""`aam finetune`: fine-tune on a metadata target, optionally from a pretrained encoder."""

from __future__ import annotations

import argparse
from pathlib import Path

from aam.commands.common import add_common_arguments, training_options
from aam.profiling.probe import memory_curve
from aam.training.config import CLASSIFIER_METRICS, REGRESSION_METRICS, check_best_metric
from aam.training.run import Target, finetune


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam finetune`."""
    target = parser.add_argument_group("target")
    target.add_argument("--metadata", required=True, type=Path, help="sample metadata TSV")
    target.add_argument("--target-column", required=True, help="metadata column to predict")
    target.add_argument("--classifier", action="store_true", help="the target is categorical")
    target.add_argument(
        "--categorical-columns",
        default="",
        help="comma-separated metadata columns used as covariates",
    )
    target.add_argument("--pretrained-encoder", type=Path, help="encoder.pt from aam pretrain")
    add_common_arguments(parser, "finetune")


def run(args: argparse.Namespace) -> None:
    """Fine-tune a SequencePredictor and write OUTPUT_DIR/model.pt (+ history, split): the run
    is ``aam.training.run.finetune`` (one writer per output directory)."""
    if args.classifier:
        check_best_metric(args.best_metric, CLASSIFIER_METRICS, "for a classifier")
    else:
        check_best_metric(args.best_metric, REGRESSION_METRICS, "for a regression target")
    target = Target(
        metadata=args.metadata,
        column=args.target_column,
        classifier=args.classifier,
        categorical=[c for c in args.categorical_columns.split(",") if c],
        encoder=args.pretrained_encoder,
    )
    finetune(training_options(args, "finetune"), target, memory_curve)
