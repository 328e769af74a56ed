"""One epoch of DDP training with --grad-accum 2 (run under torchrun by tests/ddp_runs.py),
twice: as the Trainer runs it (``no_sync`` before a step's last batch) and with every batch
all-reduced. Per run: the all-reduces DDP made (a counting comm hook), the optimizer steps and
the gradients the first optimizer step applies (both runs start from the same weights; AdamW
then amplifies the gradients' rounding differences in near-zero gradients)."""

from contextlib import nullcontext
from pathlib import Path

import torch
from tiny_model import tiny_model
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

import aam.training.step as step_module
from aam.models import SequenceEncoder
from aam.training.config import TrainConfig
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import UniFracSource, load_study
from aam.training.inputs.study_options import StudyOptions
from aam.training.objective import Objective
from aam.training.parallel.distributed import DistContext
from aam.training.trainer import Trainer

TRAIN = TrainConfig(epochs=1, batch_size=8, grad_accum=2, checkpoint_every_minutes=0)


def train(study_dir: Path, ctx: DistContext, out: Path) -> dict:
    study = load_study(
        study_dir / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(matrix=study_dir / "unifrac.h5"),
        reading=StudyOptions(val_fraction=0.0),
    )
    torch.manual_seed(0)
    model = SequenceEncoder(tiny_model())
    ddp = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    calls = []

    def counting_hook(state, bucket):
        calls.append(bucket.index())
        return allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, counting_hook)
    objective = Objective.of(TRAIN, predictor=False, study=study, ctx=ctx)
    batches = TrainBatches(study, 64, ctx=ctx, distances=objective.use_unifrac)
    cpu = torch.device("cpu")
    trainer = Trainer(ddp, objective, batches, TRAIN, ctx, out, cpu, resume_config={})
    grads = []
    update = trainer.step.update

    def recording_update(where: str) -> list[dict[str, float]]:
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        return update(where)

    trainer.step.update = recording_update
    trainer.fit()
    return {"all_reduces": len(calls), "steps": trainer.state.step, "grads": grads[0]}


def both_runs(study_dir: Path, ctx: DistContext, out: Path) -> dict[str, dict]:
    """The Trainer's run, then one with every batch all-reduced (outputs under ``out``)."""
    runs = {"no_sync": train(study_dir, ctx, out / "no_sync")}
    step_module.gradient_sync = lambda model, at_step: nullcontext()  # every batch syncs
    runs["every_batch"] = train(study_dir, ctx, out / "every_batch")
    return runs
