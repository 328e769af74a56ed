"""`aam doctor`: attention backends and the torch stack, with a recommendation
(``aam.diagnostics.doctor``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from aam.device_names import TORCH_DEVICE
from aam.diagnostics.doctor import diagnose
from aam.options import add_options, check_options, from_args, option
from aam.runtime.atomic import check_output_path, write_json
from aam.training.device import resolve_device


def _cell(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


@dataclass
class DoctorOptions:
    """The options of `aam doctor`."""

    device: str = option("auto", f"{TORCH_DEVICE[1]} (ROCm: cuda)", pattern=TORCH_DEVICE)
    output: Path | None = option(None, "also write the report as JSON")

    def __post_init__(self) -> None:
        check_options(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam doctor`."""
    add_options(parser, DoctorOptions)


def run(args: argparse.Namespace) -> None:
    """Print the diagnosis (and write it as JSON)."""
    opts = from_args(DoctorOptions, args)
    if opts.output:
        check_output_path(opts.output, "report")
    report = diagnose(resolve_device(opts.device))
    print(
        f"torch {report['torch']}  rocm {report['rocm']}  cuda {report['cuda']}  "
        f"device {report['device_name']} {report['arch'] or ''}"
    )
    header = ("backend", "max err (no mask)", "max err (mask)", "ms", "peak MB")
    print(f"{header[0]:<14}" + "".join(f"{h:>20}" for h in header[1:]))
    for row in report["backends"]:
        cells = [_cell(row.get(k, "")) for k in ("unmasked", "masked", "ms", "peak_mb")]
        print(f"{row['backend']:<14}" + "".join(f"{c:>20}" for c in cells))
    print(f"torch.compile: {report['compile']}")
    print(f"recommendation: {report['recommendation']}")
    if opts.output:
        write_json(opts.output, report)
