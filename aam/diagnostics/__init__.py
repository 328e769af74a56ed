"""Diagnostics of the model on this machine: the golden-file numeric check (`aam validate`), the
attention backends (`aam doctor`) and the GPU checks (`aam gpu-check`)."""

from aam.diagnostics.golden import (
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
