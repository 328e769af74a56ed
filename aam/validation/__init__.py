"""Numeric validation of the model against committed golden files (``aam validate``)."""

from aam.validation.golden import (
    TOLERANCES,
    compare_golden,
    failure_message,
    format_table,
    generate_golden,
    load_golden,
    write_report,
)

__all__ = [
    "TOLERANCES",
    "compare_golden",
    "failure_message",
    "format_table",
    "generate_golden",
    "load_golden",
    "write_report",
]
