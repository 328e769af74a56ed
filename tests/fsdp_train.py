"""Validation, then three optimizer steps, under torchrun (gloo, CPU) with the model sharded
as by ``--fsdp``; rank 0 saves each stage's validation metrics and the gathered weights and
optimizer state. Validation comes first, as in a run resumed at an epoch's end: its first
forward is the nucleotide encoder's, not the whole model's.

Run by tests/test_fsdp.py as
``python -m torch.distributed.run --standalone --nproc_per_node 2 tests/fsdp_train.py STUDY OUT``;
the test runs ``train`` in one process without sharding and compares.
"""

import sys
from pathlib import Path

import numpy as np
import torch
from tiny_model import tiny_model

from aam.models import SequenceEncoder, SequencePredictor
from aam.training.config import TrainConfig
from aam.training.evaluation import evaluate
from aam.training.inference import encode_table_asvs
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import Labels, UniFracSource, load_study
from aam.training.inputs.study_options import StudyOptions
from aam.training.inputs.target_scale import fit_target_scale
from aam.training.objective import Objective
from aam.training.parallel.distributed import DistContext, init_distributed
from aam.training.parallel.fsdp import model_state, optimizer_state, shard_model
from aam.training.step import TrainStep, build_optimizer

METADATA = Path(__file__).resolve().parents[1] / "data" / "demo" / "metadata.tsv"
GLOBAL_BATCHES = [np.arange(0, 8), np.arange(8, 16), np.arange(16, 24)]
VALIDATION = np.arange(24, 36)
MODEL = tiny_model(count_layers=1, target_layers=1, dropout=0.0)
# Clipping at 0.5 is active (the gradient norm is larger), so the sharded norm is tested too.
TRAIN = TrainConfig(batch_size=8, mask_rate=0.0, count_weight=0.0, lr=1e-3, max_grad_norm=0.5)
STAGES = ("pretrain", "finetune", "frozen")  # frozen: fine-tuning with --freeze-base


def train(study_dir: Path, ctx: DistContext, stage: str) -> dict:
    """Validation metrics of the initial ``stage`` model, and its weights and optimizer state
    (as checkpoints hold them) after three steps."""
    predictor = stage != "pretrain"
    cfg = TrainConfig(**{**TRAIN.to_dict(), "freeze_base": stage == "frozen"})
    study = load_study(
        study_dir / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(matrix=study_dir / "unifrac.h5"),
        labels=Labels(METADATA, target="age") if predictor else None,
        reading=StudyOptions(val_fraction=0.0, allow_missing_samples=True),
    )
    cpu = torch.device("cpu")
    torch.manual_seed(0)
    model = SequencePredictor(MODEL) if predictor else SequenceEncoder(MODEL)
    objective = Objective.of(cfg, predictor=predictor, study=study, ctx=ctx)
    batches = TrainBatches(study, 64, ctx=ctx, distances=objective.use_unifrac)
    if predictor:
        objective.scale = fit_target_scale(study.targets, study.subset("train"), "demo", "age")
    if cfg.freeze_base:
        model.freeze_base()
        batches.asv_embeddings = encode_table_asvs(model, study.samples, cpu)
    if ctx.enabled:
        model = shard_model(model, cpu, ctx.world_size)
    optimizer = build_optimizer(model, cfg)  # before any forward, as the Trainer builds it
    metrics = evaluate(
        objective, model, batches, VALIDATION, cpu, batch_size=cfg.batch_size, seed=cfg.seed
    )
    step = TrainStep(
        model, objective, optimizer, cfg, cpu, ctx, asv_embeddings=batches.asv_embeddings
    )
    for k, positions in enumerate(GLOBAL_BATCHES):
        batch = batches.batch(positions)  # this rank's share, the global batch's distances
        step(batch, torch.Generator().manual_seed(k), where=f"step {k + 1}")
    return {
        "metrics": metrics,
        "model": model_state(model),
        "optimizer": optimizer_state(model, optimizer),
    }


if __name__ == "__main__":
    context = init_distributed("cpu")
    states = {stage: train(Path(sys.argv[1]), context, stage) for stage in STAGES}
    if context.is_main:
        torch.save(states, sys.argv[2])
