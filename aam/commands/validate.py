"""`aam validate`: golden-file numeric validation of the model.

``aam validate generate --output-dir tests/golden`` writes the golden files (CPU, float32,
fixed seed). ``aam validate compare --golden tests/golden --device D --output golden.json``
recomputes them on D for every attention backend x precision there, writes all per-tensor rows
to the JSON report, prints a table and exits 2 if any supported combination is out of tolerance.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from aam.device_names import TORCH_DEVICE
from aam.errors import InputError
from aam.models.config import ATTN_IMPLEMENTATIONS
from aam.options import add_options, check_options, from_args, option
from aam.runtime.atomic import check_output_dir, check_output_path

log = logging.getLogger(__name__)


@dataclass
class GenerateOptions:
    """The options of `aam validate generate`."""

    output_dir: Path = option(
        None, "directory to write golden.pt and metadata.json to", required=True
    )


@dataclass
class CompareOptions:
    """The options of `aam validate compare`."""

    golden: Path = option(None, "directory with golden.pt", required=True)
    device: str = option("auto", TORCH_DEVICE[1], pattern=TORCH_DEVICE)
    output: Path = option(Path("golden.json"), "JSON report")
    backend: list[str] = option(
        [],
        "restrict to these attention backends (repeatable; default: all available on the device)",
        choices=ATTN_IMPLEMENTATIONS,
        repeat=True,
    )
    precision: list[str] = option(
        [],
        "restrict to these precisions (repeatable; default: fp32, and bf16 where supported)",
        choices=("fp32", "bf16"),
        repeat=True,
    )

    def __post_init__(self) -> None:
        check_options(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam validate` (subcommands ``generate`` and ``compare``)."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="{generate,compare}")
    gen = sub.add_parser("generate", help="write golden.pt + metadata.json (CPU, fp32, seeded)")
    add_options(gen, GenerateOptions)
    cmp = sub.add_parser("compare", help="recompute the golden outputs/gradients on a device")
    add_options(cmp, CompareOptions)


def run(args: argparse.Namespace) -> None:
    """Generate or compare; a failed comparison is an ``InputError`` (exit 2) after the report."""
    from aam.diagnostics import golden as g

    if args.action == "generate":
        gen = from_args(GenerateOptions, args)
        check_output_dir(gen.output_dir, "golden")
        data = g.generate_golden(gen.output_dir)
        log.info(
            "%s: %d weights, %d outputs, %d gradients (loss %.6f)",
            gen.output_dir / g.GOLDEN_FILE,
            len(data["state_dict"]),
            len(data["outputs"]),
            len(data["gradients"]),
            float(data["loss"]),
        )
        return
    from aam.training.device import resolve_device

    opts = from_args(CompareOptions, args)
    check_output_path(opts.output, "report")
    device = resolve_device(opts.device)
    backends = tuple(opts.backend) if opts.backend else None
    precisions = tuple(opts.precision) if opts.precision else None
    report = g.compare_golden(opts.golden, device, backends, precisions)
    g.write_report(report, opts.output)
    print(g.format_table(report))
    log.info("report: %s", opts.output)
    if not report["passed"]:
        raise InputError(g.failure_message(report) + f" (details: {opts.output})")
