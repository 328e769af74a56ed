"""A run's chosen options as a file (``section -> option -> value``; ``pretrain: none`` for a
random initialisation): written by `aam search-best` (best.yaml), read by `aam pretrain` and
`aam finetune` (``--options-file``). YAML in block style, bounded on reading: a few KiB of
plain mappings and scalars, no aliases."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from aam.errors import InputError
from aam.runtime.atomic import atomic_output

MAX_BYTES = 64 * 1024  # an options file is a few lines; anything larger is not one
SECTIONS = ("model", "pretrain", "finetune")


def write_options_file(path: str | os.PathLike[str], chosen: Mapping[str, Any], note: str) -> None:
    """Write ``chosen`` (``{section: {option: value}}``, ``pretrain`` may be ``"none"``)
    atomically, after ``note`` as comment lines."""
    comment = "".join(f"# {line}\n" for line in note.splitlines())
    text = yaml.safe_dump(dict(chosen), sort_keys=True, default_flow_style=False)
    with atomic_output(path) as tmp:
        Path(tmp).write_text(comment + text, encoding="utf-8")


def read_options_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The options of ``path``: InputError (one line naming the file and the fix) for a file
    over MAX_BYTES, not YAML, with an alias, or not a mapping of SECTIONS to mappings of
    scalars (``pretrain`` may be ``none``)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: options file not found; check the path")
    if path.stat().st_size > MAX_BYTES:
        raise InputError(f"{path}: over {MAX_BYTES // 1024} KiB, not an options file; check it")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise InputError(
                f"{path}: YAML aliases are not allowed in an options file; write values"
            )
        chosen = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        reason = " ".join(str(err).split())[:160]
        raise InputError(f"{path}: not YAML ({reason}); fix the file") from None
    if not isinstance(chosen, dict) or set(chosen) - set(SECTIONS):
        raise InputError(
            f"{path}: an options file maps {', '.join(SECTIONS)} to options; found "
            f"{sorted(map(str, chosen)) if isinstance(chosen, dict) else type(chosen).__name__}"
        )
    for section, options in chosen.items():
        if section == "pretrain" and options == "none":
            continue
        scalars = (str, int, float, bool, type(None))
        if not isinstance(options, dict) or not all(
            isinstance(v, scalars) for v in options.values()
        ):
            raise InputError(
                f"{path}: {section} must map option names to single values; fix the file"
            )
    return chosen
