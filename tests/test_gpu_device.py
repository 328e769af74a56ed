"""The `gpu` tests: every check of ``aam.diagnostics.gpu_checks`` on the GPU, one report (`make
gpu-check`).

Deselected in every other pytest run (``-m 'not gpu'`` in pyproject's addopts). The checks run
once, on the device of AAM_GPU_CHECK_DEVICE (default cuda; cpu: a dry run of the plumbing, so
``test_ran_on_a_gpu`` fails), writing report.json + report.md into AAM_GPU_CHECK_OUT; each test
asserts one check's section. AAM_GPU_CHECK_CHECKS (comma-separated) limits the checks run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from tiny_model import TINY_FLAGS

from aam.device_names import no_gpu_line
from aam.diagnostics import gpu_checks

pytestmark = pytest.mark.gpu
OUT = Path(os.environ.get("AAM_GPU_CHECK_OUT", gpu_checks.REPO / "results" / "gpu-check"))
DEVICE = os.environ.get("AAM_GPU_CHECK_DEVICE", "cuda")
CHOSEN = [c for c in os.environ.get("AAM_GPU_CHECK_CHECKS", "").split(",") if c]


@pytest.fixture(scope="module")
def report() -> dict:
    line = no_gpu_line(DEVICE)
    if line is not None:
        pytest.fail(line)
    return gpu_checks.run_checks(torch.device(DEVICE), OUT, TINY_FLAGS, CHOSEN or gpu_checks.CHECKS)


@pytest.mark.parametrize("check", CHOSEN or gpu_checks.CHECKS)  # the checks not chosen: no test
def test_check(report, check):
    section = report["checks"][check]
    assert section["status"] == "pass", f"{check}: {section['status']}: {section['message']}"


def test_ran_on_a_gpu(report):
    assert report["gpu_pass"], report["verdict"]
