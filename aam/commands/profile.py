"""`aam profile`: kernel table + memory/throughput sweep of a few training steps
(``aam.profiling``; the HTML page is `aam profiling-report`, a command of its own, so its code
fingerprint does not include the model).

`aam profile` on a ROCm build with ``rocprofv3`` (or legacy ``rocprof``) on PATH re-runs
itself under the tracer with ``--steps-only`` (just the training steps, so tracing covers
nothing else), reads the tracer's kernel stats into the common schema, then runs the
memory/throughput sweep untraced. Elsewhere (or with ``--profiler torch``) torch.profiler
measures the kernels in-process.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from aam.commands.common import MODEL_GROUP, add_model_options, model_options
from aam.errors import InputError
from aam.models.config import ATTN_IMPLEMENTATIONS
from aam.options import add_options, flag
from aam.runtime.atomic import check_output_dir
from aam.runtime.external_tools import record_tool
from aam.runtime.run_lock import lock_directories
from aam.runtime.threads import usable_threads
from aam.training.checkpointing.orphan import stop_with_workflow
from aam.training.config import PRECISIONS, RuntimeConfig

log = logging.getLogger(__name__)
PROFILERS = ("auto", "torch", "rocprofv3", "rocprof")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam profile`."""
    parser.add_argument("--table", required=True, type=Path, help="BIOM table")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--tree", type=Path, help="newick tree: each batch's UniFrac computed")
    source.add_argument("--unifrac", type=Path, help="a precomputed UniFrac matrix instead")
    parser.add_argument(
        "--output-dir", required=True, type=Path, help="kernel table, memory and throughput"
    )
    parser.add_argument("--steps", type=int, default=3, help="measured training steps")
    parser.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=[8],
        help="sweep; the first one is used for the kernel table",
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        choices=ATTN_IMPLEMENTATIONS,
        help="attention backends to compare (default: all on the device)",
    )
    add_options(parser, RuntimeConfig, "profile")
    parser.add_argument(
        "--precision", choices=PRECISIONS, default="fp32", help="auto: bf16 on GPUs that have it"
    )
    parser.add_argument("--seed", type=int, default=42, help="seed of the model and batches")
    parser.add_argument(
        "--profiler",
        choices=PROFILERS,
        default="auto",
        help="auto: rocprofv3 (then rocprof) on ROCm when on PATH, else torch",
    )
    parser.add_argument(
        "--steps-only",
        action="store_true",
        help="internal: only run the steps (the process rocprof traces)",
    )
    add_model_options(parser.add_argument_group(MODEL_GROUP))


def run(args: argparse.Namespace) -> None:
    """`aam profile`: kernel table (rocprof or torch.profiler) + memory/throughput sweep."""
    run_profile(args)


def choose_profiler(
    requested: str, hip: str | None, which: Callable[[str], str | None] | None = None
) -> str:
    """``torch``, ``rocprofv3`` or ``rocprof`` for ``--profiler requested``."""
    which = which or shutil.which
    if requested == "auto":
        if not hip:
            return "torch"
        return next((tool for tool in ("rocprofv3", "rocprof") if which(tool)), "torch")
    if requested != "torch" and not which(requested):
        raise InputError(f"--profiler {requested}: not on PATH; use --profiler torch")
    return requested


def child_argv(args: argparse.Namespace, python: str = sys.executable) -> list[str]:
    """The command rocprof traces: this profile's steps only, first batch size and backend."""
    argv = [
        python,
        "-m",
        "aam",
        "profile",
        "--steps-only",
        "--profiler",
        "torch",
        "--table",
        str(args.table),
        *(["--tree", str(args.tree)] if args.tree else ["--unifrac", str(args.unifrac)]),
        "--output-dir",
        str(args.output_dir),
        "--steps",
        str(args.steps),
        "--batch-sizes",
        str(args.batch_sizes[0]),
        "--device",
        args.device,
        "--precision",
        args.precision,
        "--seed",
        str(args.seed),
    ]
    if args.backends:
        argv += ["--backends", args.backends[0]]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    for name, value in model_options(args).chosen().items():
        if isinstance(value, bool):
            argv += [flag(name)] if value else []
        else:
            argv += [flag(name), str(value)]
    return argv


def run_profile(args: argparse.Namespace) -> None:
    """`aam profile`: kernel table (rocprof or torch.profiler) + memory/throughput sweep; one
    writer per output directory (``aam.runtime.run_lock``)."""
    for path in (args.table, args.tree or args.unifrac):
        if not path.is_file():
            raise InputError(f"{path}: no such file")
    if args.steps < 1 or min(args.batch_sizes) < 2:
        raise InputError("--steps must be 1+ and every --batch-sizes 2+ (UniFrac needs pairs)")
    check_output_dir(args.output_dir, "output")
    stop_with_workflow()
    if args.steps_only:  # the process rocprof traces: its parent holds the lock
        measure(args)
        return
    with lock_directories([args.output_dir], "aam profile"):
        measure(args)


def measure(args: argparse.Namespace) -> None:
    """The kernel table and the memory/throughput sweep of `aam profile` (inputs checked)."""
    import torch

    from aam.profiling import kernels as kern
    from aam.profiling import probe

    if args.threads:
        torch.set_num_threads(usable_threads(args.threads))
    model = model_options(args).chosen()
    common = dict(device=args.device, precision=args.precision, seed=args.seed, **model)
    if args.steps_only:
        backend = args.backends[0] if args.backends else "auto"
        probe.run_steps_only(
            args.table,
            args.unifrac,
            tree=args.tree,
            steps=args.steps,
            batch_size=args.batch_sizes[0],
            backend=backend,
            **common,
        )
        return
    tool = choose_profiler(args.profiler, torch.version.hip)
    table = None
    if tool != "torch":
        trace_dir = args.output_dir / "rocprof"
        build = probe.rocprofv3_command if tool == "rocprofv3" else probe.rocprof_v1_command
        command = build(trace_dir, child_argv(args))
        log.info("running %s", " ".join(command))
        record_tool(tool, [tool, "--version"])
        if subprocess.run(command).returncode != 0:
            raise InputError(f"{tool} failed: {' '.join(command)}")
        table = kern.read_rocprof_dir(trace_dir)
    result = probe.profile_training(
        args.table,
        args.unifrac,
        tree=args.tree,
        steps=args.steps,
        batch_sizes=args.batch_sizes,
        backends=args.backends,
        kernels=table is None,
        **common,
    )
    if table is not None:
        result.kernels = table
    for path in probe.write_results(result, args.output_dir):
        log.info("wrote %s", path)
