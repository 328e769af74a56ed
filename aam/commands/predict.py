"""`aam predict`: predictions in the target's own units, metrics when the truth is known, and
with the model's training table and split a domain-shift report of this table."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from aam.analysis.figures import add_label_arguments
from aam.analysis.predict import PredictOptions, predict
from aam.data.split import SPLITS
from aam.options import add_options, from_args, option
from aam.runtime.figures import add_format_argument
from aam.training.config import RuntimeConfig
from aam.training.inputs.study_options import StudyOptions


@dataclass
class PredictFlags:
    """The options of `aam predict` but the shared ones (titles, figure format, reading and run
    options): with those they make ``aam.analysis.predict.PredictOptions``."""

    model: list[Path] = option(
        None,
        "model.pt from `aam finetune`; several: an ensemble (the mean of their predictions, "
        "of their class probabilities for classes) of models of the same target and covariates",
        required=True,
    )
    table: Path = option(None, "BIOM table of the samples", required=True)
    output_dir: Path = option(None, "predictions.tsv, metrics.json, plots", required=True)
    metadata: Path | None = option(
        None, "truth for metrics; needed by models with categorical covariates"
    )
    split: Path | None = option(None, "predict only one split of this split.tsv")
    subset: str = option("test", "the split predicted with --split", choices=SPLITS)
    baselines: list[Path] = option(
        [],
        "`aam baselines` (and `aam embedding-forest`) predictions, scored beside the model "
        "on the same samples",
    )
    group_column: str | None = option(
        None,
        "categorical metadata column (e.g. the study): metrics per group as well "
        "(metrics.json by_group) and the scatter coloured by group; needs --metadata",
    )
    split_group_column: str | None = option(
        None,
        "metadata column of the groups (subjects, studies) the split kept whole: "
        "metrics.json split_groups says whether the test samples' groups have training "
        "samples, and the bootstrap intervals resample whole groups; needs --metadata and "
        "--split (without it, --group-column's groups give split_groups alone)",
    )
    target_column: str | None = option(
        None, "metadata column holding the truth (default: the model's target column)"
    )
    training_table: Path | None = option(
        None,
        "the table the model was fine-tuned on: write domain_shift.json (needs --training-split)",
    )
    training_split: Path | None = option(None, "the split the model was fine-tuned on")
    scratch: str | None = option(None, "node-local dir to copy inputs to first")
    batch_size: int = option(32, "samples per batch", minimum=1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam predict`."""
    add_options(parser, PredictFlags)
    add_label_arguments(parser)
    add_format_argument(parser)
    add_options(parser, StudyOptions, "predict")
    add_options(parser, RuntimeConfig, "predict")


def run(args: argparse.Namespace) -> None:
    """Predict: the stage is ``aam.analysis.predict.predict`` (flags typed here)."""
    flags = from_args(PredictFlags, args)
    own = {f.name: getattr(flags, f.name) for f in dataclasses.fields(PredictFlags)}
    typed = {*own, "reading", "runtime"}
    shared = {  # the titles and the figures' format
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(PredictOptions)
        if f.name not in typed
    }
    reading = from_args(StudyOptions, args, val_fraction=0.0)
    runtime = from_args(RuntimeConfig, args)
    predict(PredictOptions(**own, **shared, reading=reading, runtime=runtime))
