"""Training resume: a run killed mid-epoch and restarted ends with the same weights."""

import signal
import subprocess
import sys
import time

import pytest
import torch

from aam.training.checkpoint import load_checkpoint


def _command(study, out, *extra):
    return [
        sys.executable,
        "-m",
        "aam",
        "pretrain",
        "--table",
        str(study / "table.biom"),
        "--unifrac",
        str(study / "unifrac.h5"),
        "--output-dir",
        str(out),
        "--epochs",
        "3",
        "--batch-size",
        "4",
        "--embedding-dim",
        "32",
        "--attention-heads",
        "2",
        "--layers",
        "1",
        "--max-bp",
        "100",
        "--token-limit",
        "128",
        "--threads",
        "1",
        "--device",
        "cpu",
        "--seed",
        "7",
        "--no-progress",
        *extra,
    ]


def _interrupt(cmd, latest, send) -> dict:
    """Start ``cmd``; once latest.pt is mid-epoch (epoch >= 1, batch > 0) call ``send``."""
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            state = load_checkpoint(latest) if latest.exists() else None
            if state and state["epoch"] >= 1 and state["batch"] > 0:
                send(proc)
                break
            time.sleep(0.02)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (latest.parent.parent / "encoder.pt").exists(), "run finished before the kill"
    return {"returncode": proc.returncode, "stderr": proc.stderr.read()}


def _weights(path):
    return torch.load(path, weights_only=True)["model"]


@pytest.fixture(scope="module")
def uninterrupted(small_study, tmp_path_factory):
    out = tmp_path_factory.mktemp("straight")
    subprocess.run(_command(small_study, out), check=True, capture_output=True)
    return _weights(out / "encoder.pt")


@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_interrupted_run_resumes_to_identical_weights(small_study, tmp_path, uninterrupted, how):
    out = tmp_path / how
    cmd = _command(small_study, out, "--checkpoint-every-minutes", "1e-9")
    latest = out / "checkpoints" / "latest.pt"
    if how == "sigkill":
        result = _interrupt(cmd, latest, lambda p: p.send_signal(signal.SIGKILL))
        assert result["returncode"] == -signal.SIGKILL
    else:  # SLURM's warning before walltime: save latest.pt and exit 75 to be rerun
        result = _interrupt(cmd, latest, lambda p: p.send_signal(signal.SIGTERM))
        assert result["returncode"] == 75, result["stderr"]
        assert "preempted" in result["stderr"]
    saved = load_checkpoint(latest)
    assert saved["epoch"] >= 1 and saved["batch"] > 0  # resumes mid-epoch
    finished = subprocess.run(cmd, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert "resumed from" in finished.stderr
    resumed = _weights(out / "encoder.pt")
    assert resumed.keys() == uninterrupted.keys()
    for name, tensor in uninterrupted.items():
        assert torch.equal(resumed[name], tensor), name
    history = (out / "history.tsv").read_text().splitlines()
    assert [row.split("\t")[0] for row in history] == ["epoch", "1", "2", "3"]
