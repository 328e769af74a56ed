"""`aam gpu-check`: what aam does on this machine's GPU (CUDA or ROCm), as one report.

Runs the ``gpu``-marked tests (tests/test_gpu_device.py) of the checkout, which run every check
of ``aam.diagnostics.gpu_checks`` once and write ``report.json`` + ``report.md``; exits 1 unless
that is a GPU pass. `make gpu-check` runs it through ``tools/gpu_env.py``, which first makes a
python with what the checks import (from carried wheels, no network).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from aam.device_names import no_gpu_line
from aam.diagnostics.gpu_checks import CHECKS, GPU_TESTS, REPO
from aam.errors import InputError
from aam.options import add_options, check_options, from_args, option


@dataclass
class GpuCheckOptions:
    """The options of `aam gpu-check`."""

    device: str = option("cuda", "cuda (CUDA or ROCm), or cpu: a dry run of the plumbing")
    out: Path = option(REPO / "results" / "gpu-check", "report directory")
    checks: list[str] = option(list(CHECKS), "the checks to run", choices=CHECKS)

    def __post_init__(self) -> None:
        check_options(self)
        if not self.checks:
            raise InputError("--checks: name one or more of " + ", ".join(CHECKS))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam gpu-check`."""
    add_options(parser, GpuCheckOptions)


def run(args: argparse.Namespace) -> None:
    """The gpu tests in a pytest of their own (no conftest, no plugins), then the verdict."""
    opts = from_args(GpuCheckOptions, args)
    line = no_gpu_line(opts.device)
    if line is not None:
        raise InputError(line)
    out = opts.out.resolve()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {
        **os.environ,
        "AAM_GPU_CHECK_OUT": str(out),
        "AAM_GPU_CHECK_DEVICE": opts.device,
        "AAM_GPU_CHECK_CHECKS": ",".join(opts.checks),
        "PYTHONPATH": os.pathsep.join([str(REPO), *paths]),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # not the machine's plugins (xdist, benchmark)
    }
    # No conftest (it needs the whole test stack) and no plugins: just the gpu tests.
    pytest = [sys.executable, "-m", "pytest", "-o", "addopts=-ra -p no:cacheprovider"]
    pytest += ["--noconftest", "-m", "gpu", GPU_TESTS]
    code = subprocess.run(pytest, cwd=REPO, env=env).returncode
    report = out / "report.json"
    if report.is_file():
        print(f"gpu-check: {json.loads(report.read_text())['verdict']}")
        print(f"gpu-check: report {report} and {out / 'report.md'}")
    if code != 0:
        raise SystemExit(1)  # checks ran and did not all pass on a GPU: not bad input
