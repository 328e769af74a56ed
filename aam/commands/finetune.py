"""`aam finetune`: fine-tune on a metadata target, optionally from a pretrained encoder."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from aam.commands.common import add_common_arguments, training_options
from aam.options import add_options, from_args, option
from aam.profiling.probe import memory_curve
from aam.training.config import CLASSIFIER_METRICS, REGRESSION_METRICS, check_best_metric
from aam.training.run import Target, finetune


@dataclass
class TargetOptions:
    """The flags of the target `aam finetune` learns (its help section "target")."""

    metadata: Path = option(None, "sample metadata TSV", required=True)
    target_column: str = option(None, "metadata column to predict", required=True)
    classifier: bool = option(False, "the target is categorical")
    categorical_columns: str = option("", "comma-separated metadata columns used as covariates")
    pretrained_encoder: Path | None = option(None, "encoder.pt from aam pretrain")

    def target(self) -> Target:
        """The run's target: the column, its kind, the covariates and the starting encoder."""
        return Target(
            metadata=self.metadata,
            column=self.target_column,
            classifier=self.classifier,
            categorical=[c for c in self.categorical_columns.split(",") if c],
            encoder=self.pretrained_encoder,
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam finetune`."""
    add_options(parser.add_argument_group("target"), TargetOptions)
    add_common_arguments(parser, "finetune")


def run(args: argparse.Namespace) -> None:
    """Fine-tune a SequencePredictor and write OUTPUT_DIR/model.pt (+ history, split): the run
    is ``aam.training.run.finetune`` (one writer per output directory)."""
    opts = from_args(TargetOptions, args)
    if opts.classifier:
        check_best_metric(args.best_metric, CLASSIFIER_METRICS, "for a classifier")
    else:
        check_best_metric(args.best_metric, REGRESSION_METRICS, "for a regression target")
    options = training_options(args, "finetune")  # its --options-file's pretrain: none drops
    target = from_args(TargetOptions, args).target()  # the encoder: read after it
    finetune(options, target, memory_curve)
