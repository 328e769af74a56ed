"""The flags `aam pretrain` and `aam finetune` share, and the typed options they become
(``aam.training.config.TrainingOptions``; the run itself: ``aam.training.run``)."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from aam.errors import InputError
from aam.models.config import CPU_MODEL, LAYERS_HELP, ModelConfig, ModelOptions
from aam.options import add_options, from_args, given_options, option
from aam.training.config import (
    RunPaths,
    RuntimeConfig,
    TrainConfig,
    TrainingOptions,
    UniFracOptions,
)
from aam.training.inputs.study_options import StudyOptions
from aam.workflow.config import cli_flags
from aam.workflow.fingerprint import code_fingerprint
from aam.workflow.options_file import read_options_file

MODEL_GROUP = "model (ModelConfig)"  # its options are the workflow config's runs.*.model
CPU_MODEL_HELP = (
    "The defaults below are sized for a GPU. On a CPU, with none of "
    + ", ".join(f"--{name.replace('_', '-')}" for name in CPU_MODEL)
    + " (nor a stack's layers) given and no pretrained encoder, training uses the demo's scale: "
    + ", ".join(f"--{name.replace('_', '-')} {value}" for name, value in CPU_MODEL.items())
    + "; give any of them to size the model yourself."
)


def training_options(args: argparse.Namespace, command: str) -> TrainingOptions:
    """The typed options of training ``command``'s parsed flags (with its ``--options-file``
    laid over them), with the fingerprint of the code it runs (a checkpoint of other code is
    stale)."""
    if args.options_file is not None:
        apply_options_file(args, command)
    return TrainingOptions(
        paths=from_args(RunPaths, args),
        study=from_args(StudyOptions, args),
        distances=from_args(UniFracOptions, args),
        model=model_options(args),
        train=from_args(TrainConfig, args),
        runtime=from_args(RuntimeConfig, args),
        code=code_fingerprint(f"aam.commands.{command}"),
    )


@dataclass
class OptionsFile:
    """The run options chosen elsewhere (a search's best.yaml), laid over the flags."""

    options_file: Path | None = option(
        None,
        "YAML of chosen run options (section -> option -> value; `aam search-best`'s "
        "best.yaml): its model options and this command's section override the flags; with "
        "pretrain: none fine-tuning starts from a random initialisation",
    )


@dataclass
class StackLayers:
    """``--layers``: the layers of every stack of the model (each stack's own option wins)."""

    layers: int | None = option(None, LAYERS_HELP, minimum=0)  # like the stacks it sets


def add_common_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """Inputs, data, model, training and run options of a training ``command``."""
    io = parser.add_argument_group("inputs and outputs")
    add_options(io, RunPaths)
    add_options(io, OptionsFile)
    add_options(parser.add_argument_group("samples"), StudyOptions, command)
    add_options(
        parser.add_argument_group("UniFrac of a batch (with --tree)"), UniFracOptions, command
    )
    add_model_options(parser.add_argument_group(MODEL_GROUP, CPU_MODEL_HELP))
    add_options(parser.add_argument_group("training (TrainConfig)"), TrainConfig, command)
    add_options(parser.add_argument_group("device and run"), RuntimeConfig, command)


def apply_options_file(args: argparse.Namespace, command: str) -> None:
    """Set on ``args`` the model options and ``command``'s section of ``args.options_file``,
    each parsed as its flag would be (same types and bounds); ``pretrain: none`` drops the
    pretrained encoder. InputError (one line) for a file that is not such a mapping or names
    an option ``command`` does not have."""
    chosen = read_options_file(args.options_file)
    own = chosen.get(command, {})
    values = {**chosen.get("model", {}), **(own if isinstance(own, dict) else {})}
    if command == "finetune" and chosen.get("pretrain") == "none":
        args.pretrained_encoder = None
    parser = InputErrorParser(prog=str(args.options_file), add_help=False)
    add_model_options(parser)
    for cls in (StudyOptions, UniFracOptions, TrainConfig, RuntimeConfig):
        add_options(parser, cls, command)
    known = {action.dest for action in parser._actions}
    unknown = sorted(set(values) - known)
    if unknown:
        raise InputError(
            f"{args.options_file}: {unknown[0]} is not an option of aam {command} or of the "
            "model; remove it"
        )
    parsed = parser.parse_args(shlex.split(cli_flags(values)))
    for key in values:
        setattr(args, key, getattr(parsed, key, values[key]))  # a False switch: no flag


class InputErrorParser(argparse.ArgumentParser):
    """A parser of an options file's values: a refused value is an InputError naming the file."""

    def error(self, message: str) -> NoReturn:
        raise InputError(f"{self.prog}: {' '.join(message.split())}; fix the value")


def add_model_options(group: argparse._ArgumentGroup) -> None:
    """The ModelConfig options (unset ones stay unset: a pretrained base may fix them)."""
    add_options(group, ModelConfig, keep_unset=True)
    add_options(group, StackLayers, keep_unset=True)


def model_options(args: argparse.Namespace) -> ModelOptions:
    """The model options given on the command line (``--layers`` included)."""
    given = given_options(ModelConfig, args)
    return ModelOptions(ModelConfig(**given), frozenset(given), from_args(StackLayers, args).layers)
