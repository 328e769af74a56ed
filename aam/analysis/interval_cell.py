"""A landing-page table cell: a value (3 significant digits) with its 95% interval."""

from __future__ import annotations

import math
from collections.abc import Sequence


def cell(value: float | None, interval: Sequence | None, signed: bool = False) -> str:
    """``0.83 <span class=ci>[0.5, 1]</span>``; ``undefined`` for a missing or non-finite
    value; ``signed``: a difference, its sign always shown."""
    form = "+.3g" if signed else ".3g"
    if value is None or not math.isfinite(value):
        return "undefined"
    low, high = interval or (None, None)
    span = "" if low is None else f" <span class=ci>[{low:{form}}, {high:{form}}]</span>"
    return f"{value:{form}}{span}"
