"""`make gpu-check` where there is no GPU: the one-line refusal, the gpu tests deselected by
default, the report of a CPU dry run, and the install from carried wheels without an index."""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_model import TINY_FLAGS

from aam.diagnostics import gpu_checks

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gpu_env  # noqa: E402 - tools/gpu_env.py, outside the package

REPO = Path(__file__).resolve().parents[1]
GPU_TESTS = "tests/test_gpu_device.py"
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
# torch and what `import torch` needs: the machine's python on a GPU node, nothing of ours.
TORCH_STACK = ("torch", "filelock", "typing_extensions", "sympy", "mpmath", "networkx", "jinja2")
TORCH_STACK += ("MarkupSafe", "fsspec")


def strict_json(path: Path) -> dict:
    """The file as JSON, refusing the NaN/Infinity that strict readers reject."""

    def refuse(name: str) -> None:
        raise ValueError(f"{path}: bare {name} in JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.mark.slow
@NO_GPU
def test_make_gpu_check_without_a_gpu_stops_with_one_line():
    proc = subprocess.run(
        ["make", "--no-print-directory", "gpu-check", f"GPU_PYTHON={sys.executable}"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    ours = [line for line in proc.stderr.splitlines() if not line.startswith("make")]
    assert len(ours) == 1, proc.stderr
    assert ours[0].startswith("gpu-check: no GPU: torch.cuda.is_available() is False"), ours


@pytest.mark.slow
def test_gpu_tests_are_deselected_by_default():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-n",
            "0",
            "tests/test_gpu_device.py",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    n = len(gpu_checks.CHECKS) + 1
    assert f"no tests collected ({n} deselected)" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.NO_TESTS_COLLECTED


@pytest.mark.slow
def test_cpu_dry_run_report_has_every_section(tmp_path):
    report = gpu_checks.run_checks(torch.device("cpu"), tmp_path, TINY_FLAGS, ["golden", "doctor"])
    data = strict_json(tmp_path / "report.json")
    assert data == json.loads(json.dumps(report))
    assert data["format"] == gpu_checks.FORMAT and data["dry_run"] and not data["gpu_pass"]
    assert data["verdict"] == (
        "DRY RUN on cpu (2/7 checks passed; not run: unifrac, training, auto_batch, profile, "
        "throughput): plumbing only, not a GPU pass"
    )
    env = data["environment"]
    assert env["device"] == "cpu" and env["device_name"] == "cpu"
    assert env["torch"] == torch.__version__ and {"cuda", "hip"} <= set(env)
    assert list(data["checks"]) == list(gpu_checks.CHECKS)
    for name, section in data["checks"].items():
        assert set(section) == {"status", "message", "numbers", "seconds"}, name
        expected = "pass" if name in ("golden", "doctor") else "skipped"
        assert section["status"] == expected, (name, section)
    assert {"math/fp32", "math/bf16", "auto/fp32", "auto/bf16"} <= set(
        data["checks"]["golden"]["numbers"]
    )
    assert (tmp_path / "golden.json").is_file() and (tmp_path / "doctor.json").is_file()
    text = (tmp_path / "report.md").read_text()
    assert "DRY RUN" in text and all(f"| {name} |" in text for name in gpu_checks.CHECKS)


def test_a_nan_is_never_a_pass_and_a_crash_is_an_error(tmp_path, monkeypatch):
    checks = dict(gpu_checks.CHECK_FUNCTIONS)
    checks["golden"] = lambda ctx: {"numbers": {"flash": {"max_abs": math.nan}}}
    checks["doctor"] = lambda ctx: 1 / 0
    monkeypatch.setattr(gpu_checks, "CHECK_FUNCTIONS", checks)
    gpu_checks.run_checks(torch.device("cpu"), tmp_path, TINY_FLAGS, ["golden", "doctor"])
    data = strict_json(tmp_path / "report.json")
    golden, doctor = data["checks"]["golden"], data["checks"]["doctor"]
    assert golden["status"] == "fail" and "flash.max_abs" in golden["message"]
    assert golden["numbers"]["flash"]["max_abs"] is None  # NaN written as null
    assert doctor["status"] == "error" and doctor["message"].startswith("ZeroDivisionError")
    assert (
        not data["passed"]
        and "0/7 checks passed; not passed: golden (fail), doctor (error);" in data["verdict"]
    )


def test_a_run_killed_mid_way_leaves_the_checks_it_ran(tmp_path, monkeypatch):
    """The report is rewritten after each check: a job killed at its time limit keeps them."""

    def killed(ctx):
        raise KeyboardInterrupt  # as SIGINT/SIGTERM: not an error section, the process ends

    checks = dict(gpu_checks.CHECK_FUNCTIONS)
    checks["golden"] = lambda ctx: {"numbers": {"worst": 1e-7}, "message": "ok"}
    checks["unifrac"] = killed
    monkeypatch.setattr(gpu_checks, "CHECK_FUNCTIONS", checks)
    with pytest.raises(KeyboardInterrupt):
        gpu_checks.run_checks(torch.device("cpu"), tmp_path, TINY_FLAGS, ["unifrac", "golden"])
    data = strict_json(tmp_path / "report.json")
    assert data["checks"]["golden"]["status"] == "pass"
    assert data["checks"]["unifrac"]["message"] == gpu_checks.NOT_YET_RUN
    assert data["checks"]["doctor"]["message"] == gpu_checks.NOT_SELECTED
    assert not data["passed"]
    assert "1/7 checks passed; not run: unifrac, training" in data["verdict"]


def test_a_failed_command_keeps_its_whole_stderr_beside_its_error_line(tmp_path):
    """The training check tells flash's one-line refusal (unsupported) from a failure by the
    command's whole stderr, not by the line picked for the report (issue 38: on the H200 a
    compiled flash run's last "error" line was a dynamo hint)."""
    ctx = gpu_checks.Context(torch.device("cpu"), tmp_path, tmp_path, [])
    with pytest.raises(gpu_checks.CheckFailed) as caught:
        ctx.aam("pretrain", "--table", tmp_path / "absent.biom", "--output-dir", tmp_path / "o")
    line = str(caught.value)
    assert line.startswith("aam pretrain exited 2: ") and "\n" not in line
    assert caught.value.stderr.endswith("\n")  # the stderr as written, every line of it
    assert line.removeprefix("aam pretrain exited 2: ") in caught.value.stderr


def test_unknown_check_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"unknown checks \['gpu'\]"):
        gpu_checks.run_checks(torch.device("cpu"), tmp_path, TINY_FLAGS, ["gpu"])


def test_wheel_parts_fit_the_carry_limit(tmp_path):
    sizes = {"a": 50, "b": 30, "c": 25, "d": 8, "e": 1}  # MiB
    wheels = []
    for name, mib in sizes.items():
        wheel = tmp_path / f"{name}-1.0-py3-none-any.whl"
        with wheel.open("wb") as handle:
            handle.truncate(mib * 2**20)
        wheels.append(wheel)
    parts = gpu_env.split_parts(wheels, 60)
    assert [[w.name[0] for w in part] for part in parts] == [["a", "d", "e"], ["b", "c"]]
    with pytest.raises(ValueError, match=r"a-1.0-py3-none-any.whl: 50.0 MiB, over the 40 MiB"):
        gpu_env.split_parts(wheels, 40)
    assert gpu_env.project(Path("biom_format-2.1.18-cp311-cp311-x.whl")) == "biom-format"


def test_requirements_are_pyprojects():
    text = (REPO / "pyproject.toml").read_text()
    for spec in [*gpu_env.REQUIRED, *gpu_env.OPTIONAL]:
        assert f'"{spec}"' in text, spec


def torch_only_python(root: Path) -> Path:
    """A venv whose only packages are this python's torch stack (symlinked): a GPU node's
    python with its torch and none of our dependencies."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    (site,) = root.glob("lib/python*/site-packages")
    for name in TORCH_STACK:
        dist = importlib.metadata.distribution(name)
        tops = {f.parts[0] for f in dist.files if not f.parts[0].startswith("..")}
        for top in tops - {"__pycache__", "bin"}:
            (site / top).symlink_to(dist.locate_file(top))
    return root / "bin" / "python"


@NO_GPU
@pytest.mark.extended  # downloads and installs the wheelhouse: `make test-extended`
def test_install_from_the_wheelhouse_without_an_index_then_a_dry_run(tmp_path):
    wheelhouse = tmp_path / "wheelhouse"
    version = ".".join(map(str, sys.version_info[:2]))
    try:
        parts = gpu_env.make_wheelhouse(wheelhouse, version, limit_mib=60)
    except subprocess.CalledProcessError as err:
        pytest.fail(f"no package index to download the wheels from (make venv needs one): {err}")
    assert all(part["mib"] <= 60 for part in parts)
    assert any("llvmlite" in " ".join(p["wheels"]) for p in parts if p["optional"])
    python = torch_only_python(tmp_path / "gpu-node")
    lacks = subprocess.run(
        [python, "tools/gpu_env.py", "missing"], cwd=REPO, capture_output=True, text=True
    )
    assert lacks.returncode == 1 and "numpy" in lacks.stdout.split(), lacks.stdout
    venv, out = tmp_path / "venv-gpu", tmp_path / "report"
    offline = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    offline.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL="http://127.0.0.1:9/nothing")
    proc = subprocess.run(
        [python, "tools/gpu_env.py", "run", "--device", "cpu", "--venv", str(venv)]
        + ["--wheelhouse", str(wheelhouse), "--out", str(out), "--checks", "golden"],
        cwd=REPO,
        env=offline,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a dry run is never a GPU pass
    assert "DRY RUN on cpu (1/7 checks passed; not run: unifrac," in proc.stdout, proc.stdout
    data = strict_json(out / "report.json")
    assert data["checks"]["golden"]["status"] == "pass", data["checks"]["golden"]
    check = "import aam.cli, numba, torch; print(torch.__file__)"
    imported = subprocess.run(
        [venv / "bin" / "python", "-c", check], cwd=REPO, capture_output=True, text=True
    )
    assert imported.returncode == 0, imported.stderr
    assert str(venv) not in imported.stdout  # the node's torch, not one installed in the venv
