"""DDP: a 2-process step (real torchrun, gloo) equals a 1-process step on the whole batch."""

import subprocess
import sys
from pathlib import Path

import torch

from aam.training.distributed import DistContext

sys.path.insert(0, str(Path(__file__).parent))
from ddp_step import step  # noqa: E402


def test_two_rank_step_matches_single_process_on_the_concatenated_batch(small_study, tmp_path):
    out = tmp_path / "ddp.pt"
    script = Path(__file__).parent / "ddp_step.py"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(script),
            str(small_study),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    ddp = torch.load(out, weights_only=True)
    single_loss, single_grads = step(small_study, DistContext())
    assert abs(ddp["unifrac_loss"] - single_loss) < 1e-6
    assert ddp["grads"].keys() == single_grads.keys()
    assert len(single_grads) > 10
    for name, grad in single_grads.items():
        torch.testing.assert_close(ddp["grads"][name], grad, rtol=1e-4, atol=1e-6, msg=name)
