"""Lint gates: ruff, snakefmt, `snakemake --lint`, and a dry run of every profile."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PROFILES = sorted(p.name for p in (REPO / "profiles").iterdir() if p.is_dir())


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)


@pytest.mark.parametrize(
    "cmd",
    [
        ("ruff", "check", "aam", "tests", "benchmarks"),
        ("ruff", "format", "--check", "aam", "tests", "benchmarks"),
        ("snakefmt", "--check", "workflow"),
    ],
    ids=["ruff", "ruff-format", "snakefmt"],
)
def test_linters_pass(cmd):
    run = _run(str(BIN / cmd[0]), *cmd[1:])
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


def test_snakemake_lint_has_no_findings():
    run = _run(sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--lint")
    assert run.returncode == 0 and "Congratulations" in run.stdout + run.stderr, run.stdout


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_dry_runs(profile, tmp_path):
    run = _run(sys.executable, "-m", "snakemake", "all", "--profile", f"profiles/{profile}",
               "--dry-run", "--config", f"workdir={tmp_path}")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "pretrain" in run.stdout and "predict" in run.stdout
