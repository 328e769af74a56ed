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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aam.commands.common import MODEL_GROUP, add_model_options, model_options
from aam.errors import InputError
from aam.models.config import ATTN_IMPLEMENTATIONS
from aam.options import add_options, check_options, flag, from_args, given_options, option
from aam.runtime.atomic import check_output_dir
from aam.runtime.external_tools import record_tool
from aam.runtime.run_lock import lock_directories
from aam.runtime.threads import usable_threads
from aam.training.checkpointing.orphan import stop_with_workflow
from aam.training.config import PRECISIONS, RuntimeConfig

log = logging.getLogger(__name__)
PROFILERS = ("auto", "torch", "rocprofv3", "rocprof")


@dataclass
class ProfileSource:
    """Where a batch's UniFrac distances come from: exactly one of the two. Their own
    dataclass, added to a required mutually exclusive group (an ``exclusive`` set of options
    is an optional one); ``ProfileOptions`` holds their values."""

    tree: Path | None = option(None, "newick tree: each batch's UniFrac computed")
    unifrac: Path | None = option(None, "a precomputed UniFrac matrix instead")


@dataclass
class ProfileOptions:
    """The options of `aam profile` (``--device`` and ``--threads``: ``RuntimeConfig``'s, the
    model's: ``ModelConfig``'s)."""

    table: Path = option(None, "BIOM table", required=True)
    output_dir: Path = option(None, "kernel table, memory and throughput", required=True)
    steps: int = option(3, "measured training steps", minimum=1)
    batch_sizes: list[int] = option(
        [8],
        "sweep (2+ each: UniFrac needs pairs); the first one is used for the kernel table",
        minimum=2,
    )
    backends: list[str] = option(
        [],
        "attention backends to compare (default: all on the device)",
        choices=ATTN_IMPLEMENTATIONS,
    )
    precision: str = option("fp32", "auto: bf16 on GPUs that have it", choices=PRECISIONS)
    seed: int = option(42, "seed of the model and batches")
    profiler: str = option(
        "auto",
        "auto: rocprofv3 (then rocprof) on ROCm when on PATH, else torch",
        choices=PROFILERS,
    )
    steps_only: bool = option(False, "internal: only run the steps (the process rocprof traces)")
    tree: Path | None = None  # ProfileSource's flags, then those of other declarations
    unifrac: Path | None = None
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    model: dict[str, Any] = field(default_factory=dict)  # the model options given

    def __post_init__(self) -> None:
        check_options(self)
        if not self.batch_sizes:
            raise InputError("--batch-sizes: give one or more (2+ each: UniFrac needs pairs)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam profile`."""
    add_options(parser.add_mutually_exclusive_group(required=True), ProfileSource)
    add_options(parser, ProfileOptions)
    add_options(parser, RuntimeConfig, "profile")
    add_model_options(parser.add_argument_group(MODEL_GROUP))


def profile_options(args: argparse.Namespace) -> ProfileOptions:
    """The typed options of `aam profile`'s parsed flags."""
    return from_args(
        ProfileOptions,
        args,
        **given_options(ProfileSource, args),
        runtime=from_args(RuntimeConfig, args),
        model=model_options(args).chosen(),
    )


def run(args: argparse.Namespace) -> None:
    """`aam profile`: kernel table (rocprof or torch.profiler) + memory/throughput sweep."""
    run_profile(profile_options(args))


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


def child_argv(opts: ProfileOptions, python: str = sys.executable) -> list[str]:
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
        str(opts.table),
        *(["--tree", str(opts.tree)] if opts.tree else ["--unifrac", str(opts.unifrac)]),
        "--output-dir",
        str(opts.output_dir),
        "--steps",
        str(opts.steps),
        "--batch-sizes",
        str(opts.batch_sizes[0]),
        "--device",
        opts.runtime.device,
        "--precision",
        opts.precision,
        "--seed",
        str(opts.seed),
    ]
    if opts.backends:
        argv += ["--backends", opts.backends[0]]
    if opts.runtime.threads:
        argv += ["--threads", str(opts.runtime.threads)]
    for name, value in opts.model.items():
        if isinstance(value, bool):
            argv += [flag(name)] if value else []
        else:
            argv += [flag(name), str(value)]
    return argv


def run_profile(opts: ProfileOptions) -> None:
    """`aam profile`: kernel table (rocprof or torch.profiler) + memory/throughput sweep; one
    writer per output directory (``aam.runtime.run_lock``)."""
    for path in (opts.table, opts.tree or opts.unifrac):
        if not path.is_file():
            raise InputError(f"{path}: no such file")
    check_output_dir(opts.output_dir, "output")
    stop_with_workflow()
    if opts.steps_only:  # the process rocprof traces: its parent holds the lock
        measure(opts)
        return
    with lock_directories([opts.output_dir], "aam profile"):
        measure(opts)


def measure(opts: ProfileOptions) -> None:
    """The kernel table and the memory/throughput sweep of `aam profile` (inputs checked)."""
    import torch

    from aam.profiling import kernels as kern
    from aam.profiling import probe

    if opts.runtime.threads:
        torch.set_num_threads(usable_threads(opts.runtime.threads))
    common = dict(
        device=opts.runtime.device, precision=opts.precision, seed=opts.seed, **opts.model
    )
    if opts.steps_only:
        backend = opts.backends[0] if opts.backends else "auto"
        probe.run_steps_only(
            opts.table,
            opts.unifrac,
            tree=opts.tree,
            steps=opts.steps,
            batch_size=opts.batch_sizes[0],
            backend=backend,
            **common,
        )
        return
    tool = choose_profiler(opts.profiler, torch.version.hip)
    table = None
    if tool != "torch":
        trace_dir = opts.output_dir / "rocprof"
        build = probe.rocprofv3_command if tool == "rocprofv3" else probe.rocprof_v1_command
        command = build(trace_dir, child_argv(opts))
        log.info("running %s", " ".join(command))
        record_tool(tool, [tool, "--version"])
        if subprocess.run(command).returncode != 0:
            raise InputError(f"{tool} failed: {' '.join(command)}")
        table = kern.read_rocprof_dir(trace_dir)
    result = probe.profile_training(
        opts.table,
        opts.unifrac,
        tree=opts.tree,
        steps=opts.steps,
        batch_sizes=opts.batch_sizes,
        backends=opts.backends,
        kernels=table is None,
        **common,
    )
    if table is not None:
        result.kernels = table
    for path in probe.write_results(result, opts.output_dir):
        log.info("wrote %s", path)
