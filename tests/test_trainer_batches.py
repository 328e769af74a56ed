"""The Trainer's epoch batches under a token budget: UniFrac pairs, ranks, the schedule."""

import numpy as np
import pytest
import torch
from test_token_batches import padded_tokens
from tiny_model import tiny_model

from aam.models import SequenceEncoder
from aam.training.config import TrainConfig
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import UniFracSource, load_study
from aam.training.objective import Objective
from aam.training.parallel.distributed import DistContext, rank_slice
from aam.training.trainer import Trainer
from aam.unifrac.io import read_distance_matrix

MODEL = tiny_model()


def _trainer(study, tmp_path, ctx: DistContext | None = None, **train) -> Trainer:
    cfg = TrainConfig(**{"epochs": 3, "batch_tokens": 200, **train})
    ctx = ctx or DistContext()
    objective = Objective.of(cfg, predictor=False, study=study, ctx=ctx)
    batches = TrainBatches(study, 64, ctx=ctx, distances=objective.use_unifrac)
    model = SequenceEncoder(MODEL)
    cpu = torch.device("cpu")
    return Trainer(model, objective, batches, cfg, ctx, tmp_path, cpu, resume_config={})


@pytest.fixture(scope="module")
def study(small_study):
    return load_study(
        small_study / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(matrix=small_study / "unifrac.h5"),
    )


def test_token_batches_cover_the_train_split_with_pairs_and_their_unifrac_block(study, tmp_path):
    trainer = _trainer(study, tmp_path)
    lengths = study.samples.lengths(64)
    matrix = read_distance_matrix(study.distances.rows.path)[1]
    for epoch in range(3):
        batches = trainer._epoch_batches(epoch)
        assert sorted(np.concatenate(batches).tolist()) == sorted(trainer.train_positions.tolist())
        for positions in batches:
            assert len(positions) >= 2
            assert padded_tokens(lengths[positions]) <= 200 or len(positions) < 4
            batch = trainer.batches.batch(positions)
            rows = study.distances.row_of[positions]  # the matrix file's rows of the batch
            block = matrix[np.ix_(rows, rows)].astype(np.float32)
            np.testing.assert_array_equal(batch.distances.numpy(), block)
    assert (
        trainer._epoch_batches(1)[0].tolist()
        == _trainer(study, tmp_path)._epoch_batches(1)[0].tolist()
    )


def test_every_rank_gets_the_same_batches_split_evenly(study, tmp_path):
    ranks = [_trainer(study, tmp_path, DistContext(rank=r, world_size=2)) for r in range(2)]
    for epoch in range(3):
        first, second = (t._epoch_batches(epoch) for t in ranks)
        assert [b.tolist() for b in first] == [b.tolist() for b in second]  # same step count
        for positions in first:
            shares = [rank_slice(positions, t.ctx) for t in ranks]
            assert len(shares[0]) == len(shares[1]) >= 1
            assert sorted(np.concatenate(shares).tolist()) == sorted(positions.tolist())


def test_the_schedule_counts_every_epoch_s_own_batches(study, tmp_path):
    trainer = _trainer(study, tmp_path, grad_accum=2)
    steps = sum(-(-len(trainer._epoch_batches(e)) // 2) for e in range(3))
    trainer.optimizer.step()
    for _ in range(steps - 1):
        trainer.scheduler.step()
    assert trainer.scheduler.get_last_lr()[0] > 0
    trainer.scheduler.step()
    assert trainer.scheduler.get_last_lr()[0] == pytest.approx(0.0, abs=1e-12)
