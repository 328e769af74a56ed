"""aam.training.inference and evaluation: the one forward, explicit ASV embeddings, and no
state kept between calls."""

import numpy as np
import pytest
import torch

from aam.models import ModelConfig, SequenceEncoder
from aam.training.config import TrainConfig
from aam.training.evaluation import evaluate
from aam.training.inference import batch_outputs, encode_table_asvs, model_outputs
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import UniFracSource, load_study
from aam.training.objective import Objective

CPU = torch.device("cpu")
MODEL = ModelConfig(embedding_dim=16, attention_heads=2, asv_layers=1, sample_layers=1, max_bp=100)


@pytest.fixture(scope="module")
def setup(small_study):
    study = load_study(
        small_study / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(matrix=small_study / "unifrac.h5"),
    )
    torch.manual_seed(0)
    return study, SequenceEncoder(MODEL)


def test_asv_embeddings_give_the_outputs_of_the_tokens(setup):
    study, model = setup
    model.eval()
    batch = study.batch(np.arange(6), MODEL.token_limit)
    embeddings = encode_table_asvs(model, study.samples, CPU)
    with torch.no_grad():
        from_tokens = model_outputs(model, batch)
        from_cache = model_outputs(model, batch, asv_embeddings=embeddings)
    torch.testing.assert_close(from_cache["sample_embedding"], from_tokens["sample_embedding"])


def test_batch_outputs_cover_every_position_once_in_order(setup):
    study, model = setup
    positions = np.array([5, 0, 9, 3, 7])
    model.eval()
    outputs = list(
        batch_outputs(model, study, positions, CPU, batch_size=2, token_limit=MODEL.token_limit)
    )
    seen = torch.cat([batch.sample_index for batch, _ in outputs])
    assert seen.tolist() == positions.tolist()
    assert sum(len(out["sample_embedding"]) for _, out in outputs) == len(positions)


def test_evaluate_keeps_no_state_and_returns_to_train_mode(setup):
    study, model = setup
    cfg = TrainConfig(batch_size=4)
    objective = Objective.of(cfg, predictor=False, study=study)
    batches = TrainBatches(study, MODEL.token_limit, distances=objective.use_unifrac)
    model.train()
    positions = np.arange(10)
    first = evaluate(objective, model, batches, positions, CPU, batch_size=4, seed=cfg.seed)
    assert model.training and batches.asv_embeddings is None
    assert evaluate(objective, model, batches, positions, CPU, batch_size=4, seed=cfg.seed) == first
    assert {"loss", "nuc_loss", "nuc_accuracy", "unifrac_loss", "unifrac_r"} <= first.keys()
