"""Command-line flags generated from dataclass fields: one declaration per option.

A config field declared with ``option(default, help, ...)`` is an option: ``add_options`` turns it
into ``--field-name`` with the field's type, default, help, bounds and choices, for every command
that takes the dataclass, and `aam run-options-schema` turns those flags into the workflow's
config schema. The bounds and choices are checked in one place (``Domain.problem``): by argparse
as the flag is read, by the JSON schema before any workflow job, and by ``check_options`` in the
dataclass's ``__post_init__``. Fields declared without ``option`` (derived from the data, e.g. the
number of classes) have no flag. Adding a hyper-parameter is one field declaration.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import re
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

ScalarType = type[int] | type[float] | type[str] | type[bool] | type[Path]
# JSON schema that NaN alone satisfies (every comparison with NaN is false, so it is both below
# 0 and at least 0): ``{"not": NAN}`` refuses it, as bounds alone cannot.
NAN = {"allOf": [{"exclusiveMaximum": 0}, {"minimum": 0}]}
# The bounds of a seed numpy's generators and scikit-learn's random_state take: option(..., **SEED).
SEED = {"minimum": 0, "maximum": 2**32 - 1}


@dataclass(frozen=True)
class Domain:
    """The values an option may take beyond its type: numeric bounds (floats must also be
    finite unless ``finite=False``) and choices (words; ``prefix`` may be left off a choice)."""

    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    finite: bool = True
    choices: tuple[str, ...] = ()
    prefix: str = ""
    pattern: tuple[str, str] = ("", "")  # (regular expression a word matches whole, in words)

    def words(self) -> tuple[str, ...]:
        """Every accepted word: the choices, then those that have ``prefix`` without it."""
        short = [c.removeprefix(self.prefix) for c in self.choices]
        return self.choices + tuple(s for s in short if self.prefix and s not in self.choices)

    def range_text(self) -> str:
        """The bounds in words: ``at least 1``, ``greater than 0``, ``in [0, 1)``; "" if none."""
        low, high = (
            _first(self.minimum, self.exclusive_minimum),
            _first(self.maximum, self.exclusive_maximum),
        )
        if low is not None and high is not None:
            left = "[" if self.minimum is not None else "("
            right = "]" if self.maximum is not None else ")"
            return f"in {left}{_number(low)}, {_number(high)}{right}"
        for bound, words in (
            (self.minimum, "at least"),
            (self.exclusive_minimum, "greater than"),
            (self.maximum, "at most"),
            (self.exclusive_maximum, "less than"),
        ):
            if bound is not None:
                return f"{words} {_number(bound)}"
        return ""

    def in_range(self, value: float) -> bool:
        """Whether the number ``value`` is within the bounds."""
        return not (
            (self.minimum is not None and value < self.minimum)
            or (self.maximum is not None and value > self.maximum)
            or (self.exclusive_minimum is not None and value <= self.exclusive_minimum)
            or (self.exclusive_maximum is not None and value >= self.exclusive_maximum)
        )

    def problem(self, kind: ScalarType, value: Any, int_or_word: bool = False) -> str | None:
        """Why ``value`` cannot be this option's (``must be ...``), or None when it can."""
        if kind is bool:
            return None if isinstance(value, bool) else "must be true or false"
        if kind is Path:
            return None if isinstance(value, (str, Path)) else "must be a path"
        if int_or_word and isinstance(value, str):
            return None if value in self.choices else self._number_reason(kind, int_or_word)
        if kind is str:
            return None if self._is_word(value) else self._word_reason()
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or (kind is int and not isinstance(value, int)):
            return self._number_reason(kind, int_or_word)
        if kind is float and self.finite and not math.isfinite(value):
            return self._number_reason(kind, int_or_word)
        if not self.in_range(value):
            return self._number_reason(kind, int_or_word) if int_or_word else self._out_of_range()
        return None

    def _is_word(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        if self.pattern[0]:
            return re.fullmatch(self.pattern[0], value) is not None
        return not self.choices or value in self.words()

    def _word_reason(self) -> str:
        if self.pattern[0]:
            return f"must be {self.pattern[1]}"
        if not self.choices:
            return "must be text"
        optional = f" (the {self.prefix} prefix may be left off)" if self.prefix else ""
        return f"must be one of {', '.join(self.choices)}{optional}"

    def _out_of_range(self) -> str:
        return f"must be {self.range_text()}"

    def _number_reason(self, kind: ScalarType, int_or_word: bool) -> str:
        what = "a whole number" if kind is int else "a finite number" if self.finite else "a number"
        bounds = self.range_text()
        if int_or_word:
            numbers = f" (numbers {bounds})" if bounds else ""
            return f"must be {what} or {' or '.join(self.choices)}{numbers}"
        return f"must be {what}" + (f", {bounds}" if bounds else "")

    def json_schema(self, kind: ScalarType, int_or_word: bool = False) -> dict[str, Any]:
        """JSON schema of a value (numbers: their bounds; words: an enum)."""
        if kind is bool:
            return {"type": "boolean"}
        if kind is Path:
            return {"type": "string"}
        if kind is str and self.pattern[0]:
            return {"type": "string", "pattern": f"^(?:{self.pattern[0]})$"}
        if kind is str:
            return {"type": "string", **({"enum": list(self.words())} if self.choices else {})}
        number: dict[str, Any] = {"type": "integer" if kind is int else "number"}
        for key, bound in (
            ("minimum", self.minimum),
            ("maximum", self.maximum),
            ("exclusiveMinimum", self.exclusive_minimum),
            ("exclusiveMaximum", self.exclusive_maximum),
        ):
            if bound is not None:
                number[key] = bound
        if kind is float and self.finite:  # no infinity (bounded by the largest float), no NaN
            if self.maximum is None and self.exclusive_maximum is None:
                number["maximum"] = sys.float_info.max
            if self.minimum is None and self.exclusive_minimum is None:
                number["minimum"] = -sys.float_info.max
            number["not"] = NAN
        if int_or_word:
            return {"anyOf": [number, {"enum": list(self.choices)}]}
        return number


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def _number(value: float) -> str:
    """``1`` for 1.0, else the shortest repr."""
    return str(int(value)) if float(value).is_integer() else repr(value)


def option(
    default: Any,
    help: str,
    *,
    choices: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    commands: Sequence[str] | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: float | None = None,
    exclusive_maximum: float | None = None,
    finite: bool = True,
    prefix: str = "",
    pattern: tuple[str, str] = ("", ""),
    resume: bool | Literal["when set"] = False,
    required: bool = False,
    positional: bool = False,
    exclusive: str = "",
    metavar: str | None = None,
    repeat: bool = False,
    parse: Callable[[str], Any] | None = None,
) -> Any:
    """A dataclass field that is also a command-line option (of ``commands``; None: all).

    ``choices`` are the words it takes, or per command (``{command: words}``; an instance
    takes any of them); the bounds are inclusive (``minimum``, ``maximum``) or not
    (``exclusive_*``); a float must be finite unless ``finite=False``; ``prefix`` may be left
    off a choice that has it; ``pattern``: (a regular expression a word must match whole, the
    words that say it); ``resume``: a resumed run must have the checkpoint's value (or,
    ``"when set"``, when it is not the default).

    The command line: a ``required`` flag; a ``positional`` argument (no ``--``); options of
    one ``exclusive`` name are mutually exclusive; ``metavar`` names the value in the help; a
    ``list[X]`` field takes one or more values per flag, or one per use with ``repeat``
    (``--x A --x B``); ``parse`` reads the text when the type alone cannot (``NAME=PATH``).
    """
    per_command = dict(choices) if isinstance(choices, Mapping) else None
    words = tuple(choices or ()) if per_command is None else _union(per_command.values())
    domain = Domain(
        minimum, maximum, exclusive_minimum, exclusive_maximum, finite, words, prefix, pattern
    )
    meta = {
        "help": help,
        "choices": words or None,
        "commands": commands,
        "domain": domain,
        "command_choices": per_command,
        "resume": resume,
        "required": required,
        "positional": positional,
        "exclusive": exclusive,
        "metavar": metavar,
        "repeat": repeat,
        "parse": parse,
    }
    if isinstance(default, list):  # a mutable default: each instance gets its own copy
        return dataclasses.field(default_factory=lambda: list(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def default_of(f: dataclasses.Field) -> Any:
    """The default value of field ``f`` (a list default is a fresh copy)."""
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def _union(groups: typing.Iterable[Sequence[str]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(word for group in groups for word in group))


def option_fields(cls: type, command: str | None = None) -> list[dataclasses.Field]:
    """The fields of ``cls`` declared with ``option`` (those of ``command`` when given)."""
    chosen = []
    for f in dataclasses.fields(cls):
        commands = f.metadata.get("commands")
        if "help" in f.metadata and (command is None or commands is None or command in commands):
            chosen.append(f)
    return chosen


def field_domain(f: dataclasses.Field, command: str | None = None) -> Domain:
    """The domain of option field ``f`` (its choices for ``command`` when they differ)."""
    per_command = f.metadata["command_choices"]
    if command is None or not per_command:
        return f.metadata["domain"]
    return dataclasses.replace(f.metadata["domain"], choices=tuple(per_command[command]))


def value_type(cls: type, name: str) -> tuple[ScalarType, bool]:
    """The scalar type of field ``name`` (of its items for ``list[X]``) and whether it may be
    None (``int | None``)."""
    hint = _hints(cls)[name]
    if typing.get_origin(hint) is list:
        return typing.get_args(hint)[0], False
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args:  # Optional[X] / X | None
        return args[0], True
    return hint, False


def is_list(cls: type, name: str) -> bool:
    """Whether field ``name`` is declared ``list[X]`` (the flag takes several values)."""
    return typing.get_origin(_hints(cls)[name]) is list


def is_int_or_word(cls: type, name: str) -> bool:
    """Whether field ``name`` is declared ``int | str`` (a number or a word of its choices)."""
    return set(typing.get_args(_hints(cls)[name])) == {int, str}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


class OptionValue:
    """The argparse type of a bounded option: parses the text as ``kind`` (``int_or_word``: a
    whole number or one of the choices) and refuses a value outside the ``domain`` with one
    line, ``VALUE: must be ...`` (argparse puts the flag before it)."""

    def __init__(self, kind: ScalarType, domain: Domain, int_or_word: bool = False) -> None:
        self.kind, self.domain, self.int_or_word = kind, domain, int_or_word
        self.__name__ = kind.__name__  # argparse names the type in some errors

    def __call__(self, text: str) -> Any:
        value = self._parse(text)
        reason = self.domain.problem(self.kind, value, self.int_or_word)
        if reason:
            raise argparse.ArgumentTypeError(f"{text}: {reason}")
        return value

    def _parse(self, text: str) -> Any:
        """``text`` as ``kind``, or ``text`` itself when it is not one (``problem`` says so)."""
        if self.kind is str or (self.int_or_word and text in self.domain.choices):
            return text
        if self.kind is Path:
            return Path(text)
        try:
            return self.kind(text)
        except ValueError:
            return text

    @property
    def words(self) -> tuple[str, ...]:
        return self.domain.choices

    def json_schema(self) -> dict[str, Any]:
        return self.domain.json_schema(self.kind, self.int_or_word)


def checked(kind: ScalarType, **domain: Any) -> OptionValue:
    """An argparse type for a flag that is no dataclass field, e.g. ``checked(int, minimum=1)``."""
    return OptionValue(kind, Domain(**domain))


class StoreOnce(argparse.Action):
    """Store the value of a flag that has no default, refusing it a second time (where the last
    one would silently win); a subclass says ``why`` it takes one."""

    why = "it takes one value"

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        earlier = getattr(namespace, self.dest, None)
        if earlier is not None:
            raise argparse.ArgumentError(
                self, f"{values}: given again (first {earlier}); {self.why}"
            )
        setattr(namespace, self.dest, values)


def flag(name: str) -> str:
    """``--field-name`` of field ``field_name``."""
    return "--" + name.replace("_", "-")


def add_options(
    group: argparse._ActionsContainer,
    cls: type,
    command: str | None = None,
    keep_unset: bool = False,
) -> None:
    """Add a flag (or positional argument) for every option field of ``cls``. With
    ``keep_unset`` a flag that is not given leaves no attribute (its default is shown in the
    help only), so a caller can tell "not given" from "given the default" (``given_options``)."""
    exclusive: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for f in option_fields(cls, command):
        kwargs = _argument(cls, f, command)
        if f.metadata.get("positional"):
            group.add_argument(f.name, **kwargs)
            continue
        if f.metadata.get("required"):
            kwargs["required"] = True
        else:
            kwargs["default"] = argparse.SUPPRESS if keep_unset else default_of(f)
        target = group
        if name := f.metadata.get("exclusive"):
            if name not in exclusive:
                exclusive[name] = group.add_mutually_exclusive_group()
            target = exclusive[name]
        target.add_argument(flag(f.name), **kwargs)


def _argument(cls: type, f: dataclasses.Field, command: str | None) -> dict[str, Any]:
    """The argparse keywords of option field ``f``: its help, value type and how many."""
    kind, optional = value_type(cls, f.name)
    kwargs: dict[str, Any] = {"help": _help(f)}
    if kind is bool:
        kwargs["action"] = argparse.BooleanOptionalAction if optional else "store_true"
        return kwargs
    domain = field_domain(f, command)
    kwargs["type"] = f.metadata.get("parse") or OptionValue(
        kind, domain, is_int_or_word(cls, f.name)
    )
    if f.metadata.get("metavar"):
        kwargs["metavar"] = f.metadata["metavar"]
    elif kind is str and domain.choices:
        kwargs["metavar"] = "{" + ",".join(domain.choices) + "}"
    if is_list(cls, f.name) and f.metadata.get("repeat"):
        kwargs["action"] = "append"
    elif is_list(cls, f.name):
        kwargs["nargs"] = "+" if f.metadata.get("required") else "*"
    elif f.metadata.get("positional") and not f.metadata.get("required"):
        kwargs.update(nargs="?", default=default_of(f))
    return kwargs


def _help(f: dataclasses.Field) -> str:
    """The field's help, then its default (if any) and bounds (if any)."""
    default = default_of(f)
    unset = default is None or default is False or default == []
    notes = [] if unset else [f"default {_shown(default)}"]
    notes += [bounds] if (bounds := f.metadata["domain"].range_text()) else []
    return f.metadata["help"] + (f" ({'; '.join(notes)})" if notes else "")


def _shown(value: Any) -> str:
    """A default as the command line writes it (a list: its values, space-separated)."""
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def given_options(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The option fields of ``cls`` present in ``args`` (all of them unless ``keep_unset``)."""
    return {f.name: getattr(args, f.name) for f in option_fields(cls) if hasattr(args, f.name)}


def from_args(cls: type, args: argparse.Namespace, **fixed: Any) -> Any:
    """An instance of ``cls`` from the parsed flags (fields without a flag keep defaults);
    an invalid value raises ``OptionError`` naming the field (`aam` prints it as a flag)."""
    return cls(**{**given_options(cls, args), **fixed})


def check_options(instance: Any) -> None:
    """Raise ``OptionError`` for the first option field of ``instance`` whose value is outside
    its declared type, bounds or choices (None is fine where the type allows it)."""
    cls = type(instance)
    for f in option_fields(cls):
        value = getattr(instance, f.name)
        kind, optional = value_type(cls, f.name)
        if value is None and optional:
            continue
        values = value if is_list(cls, f.name) and isinstance(value, list) else [value]
        for item in values:
            reason = f.metadata["domain"].problem(kind, item, is_int_or_word(cls, f.name))
            if reason:
                raise OptionError(f.name, item, reason)


class OptionError(ValueError):
    """A config field has a value it cannot take: names the field, the value and why."""

    def __init__(self, name: str, value: Any, reason: str) -> None:
        super().__init__(f"{name}={value!r}: {reason}")
        self.name, self.value, self.reason = name, value, reason

    def as_flag(self) -> str:
        """The message as a command-line user sees it: ``--field-name VALUE: reason``."""
        return f"{flag(self.name)} {self.value}: {self.reason}"
