"""`aam validate`: golden-file numeric validation of the model.

``aam validate generate --output-dir tests/golden`` writes the golden files (CPU, float32,
fixed seed). ``aam validate compare --golden tests/golden --device D --output golden.json``
recomputes them on D for every attention backend x precision there, writes all per-tensor rows
to the JSON report, prints a table and exits 2 if any supported combination is out of tolerance.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from aam.devices import TORCH_DEVICE
from aam.errors import InputError
from aam.models.config import ATTN_IMPLEMENTATIONS
from aam.options import checked
from aam.runtime.atomic import check_output_dir, check_output_path

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam validate` (subcommands ``generate`` and ``compare``)."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="{generate,compare}")
    gen = sub.add_parser("generate", help="write golden.pt + metadata.json (CPU, fp32, seeded)")
    gen.add_argument("--output-dir", required=True, type=Path)
    cmp = sub.add_parser("compare", help="recompute the golden outputs/gradients on a device")
    cmp.add_argument("--golden", required=True, type=Path, help="directory with golden.pt")
    cmp.add_argument(
        "--device", type=checked(str, pattern=TORCH_DEVICE), default="auto", help=TORCH_DEVICE[1]
    )
    cmp.add_argument("--output", type=Path, default=Path("golden.json"), help="JSON report")
    cmp.add_argument(
        "--backend",
        action="append",
        dest="backends",
        choices=ATTN_IMPLEMENTATIONS,
        help="restrict to these attention backends (repeatable; default: all "
        "available on the device)",
    )
    cmp.add_argument(
        "--precision",
        action="append",
        dest="precisions",
        choices=["fp32", "bf16"],
        help="restrict to these precisions (repeatable; default: fp32, and bf16 where supported)",
    )


def run(args: argparse.Namespace) -> None:
    """Generate or compare; a failed comparison is an ``InputError`` (exit 2) after the report."""
    from aam.validation import golden as g

    if args.action == "generate":
        check_output_dir(args.output_dir, "golden")
        data = g.generate_golden(args.output_dir)
        log.info(
            "%s: %d weights, %d outputs, %d gradients (loss %.6f)",
            args.output_dir / g.GOLDEN_FILE,
            len(data["state_dict"]),
            len(data["outputs"]),
            len(data["gradients"]),
            float(data["loss"]),
        )
        return
    from aam.training.device import resolve_device

    check_output_path(args.output, "report")
    device = resolve_device(args.device)
    backends = tuple(args.backends) if args.backends else None
    precisions = tuple(args.precisions) if args.precisions else None
    report = g.compare_golden(args.golden, device, backends, precisions)
    g.write_report(report, args.output)
    print(g.format_table(report))
    log.info("report: %s", args.output)
    if not report["passed"]:
        raise InputError(g.failure_message(report) + f" (details: {args.output})")
