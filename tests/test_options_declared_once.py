"""Every command's options are declared once, as dataclass fields (``aam.options.option``):
the flag, its type, default, bounds and help come from one declaration. Hand-written
``add_argument`` calls are counted, so that a new command's flags take the same path."""

from __future__ import annotations

import ast

from checkout import REPO

# Flags that are no option of a dataclass (10 today): `aam`'s own (--version, --provenance, the
# command), the figures' shared --figure-format and title labels, unifrac-shard's --metric
# (refused a second time: a shard holds one metric) and the SLURM launcher's torchrun pass-through.
MOST_HAND_WRITTEN = 12


def _hand_written() -> list[str]:
    """``file:line`` of every ``.add_argument(`` call in aam/ outside aam/options.py."""
    calls = []
    for path in sorted((REPO / "aam").rglob("*.py")):
        if path == REPO / "aam/options.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"
            ):
                calls.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return calls


def test_hand_written_add_argument_calls_are_few():
    calls = _hand_written()
    assert len(calls) < MOST_HAND_WRITTEN, "\n".join(calls)
