"""`aam run-options-schema`: the JSON schema of the workflow's `runs.<run>.model`, `.pretrain` and
`.finetune` sections, generated from the flags of `aam pretrain` and `aam finetune`.

The flags are the one declaration: a section accepts exactly the flags its command takes (minus
those the workflow's rules set themselves), with their types, bounds and choices (a value out of
range fails the config's validation, before any job). The schema is written
to ``workflow/schemas/run_options.schema.json``, which the config schema references, so the
workflow (which must not import torch on a login node) checks every run option before any job;
``tests/test_run_options.py`` fails when the committed file is not what this command writes.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aam.commands import finetune, pretrain
from aam.commands.common import MODEL_GROUP
from aam.device_names import KERNEL_DEVICE, TORCH_DEVICE
from aam.options import Domain, OptionValue, add_options, from_args, option
from aam.runtime.atomic import atomic_output

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "workflow/schemas/run_options.schema.json"
# Flags the workflow's rules pass themselves (inputs, outputs, a search's chosen options, the
# dataset's target and covariates, threads, scratch, device, progress bars) or that the
# workflow makes moot (the fractions apply only without --split; the inputs of its jobs list
# the same samples: datasets.<name>.drop_samples_without_metadata decides which): not options of
# a run.
RULE_FLAGS = frozenset(
    {
        "table",
        "tree",
        "unifrac",
        "split",
        "metadata",
        "target_column",
        "categorical_columns",
        "classifier",
        "pretrained_encoder",
        "options_file",
        "output_dir",
        "checkpoint_dir",
        "threads",
        "scratch",
        "device",
        "progress",
        "stale_checkpoints",
        "val_fraction",
        "test_fraction",
        "allow_missing_samples",
    }
)
SECTIONS = {"pretrain": "pretrain", "finetune": "finetune"}  # config section -> `aam` command
# config values that are device names -> (their declaration, the flag they become)
DEVICE_DEFS = {
    "device": (TORCH_DEVICE, "--device of the training, prediction, validation and profiling"),
    "unifrac_device": (KERNEL_DEVICE, "--device of `aam unifrac`"),
}


class GroupRecorder(argparse.ArgumentParser):
    """A parser that records the flags added to each of its argument groups, by title (through
    the public ``add_argument_group`` / ``add_argument``, not argparse's internals)."""

    def __init__(self, **kwargs: Any) -> None:
        self.flags: dict[str | None, list[argparse.Action]] = {}  # argparse adds groups first
        super().__init__(**kwargs)

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        group = super().add_argument_group(*args, **kwargs)
        recorded = self.flags.setdefault(group.title, [])
        add = group.add_argument

        def add_and_record(*flag_args: Any, **flag_kwargs: Any) -> argparse.Action:
            action = add(*flag_args, **flag_kwargs)
            recorded.append(action)
            return action

        group.add_argument = add_and_record  # type: ignore[method-assign]
        return group


def command_parser(command: str) -> GroupRecorder:
    """The argument parser of ``aam <command>`` (pretrain or finetune), its groups recorded."""
    parser = GroupRecorder(prog=f"aam {command}")
    {"pretrain": pretrain, "finetune": finetune}[command].add_arguments(parser)
    return parser


def _options(parser: GroupRecorder, model: bool) -> list[argparse.Action]:
    """Optional flags in (``model``) or out of the model group, minus the rules' own flags."""
    return [
        action
        for title, actions in parser.flags.items()
        if (title == MODEL_GROUP) == model
        for action in actions
        if action.option_strings and action.dest not in RULE_FLAGS
    ]


def option_schema(action: argparse.Action) -> dict[str, Any]:
    """JSON schema of one flag's value in a config file."""
    if action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction):
        schema: dict[str, Any] = {"type": "boolean"}
    elif isinstance(action.type, OptionValue):  # type, bounds and choices
        schema = action.type.json_schema()
    elif action.type is int:
        schema = {"type": "integer"}
    elif action.type is float:
        schema = {"type": "number"}
    else:
        schema = {"type": "string"}
    if action.choices is not None:
        schema["enum"] = list(action.choices)
    if action.nargs in ("+", "*"):
        schema = {"type": "array", "items": schema}
    negatable = isinstance(action, argparse.BooleanOptionalAction)  # --x / --no-x: name --x
    name = action.option_strings[0 if negatable else -1]
    text = [name, *([action.help] if action.help else [])]
    shown = "(default" in (action.help or "")
    if action.default not in (None, False, argparse.SUPPRESS) and not shown:
        text.append(f"(default {action.default})")
    schema["description"] = " ".join(text)
    return schema


def _section(actions: list[argparse.Action], what: str) -> dict[str, Any]:
    return {
        "type": "object",
        "default": {},
        "additionalProperties": False,
        "description": what,
        "properties": {a.dest: option_schema(a) for a in sorted(actions, key=lambda a: a.dest)},
    }


def run_options_schema() -> dict[str, Any]:
    """``{"$defs": {"model": ..., "pretrain": ..., "finetune": ..., "device": ...,
    "unifrac_device": ...}}`` from the commands' flags and device declarations."""
    parsers = {section: command_parser(command) for section, command in SECTIONS.items()}
    defs = {"model": _section(_options(parsers["pretrain"], model=True), "aam model flags")}
    for section, command in SECTIONS.items():
        defs[section] = _section(_options(parsers[section], model=False), f"aam {command} flags")
    for name, (names, flag) in DEVICE_DEFS.items():
        defs[name] = {
            **Domain(pattern=names).json_schema(str),
            "description": f"{flag}: {names[1]}",
            "examples": [word.replace(":N", ":1") for word in re.split(r", | or ", names[1])],
        }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": "generated by `aam run-options-schema` (make schema); do not edit",
        "$defs": defs,
    }


def render() -> str:
    return json.dumps(run_options_schema(), indent=1) + "\n"


@dataclass
class SchemaOptions:
    """The options of `aam run-options-schema`."""

    output: Path = option(SCHEMA_FILE, "where to write it")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam run-options-schema`."""
    add_options(parser, SchemaOptions)


def run(args: argparse.Namespace) -> None:
    """Write the schema."""
    opts = from_args(SchemaOptions, args)
    with atomic_output(opts.output) as tmp:
        tmp.write_text(render())
    print(f"aam run-options-schema: wrote {opts.output}")
