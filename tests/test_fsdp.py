"""--fsdp: 2 sharded ranks (real torchrun, gloo, CPU) train to the weights of one process, and
their checkpoints (unsharded, the usual format) resume with and without sharding."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from errors import failure_lines

from aam.training.checkpointing.checkpoint import load_checkpoint
from aam.training.parallel.distributed import DistContext

sys.path.insert(0, str(Path(__file__).parent))
from fsdp_train import GLOBAL_BATCHES, STAGES, TRAIN, train  # noqa: E402

# three torchrun runs of 2 ranks and a module fixture that trains (~2 min of CPU on 2 cores):
# `make test-extended`, beside `make test` (its 8-minute budget)
pytestmark = pytest.mark.extended

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
# Exact arithmetic gives two sets of weights no gradient: pooling's LayerNorm bias (pairwise
# embedding distances do not change when every embedding moves by the same vector) and the key
# third of each attention's qkv bias (softmax does not change when a query's scores all shift by
# the same amount). Adam moves them by up to about lr per step in the direction of rounding
# noise, so they are held to that bound only. Every other weight: within 2e-5 (2% of one step
# at lr 1e-3; a wrong gradient scale or shard is off by about one step); Adam's moments, which
# are linear in the gradients: rtol 1e-3 above an atol far below any gradient with signal.
WEIGHTS = {"rtol": 1e-5, "atol": 2e-5}
MOMENTS = {"exp_avg": 1e-7, "exp_avg_sq": 1e-10}


def no_signal(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """Mask of the elements of weight ``name`` that get no gradient in exact arithmetic."""
    mask = torch.zeros_like(tensor, dtype=torch.bool)
    if name.endswith("pooling.norm.bias"):
        mask[:] = True
    elif name.endswith("attn.qkv.bias"):
        third = len(tensor) // 3
        mask[third : 2 * third] = True
    return mask


def assert_same_training(sharded: dict, single: dict, lr: float, steps: int) -> None:
    """Weights and optimizer state of two runs agree (the optimizer's numbering too)."""
    assert sharded["model"].keys() == single["model"].keys()
    for name, theirs in single["model"].items():
        ours, noise = sharded["model"][name], no_signal(name, theirs)
        torch.testing.assert_close(
            ours[~noise], theirs[~noise], **WEIGHTS, msg=lambda m, name=name: f"{name}: {m}"
        )
        assert ((ours - theirs)[noise].abs() <= 2 * lr * steps).all(), name
    ours, theirs = sharded["optimizer"], single["optimizer"]
    assert ours["param_groups"] == theirs["param_groups"]
    assert ours["state"].keys() == theirs["state"].keys()
    for k, state in theirs["state"].items():
        assert torch.equal(ours["state"][k]["step"], state["step"])
        for key, atol in MOMENTS.items():
            torch.testing.assert_close(ours["state"][k][key], state[key], rtol=1e-3, atol=atol)


@pytest.mark.slow
def test_two_sharded_ranks_train_to_the_weights_of_one_process(small_study, tmp_path):
    out = tmp_path / "fsdp.pt"
    script = Path(__file__).parent / "fsdp_train.py"
    run = subprocess.run(
        [*TORCHRUN, str(script), str(small_study), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, failure_lines(run.stderr)
    sharded = torch.load(out, weights_only=True)
    for stage in STAGES:
        single = train(small_study, DistContext(), stage)
        assert_same_training(sharded[stage], single, TRAIN.lr, len(GLOBAL_BATCHES))
        assert sharded[stage]["metrics"] == pytest.approx(single["metrics"], rel=1e-5), stage


EPOCHS = 3


# A tiny model on one thread without dropout or masks: runs that must end with equal weights.
TINY_RUN = {
    "--batch-size": 4,
    "--embedding-dim": 16,
    "--attention-heads": 2,
    "--layers": 1,
    "--max-bp": 100,
    "--token-limit": 128,
    "--dropout": 0,
    "--mask-rate": 0,
    "--lr": 1e-3,
    "--threads": 1,
    "--device": "cpu",
    "--seed": 7,
}


def _pretrain(study: Path, out: Path, *extra: str) -> list[str]:
    """`aam pretrain` whose 2-rank and 1-process runs are the same computation: no dropout or
    masks (drawn per rank), 36 training samples (9 whole batches of 4)."""
    flags = {
        "--table": study / "table.biom",
        "--unifrac": study / "unifrac.h5",
        "--output-dir": out,
        "--epochs": EPOCHS,
        "--val-fraction": 0.25,
        **TINY_RUN,
    }
    args = [str(part) for item in flags.items() for part in item]
    return ["-m", "aam", "pretrain", *args, "--no-progress", *extra]


def _latest(out: Path) -> dict:
    return load_checkpoint(out / "checkpoints" / "latest.pt")


@pytest.fixture(scope="module")
def one_process(small_study, tmp_path_factory) -> Path:
    """A 1-process run: latest.pt is the end of epoch 3, latest.prev.pt of epoch 2."""
    out = tmp_path_factory.mktemp("one_process")
    subprocess.run([sys.executable, *_pretrain(small_study, out)], check=True, capture_output=True)
    return out


def _same_as_one_process(out: Path, one_process: Path) -> None:
    ours, theirs = _latest(out), _latest(one_process)
    assert (ours["epoch"], ours["step"]) == (theirs["epoch"], theirs["step"]) == (EPOCHS, 27)
    assert_same_training(ours, theirs, lr=1e-3, steps=ours["step"])


@pytest.mark.slow
def test_a_checkpoint_without_fsdp_resumes_with_it(small_study, tmp_path, one_process):
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    shutil.copy(one_process / "checkpoints" / "latest.prev.pt", out / "checkpoints" / "latest.pt")
    run = subprocess.run(
        [*TORCHRUN, *_pretrain(small_study, out, "--fsdp")], capture_output=True, text=True
    )
    assert run.returncode == 0, failure_lines(run.stderr)
    assert "sharding the model over 2 processes" in run.stderr
    assert "resumed from" in run.stderr and "at epoch 3, batch 0" in run.stderr
    _same_as_one_process(out, one_process)
    assert (out / "encoder.pt").exists()


def _signal_one_rank_mid_epoch(command: list[str], latest: Path) -> tuple[int, str]:
    """Run ``command`` (torchrun); once latest.pt is mid-epoch, SIGUSR1 one of its two workers.
    Returns torchrun's exit status and stderr."""
    launcher = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and launcher.poll() is None:
            state = load_checkpoint(latest) if latest.exists() else None
            if state and state["epoch"] >= 1 and state["batch"] > 0:
                os.kill(int(children.read_text().split()[-1]), signal.SIGUSR1)
                break
            time.sleep(0.05)
        stderr = launcher.communicate(timeout=60)[1]
    finally:
        if launcher.poll() is None:
            launcher.kill()
    return launcher.returncode, stderr


@pytest.mark.slow
def test_usr1_to_one_rank_saves_a_checkpoint_that_resumes_without_fsdp(
    small_study, tmp_path, one_process
):
    """SLURM's USR1 may reach one rank first: every rank saves latest.pt together and exits 75;
    one process without --fsdp resumes from it to the 1-process run's weights."""
    out = tmp_path / "run"
    every_step = ("--checkpoint-every-minutes", "1e-9")
    command = [*TORCHRUN, *_pretrain(small_study, out, "--fsdp", *every_step)]
    status, stderr = _signal_one_rank_mid_epoch(command, out / "checkpoints" / "latest.pt")
    assert status != 0, "the run finished before the signal"
    assert "preempted: SIGUSR1: saved" in stderr
    assert "preempted: a signal to another rank: saved" in stderr
    assert "exitcode  : 75" in stderr
    saved = _latest(out)
    assert saved["epoch"] < EPOCHS and saved["batch"] > 0  # resumes mid-epoch
    resumed = subprocess.run(
        [sys.executable, *_pretrain(small_study, out)], capture_output=True, text=True
    )
    assert resumed.returncode == 0, failure_lines(resumed.stderr)
    assert "resumed from" in resumed.stderr
    _same_as_one_process(out, one_process)
