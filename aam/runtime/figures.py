"""How every figure is written: the formats it can take, the default, the file name of a figure
and ``save_figure``.

One declaration of each: ``FORMATS`` are the choices of ``--figure-format``
(``add_format_argument``) and of the workflow's ``figure_format`` key (tests/test_figures.py
checks the schema's enum against them); ``figure_name`` maps a figure's stem to its file name,
for the rules' outputs, the report and the front page's links. PNG is written at ``DPI`` dots
per inch; SVG and PDF are vector formats (``DPI`` sets only their raster parts, e.g. a heatmap's
image). Matplotlib is imported only by ``pyplot`` and ``save_figure``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from aam.errors import InputError
from aam.runtime.atomic import atomic_output

FORMATS = ("png", "svg", "pdf")  # the first is the default
DEFAULT_FORMAT = FORMATS[0]
DPI = 300  # dots per inch of a PNG (and of the raster parts of SVG and PDF)
# No creation date in SVG and PDF, and fixed SVG element ids: the same figure, the same bytes.
_METADATA = {"svg": {"Date": None}, "pdf": {"CreationDate": None}, "png": {}}


def figure_name(stem: str, fmt: str = DEFAULT_FORMAT) -> str:
    """The file name of figure ``stem`` in format ``fmt``: ``predicted_vs_true.svg``."""
    if fmt not in FORMATS:
        raise InputError(f"figure format {fmt!r}: choose one of {', '.join(FORMATS)}")
    return f"{stem}.{fmt}"


def figure_format(path: str | os.PathLike[str]) -> str:
    """The format of figure ``path`` by its suffix; InputError unless one of ``FORMATS``."""
    fmt = Path(path).suffix.removeprefix(".").lower()
    if fmt not in FORMATS:
        raise InputError(
            f"{path}: not a figure's name; end it in .{', .'.join(FORMATS)} (its format)"
        )
    return fmt


def add_format_argument(parser: argparse.ArgumentParser) -> None:
    """``--figure-format``: the format of the figures a command writes in its output folder."""
    parser.add_argument(
        "--figure-format",
        choices=FORMATS,
        default=DEFAULT_FORMAT,
        help=f"format of the figures (png at {DPI} dpi; svg and pdf are vector)",
    )


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend with literal text: a ``$`` in a unit, a column
    or a run name is drawn as written, never parsed as math (every figure is made here)."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | os.PathLike[str]) -> None:
    """Write matplotlib figure ``fig`` to ``path`` atomically, in the format its suffix names
    (``figure_format``; PNG at ``DPI``), trimmed to its content; then close it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fmt = figure_format(path)
    with matplotlib.rc_context({"svg.hashsalt": "aam"}), atomic_output(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=DPI, bbox_inches="tight", metadata=_METADATA[fmt])
    plt.close(fig)
