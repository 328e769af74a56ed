"""One pretraining step on a global batch of 8, this rank's share of it (run under torchrun by
tests/ddp_runs.py; in one process by tests/test_distributed.py)."""

from pathlib import Path

import numpy as np
import torch
from tiny_model import tiny_model

from aam.models import SequenceEncoder
from aam.training.config import TrainConfig
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import UniFracSource, load_study
from aam.training.inputs.study_options import StudyOptions
from aam.training.objective import Objective
from aam.training.parallel.distributed import DistContext, rank_slice
from aam.training.step import step_loss

GLOBAL_BATCH = np.arange(8)
MODEL = tiny_model(dropout=0.0)
TRAIN = TrainConfig(batch_size=8, mask_rate=0.0)


def step(study_dir: Path, ctx: DistContext) -> tuple[float, dict[str, torch.Tensor]]:
    """Loss and parameter gradients of one step on GLOBAL_BATCH (this rank's share of it)."""
    study = load_study(
        study_dir / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(matrix=study_dir / "unifrac.h5"),
        reading=StudyOptions(val_fraction=0.0),
    )
    torch.manual_seed(0)
    model = SequenceEncoder(MODEL)
    ddp = torch.nn.parallel.DistributedDataParallel
    wrapped = ddp(model, find_unused_parameters=True) if ctx.enabled else model
    objective = Objective.of(TRAIN, predictor=False, study=study, ctx=ctx)
    batches = TrainBatches(study, 64, ctx=ctx, distances=objective.use_unifrac)
    batch = batches.batch(GLOBAL_BATCH)  # this rank's share, its rows of the distances
    assert len(batch.sample_index) == len(rank_slice(GLOBAL_BATCH, ctx))
    assert batch.distances.shape == (len(batch.sample_index), len(GLOBAL_BATCH))  # its rows
    loss, terms = step_loss(wrapped, objective, batch, torch.Generator().manual_seed(0))
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return terms["unifrac_loss"].item(), grads
