"""Workflow-side helpers (standard library only: the Snakefile imports them on a login node).

Everything that turns config values into shell words goes through here, so nothing from a
config file or a metadata header can execute: values are quoted with ``shlex.quote``.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Mapping
from typing import Any


def cli_flags(options: Mapping[str, Any]) -> str:
    """Shell-quoted CLI flags from a config mapping.

    ``{"batch_size": 8, "freeze_base": True, "sizes": [4, 8], "x": None}`` ->
    ``--batch-size 8 --freeze-base --sizes 4 8``. ``False``/``None`` drop the flag; a list
    gives one quoted word per item.
    """
    words: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            words.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list | tuple):
            words += [flag, *(str(item) for item in value)]
        else:
            words += [flag, str(value)]
    return shlex.join(words)


def config_error_line(error: BaseException) -> str:
    """One line for a config that fails the JSON schema: where, what, and the field's purpose.

    ``error`` is Snakemake's ``WorkflowError`` from ``snakemake.utils.validate``, raised while
    handling the jsonschema ``ValidationError`` (its ``__context__``), or that error itself.
    """
    candidates = (error, error.__cause__, error.__context__, *error.args)
    cause = next((c for c in candidates if hasattr(c, "json_path")), None)
    if cause is None:
        return " ".join(str(error).split())
    where = cause.json_path.removeprefix("$").lstrip(".") or "(top level)"
    described = cause.schema.get("description") if isinstance(cause.schema, dict) else None
    hint = f" ({' '.join(described.split())})" if described else ""
    message = " ".join(cause.message.split())
    if cause.validator == "additionalProperties" and isinstance(cause.instance, dict):
        known = list(cause.schema.get("properties", {}))
        key = sorted(k for k in cause.instance if k not in known)[0]
        where = f"{where}.{key}" if where != "(top level)" else key
        close = difflib.get_close_matches(key, known, n=1)
        message = "unknown key" + (f" (did you mean {close[0]}?)" if close else "")
    return f"config {where}: {message}{hint}; fix it in the config file or --config"
