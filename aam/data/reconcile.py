"""Match sample IDs across inputs (table, metadata, UniFrac matrix, ...)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from aam.errors import InputError

log = logging.getLogger(__name__)

ALLOW_MISSING_FLAG = "--allow-missing-samples"


def printable(item: object) -> str:
    """``str(item)`` for messages, or its repr when it is empty, has surrounding whitespace or
    holds a line break, tab or other unprintable character (the message stays one line)."""
    text = str(item)
    return text if text.isprintable() and text and text == text.strip() else repr(text)


def preview(items: Iterable[object], limit: int = 5) -> str:
    """Comma-separated first ``limit`` items, with a count of the rest."""
    items = list(items)
    shown = ", ".join(printable(item) for item in items[:limit])
    return shown + (f", ... (+{len(items) - limit} more)" if len(items) > limit else "")


def reconcile_sample_ids(
    sources: Mapping[str, Sequence[str]], *, allow_missing: bool = False
) -> list[str]:
    """IDs present in every source, in the first source's order.

    ``sources`` maps a label (usually the file path) to that input's sample IDs. IDs missing
    from some source raise InputError unless ``allow_missing``, which logs a warning and
    keeps the shared IDs (an empty intersection is always an error).
    """
    if not sources:
        raise ValueError("reconcile_sample_ids needs at least one source")
    id_sets = {label: set(ids) for label, ids in sources.items()}
    union = list(dict.fromkeys(i for ids in sources.values() for i in ids))
    first = next(iter(sources.values()))
    shared = [str(i) for i in dict.fromkeys(first) if all(i in s for s in id_sets.values())]
    gaps = [
        f"{label} lacks {len(missing)} ID(s) present elsewhere ({preview(missing)})"
        for label, ids in id_sets.items()
        if (missing := [i for i in union if i not in ids])
    ]
    if not gaps:
        return shared
    summary = "sample IDs differ between inputs: " + "; ".join(gaps)
    if not shared:
        raise InputError(f"{summary}; no sample is in every input: check the files belong together")
    if not allow_missing:
        raise InputError(
            f"{summary}; fix the files so they list the same samples, or pass "
            f"{ALLOW_MISSING_FLAG} to use the {len(shared)} shared samples"
        )
    log.warning("%s; using the %d shared samples", summary, len(shared))
    return shared
