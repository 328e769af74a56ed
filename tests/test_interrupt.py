"""Ctrl-C (SIGINT) stops a training run as SLURM's SIGTERM does: latest.pt saved at the next
step, one line, exit status 75, no traceback; where nothing can be saved (before the steps,
writing the outputs), one line and status 130."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys

import pytest
from tiny_model import TINY_FLAGS

from aam.training.checkpointing.checkpoint import load_checkpoint
from aam.training.checkpointing.preemption import PreemptionFlag
from aam.training.run import EXIT_INTERRUPTED, EXIT_PREEMPTED, sigint_exits


def test_every_sigint_only_sets_the_flag():
    """A second Ctrl-C too (Snakemake passes it on): the steps since the last save are kept."""
    before = signal.getsignal(signal.SIGINT)
    with PreemptionFlag() as flag:
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGINT)
            assert flag.requested and flag.signal_name == "SIGINT"
    assert signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_where_nothing_can_be_saved_is_one_line_and_status_130(caplog):
    caplog.set_level(logging.INFO)
    with pytest.raises(SystemExit) as stop, sigint_exits():
        raise KeyboardInterrupt
    assert stop.value.code == EXIT_INTERRUPTED == 130
    assert [r.getMessage() for r in caplog.records] == [
        "stopped by SIGINT, nothing saved; a rerun resumes from the last latest.pt"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_sigint_during_training_saves_latest_and_exits_75_in_one_line(
    command, small_study, demo_dir, tmp_path
):
    out = tmp_path / "run"
    args = ["--table", small_study / "table.biom", "--unifrac", small_study / "unifrac.h5"]
    if command == "finetune":
        args += ["--metadata", demo_dir / "metadata.tsv", "--target-column", "age"]
        args += ["--allow-missing-samples"]
    args += [*TINY_FLAGS, "--epochs", "100", "--batch-size", "4", "--threads", "1"]
    args += ["--device", "cpu", "--no-progress", "--checkpoint-every-minutes", "0"]
    argv = [sys.executable, "-m", "aam", command, *map(str, args), "--output-dir", str(out)]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stderr:  # the steps have started: the flag is set
            lines.append(line)
            if "first step done" in line:
                proc.send_signal(signal.SIGINT)
                proc.send_signal(signal.SIGINT)  # Ctrl-C twice (Snakemake passes both on)
                break
        lines += proc.stderr.readlines()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = "".join(lines)
    assert proc.returncode == EXIT_PREEMPTED, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    latest = out / "checkpoints" / "latest.pt"
    said = [line for line in lines if "SIGINT" in line]
    assert said == [f"aam {command}: preempted: SIGINT: saved {latest}; rerun to resume\n"], err
    state = load_checkpoint(latest)
    assert state["epoch"] < 100 and (state["epoch"], state["batch"]) > (0, 0)
