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
    """The first source's IDs that every other source has, in its order.

    ``sources`` maps a label (usually the file path) to that input's sample IDs; the first
    (the table) lists the samples. The others are looked up: their IDs of other samples (a
    metadata file's rows of samples the table lacks, a matrix or split of a larger table) are
    ignored. A sample of the first missing from another raises InputError unless
    ``allow_missing``, which logs a warning and keeps the shared IDs (an empty intersection is
    always an error).
    """
    if not sources:
        raise ValueError("reconcile_sample_ids needs at least one source")
    (first_label, first), *others = sources.items()
    samples = list(dict.fromkeys(str(i) for i in first))
    gaps, shared = [], samples
    for label, ids in others:
        listed = {str(i) for i in ids}
        missing = [i for i in samples if i not in listed]
        if missing:
            gaps.append(f"{label} lacks {len(missing)} ID(s) of {first_label} ({preview(missing)})")
        shared = [i for i in shared if i in listed]
    if not gaps:
        return shared
    summary = "sample IDs differ between inputs: " + "; ".join(gaps)
    if not shared:
        raise InputError(f"{summary}; no sample is in every input: check the files belong together")
    if not allow_missing:
        raise InputError(
            f"{summary}; fix the files so they list the table's samples, or pass "
            f"{ALLOW_MISSING_FLAG} to use the {len(shared)} shared samples"
        )
    log.warning("%s; using the %d shared samples", summary, len(shared))
    return shared
