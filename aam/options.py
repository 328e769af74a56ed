"""Command-line flags generated from dataclass fields: one declaration per option.

A config field declared with ``option(default, help, ...)`` is an option: ``add_options`` turns it
into ``--field-name`` with the field's type, default, help and choices, for every command that
takes the dataclass, and `aam run-options-schema` turns those flags into the workflow's config
schema. Fields declared without ``option`` (derived from the data, e.g. the number of classes)
have no flag. Adding a hyper-parameter is one field declaration.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Sequence
from typing import Any

ScalarType = type[int] | type[float] | type[str] | type[bool]


def option(
    default: Any,
    help: str,
    *,
    choices: Sequence[str] | None = None,
    commands: Sequence[str] | None = None,
) -> Any:
    """A dataclass field that is also a command-line option (of ``commands``; None: all)."""
    meta = {"help": help, "choices": tuple(choices) if choices else None, "commands": commands}
    return dataclasses.field(default=default, metadata=meta)


def option_fields(cls: type, command: str | None = None) -> list[dataclasses.Field]:
    """The fields of ``cls`` declared with ``option`` (those of ``command`` when given)."""
    chosen = []
    for f in dataclasses.fields(cls):
        commands = f.metadata.get("commands")
        if "help" in f.metadata and (command is None or commands is None or command in commands):
            chosen.append(f)
    return chosen


def value_type(cls: type, name: str) -> tuple[ScalarType, bool]:
    """The scalar type of field ``name`` and whether it may be None (``int | None``)."""
    hint = typing.get_type_hints(cls)[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args:  # Optional[X] / X | None
        return args[0], True
    return hint, False


class IntOrWord:
    """The argparse type of an ``int | str`` option: a whole number or one of ``words``."""

    def __init__(self, words: Sequence[str]) -> None:
        self.words = tuple(words)
        self.__name__ = "int_or_" + "_".join(self.words)  # argparse names the type in errors

    def __call__(self, text: str) -> int | str:
        if text in self.words:
            return text
        try:
            return int(text)
        except ValueError:
            words = " or ".join(self.words)
            raise argparse.ArgumentTypeError(
                f"use a whole number or {words}, not {text!r}"
            ) from None


def is_int_or_word(cls: type, name: str) -> bool:
    """Whether field ``name`` is declared ``int | str`` (a number or a word of its choices)."""
    return set(typing.get_args(typing.get_type_hints(cls)[name])) == {int, str}


def flag(name: str) -> str:
    """``--field-name`` of field ``field_name``."""
    return "--" + name.replace("_", "-")


def add_options(
    group: argparse._ActionsContainer,
    cls: type,
    command: str | None = None,
    keep_unset: bool = False,
) -> None:
    """Add a flag for every option field of ``cls``. With ``keep_unset`` a flag that is not
    given leaves no attribute (its default is shown in the help only), so a caller can tell
    "not given" from "given the default" (``given_options``)."""
    for f in option_fields(cls, command):
        kind, optional = value_type(cls, f.name)
        kwargs: dict[str, Any] = {"help": _help(f)}
        if kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction if optional else "store_true"
        elif is_int_or_word(cls, f.name):
            kwargs["type"] = IntOrWord(f.metadata["choices"])
        else:
            kwargs["type"] = kind
            if f.metadata["choices"]:
                kwargs["choices"] = f.metadata["choices"]
        kwargs["default"] = argparse.SUPPRESS if keep_unset else f.default
        group.add_argument(flag(f.name), **kwargs)


def _help(f: dataclasses.Field) -> str:
    if f.default is None or f.default is False:
        return f.metadata["help"]
    return f"{f.metadata['help']} (default {f.default})"


def given_options(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The option fields of ``cls`` present in ``args`` (all of them unless ``keep_unset``)."""
    return {f.name: getattr(args, f.name) for f in option_fields(cls) if hasattr(args, f.name)}


def from_args(cls: type, args: argparse.Namespace, **fixed: Any) -> Any:
    """An instance of ``cls`` from the parsed flags (fields without a flag keep defaults);
    an invalid value raises ``OptionError`` naming the field (`aam` prints it as a flag)."""
    return cls(**{**given_options(cls, args), **fixed})


class OptionError(ValueError):
    """A config field has a value it cannot take: names the field, the value and why."""

    def __init__(self, name: str, value: Any, reason: str) -> None:
        super().__init__(f"{name}={value!r}: {reason}")
        self.name, self.value, self.reason = name, value, reason

    def as_flag(self) -> str:
        """The message as a command-line user sees it: ``--field-name VALUE: reason``."""
        return f"{flag(self.name)} {self.value}: {self.reason}"
