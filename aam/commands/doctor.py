"""`aam doctor`: attention backends and the torch stack, with a recommendation
(``aam.validation.doctor``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aam.runtime.atomic import check_output_path, write_json
from aam.training.device import resolve_device
from aam.validation.doctor import diagnose


def _cell(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam doctor`."""
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (ROCm: cuda)")
    parser.add_argument("--output", type=Path, help="also write the report as JSON")


def run(args: argparse.Namespace) -> None:
    """Print the diagnosis (and write it as JSON)."""
    if args.output:
        check_output_path(args.output, "report")
    report = diagnose(resolve_device(args.device))
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
    if args.output:
        write_json(args.output, report)
