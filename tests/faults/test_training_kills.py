"""Training killed again and again: SIGKILLs at seeded write points (each a checkpoint being
written: file complete under its temporary name, not yet renamed; several per run), or a full
disk there (exit 2), each followed by a plain rerun, end with the weights of an uninterrupted
run, bit for bit. The seed in a test's name replays its kill points."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from injection import INJECTION, WritePoints, temporaries
from tiny_model import TINY_FLAGS

from aam.runtime.run_lock import LOCK_NAME

pytestmark = [pytest.mark.faults, pytest.mark.xdist_group("training_kills")]

KILLS_PER_RUN = 3
OUTPUT = {"pretrain": "encoder.pt", "finetune": "model.pt"}


def argv(command: str, study: Path, demo_dir: Path, out: Path) -> list[str]:
    """A 2-epoch run of ``command`` with a checkpoint after every step."""
    data = ["--table", study / "table.biom", "--unifrac", study / "unifrac.h5"]
    if command == "finetune":
        data += ["--metadata", demo_dir / "metadata.tsv", "--target-column", "age"]
        data += ["--allow-missing-samples"]  # the metadata of every demo sample
    return [
        str(a)
        for a in [
            command,
            *data,
            *TINY_FLAGS,
            *("--epochs", "2", "--batch-size", "8", "--seed", "7", "--threads", "1"),
            *("--device", "cpu", "--no-progress", "--checkpoint-every-minutes", "1e-9"),
            *("--output-dir", out),
        ]
    ]


def run(args: list[str], fault: str | None = None, at: int = 0) -> subprocess.CompletedProcess:
    injected = [str(INJECTION), fault, str(at), "--"] if fault else ["-m", "aam"]
    return subprocess.run(
        [sys.executable, *injected, *args], capture_output=True, text=True, timeout=600
    )


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["model"]


@pytest.fixture(scope="module")
def uninterrupted(small_study, demo_dir, tmp_path_factory) -> dict[str, dict]:
    runs = {}
    for command, output in OUTPUT.items():
        out = tmp_path_factory.mktemp(f"straight_{command}")
        done = run(argv(command, small_study, demo_dir, out))
        assert done.returncode == 0, done.stderr[-2000:]
        runs[command] = weights(out / output)
    return runs


def assert_same_weights(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert got.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(got[name], tensor), name


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("command", list(OUTPUT))
def test_kills_at_seeded_checkpoint_writes_resume_to_the_uninterrupted_weights(
    small_study, demo_dir, tmp_path, uninterrupted, command, seed
):
    rng = random.Random(seed)
    out = tmp_path / "run"
    args = argv(command, small_study, demo_dir, out)
    for kill in range(KILLS_PER_RUN):
        at = rng.randint(1, 4)  # the run writes a checkpoint at every step: 20+ points
        killed = run(args, "kill", at)
        assert killed.returncode == -9, (seed, kill, at, killed.stderr[-2000:])
        assert not (out / OUTPUT[command]).exists()
        assert temporaries(out), "killed with a checkpoint written but not renamed"
    saved = (out / "checkpoints" / "latest.pt").exists()  # not when every kill hit the first
    finished = run(args)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert ("resumed from" in finished.stderr) == saved
    assert not temporaries(out) and not (out / LOCK_NAME).exists()
    assert_same_weights(weights(out / OUTPUT[command]), uninterrupted[command])


@pytest.mark.parametrize("seed", [3])
@pytest.mark.parametrize("command", list(OUTPUT))
def test_a_full_disk_at_a_seeded_checkpoint_write_is_one_line_and_resumes(
    small_study, demo_dir, tmp_path, uninterrupted, command, seed
):
    at = random.Random(seed).randint(2, 6)
    out = tmp_path / "run"
    args = argv(command, small_study, demo_dir, out)
    failed = run(args, "enospc", at)
    assert failed.returncode == 2, failed.stderr[-2000:]
    errors = [line for line in failed.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "no space left on device" in errors[0], failed.stderr[-2000:]
    assert "checkpoint" in errors[0] and "Traceback" not in failed.stderr
    assert not (out / OUTPUT[command]).exists() and not temporaries(out)
    finished = run(args)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert_same_weights(weights(out / OUTPUT[command]), uninterrupted[command])


@pytest.mark.parametrize("command", list(OUTPUT))
def test_a_write_error_among_the_final_outputs_publishes_none_and_a_rerun_finishes(
    small_study, demo_dir, tmp_path, monkeypatch, capsys, uninterrupted, command
):
    """The last write points of a run are its outputs (model, history, summary, split,
    provenance): a full disk or an I/O error at any of them publishes none, and the rerun
    resumes from the last checkpoint to the uninterrupted weights."""
    from aam.cli import main

    def run_here(out: Path, points: WritePoints) -> int:
        argv_here = ["--provenance", str(out / "provenance.json"), *argv(command, *inputs, out)]
        with monkeypatch.context() as patch:
            patch.setattr("os.fsync", points)
            return main(argv_here)

    inputs = (small_study, demo_dir)
    counted = WritePoints()
    assert run_here(tmp_path / "counted", counted) == 0
    finals = [p for p in counted.targets if p.parent == tmp_path / "counted"]
    assert {p.name for p in finals} >= {OUTPUT[command], "history.tsv", "provenance.json"}
    first_final = len(counted.targets) - len(finals) + 1
    for at in range(first_final, len(counted.targets) + 1):
        out = tmp_path / f"at{at}"
        fault = ("enospc", "eio")[at % 2]
        assert run_here(out, WritePoints(fault, at)) == 2
        assert capsys.readouterr().err.count("error:") == 1
        assert not [p for p in out.iterdir() if p.is_file()], f"published at point {at}"
        assert run_here(out, WritePoints()) == 0
        assert_same_weights(weights(out / OUTPUT[command]), uninterrupted[command])
