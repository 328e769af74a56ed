"""The DDP runs of tests/test_distributed.py in one torchrun launch (gloo, CPU, 2 processes;
one launch instead of two: each costs three Python processes that import torch): one
pretraining step (ddp_step.py), then an epoch with --grad-accum 2, twice (ddp_accum.py).
Rank 0 saves both.

``python -m torch.distributed.run --standalone --nproc_per_node 2 tests/ddp_runs.py STUDY OUT``
"""

import sys
from pathlib import Path

import torch
from ddp_accum import both_runs
from ddp_step import step

from aam.training.parallel.distributed import init_distributed

if __name__ == "__main__":
    study_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    context = init_distributed("cpu")
    unifrac_loss, gradients = step(study_dir, context)
    accum = both_runs(study_dir, context, out.parent)
    if context.is_main:
        step_run = {"unifrac_loss": unifrac_loss, "grads": gradients}
        torch.save({"step": step_run, "accum": accum}, out)
