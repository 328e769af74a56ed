"""The loss has one definition: each term a function of ``aam.training.losses`` weighted by its
TrainConfig field (``losses.WEIGHTS``), summed once (``losses.weighted_total``) by both the
training objective and evaluation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_model import tiny_model

from aam.models import SequencePredictor, mask_nucleotides
from aam.training import losses
from aam.training.config import TrainConfig
from aam.training.evaluation import evaluate
from aam.training.inference import model_outputs
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import Labels, UniFracSource, load_study
from aam.training.inputs.study_options import StudyOptions
from aam.training.objective import Objective

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
CFG = TrainConfig(
    batch_size=8, unifrac_weight=2.0, nuc_weight=0.5, target_weight=3.0, count_weight=0.25
)
CPU = torch.device("cpu")
TERMS = set(losses.WEIGHTS)


def by_hand(terms: dict) -> float:
    """The weighted sum of ``terms``, each weight read from CFG by its field's name."""
    return sum(getattr(CFG, losses.WEIGHTS[name]) * float(terms[name]) for name in TERMS)


@pytest.fixture(scope="module", params=["age", "qiita_study_id"], ids=["regression", "classes"])
def setup(request, small_study):
    """A study with a target (regression or classes), its objective and a tiny predictor."""
    classifier = request.param == "qiita_study_id"
    study = load_study(
        small_study / "table.biom",
        labels=Labels(DEMO / "metadata.tsv", target=request.param, classifier=classifier),
        reading=StudyOptions(val_fraction=0.25, allow_missing_samples=True),
        max_bp=100,
        unifrac=UniFracSource(matrix=small_study / "unifrac.h5"),
    )
    config = tiny_model(dropout=0.0, out_dim=max(len(study.classes), 1), classifier=classifier)
    torch.manual_seed(0)
    model = SequencePredictor(config)
    return study, Objective.of(CFG, predictor=True, study=study), model


def test_every_term_has_a_weight_field_in_the_training_config(setup):
    _, objective, _ = setup
    assert set(losses.WEIGHTS.values()) <= {f.name for f in dataclasses.fields(TrainConfig)}
    assert objective.weights == {t: getattr(CFG, w) for t, w in losses.WEIGHTS.items()}


def test_the_training_loss_is_the_weighted_sum_of_the_terms_of_losses(setup):
    study, objective, model = setup
    batch = TrainBatches(study, 64, distances=True).batch(np.arange(8))
    generator = torch.Generator().manual_seed(0)
    nuc_mask = mask_nucleotides(batch.unique_tokens, objective.mask_rate, generator)[1]
    out = model_outputs(model, batch, tokens=batch.unique_tokens, nuc_mask=nuc_mask)
    total, terms = objective.loss(out, batch, nuc_mask)
    expected = {
        "unifrac_loss": losses.unifrac_loss(out["sample_embedding"].float(), batch.distances),
        "nuc_loss": losses.nucleotide_loss_sum(out["nuc_logits"], batch.unique_tokens, nuc_mask)
        / nuc_mask.sum(),
        "target_loss": losses.target_loss(
            out["prediction"], batch.targets, objective.classifier, CFG.loss, objective.scale
        ),
        "count_loss": losses.count_loss(out["count_prediction"], batch.counts, batch.asv_mask),
    }
    assert set(terms) == TERMS | {"loss"}
    for name, value in expected.items():
        assert terms[name].item() == pytest.approx(value.item(), rel=1e-6), name
    assert terms["loss"].item() == pytest.approx(by_hand(terms), rel=1e-12)
    detached = {name: value.detach() for name, value in expected.items()}
    assert total.item() == pytest.approx(by_hand(detached), rel=1e-6)


def test_the_validation_loss_is_the_same_weighted_sum(setup):
    study, objective, model = setup
    batches = TrainBatches(study, 64, distances=True)
    metrics = evaluate(objective, model, batches, np.arange(8), CPU, batch_size=8, seed=CFG.seed)
    assert TERMS <= set(metrics)
    assert metrics["loss"] == pytest.approx(by_hand(metrics), rel=1e-12)


def test_the_masked_nucleotide_sum_is_the_cross_entropy_of_the_masked_positions():
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 5, 6, generator=generator)
    tokens = torch.randint(0, 6, (3, 5), generator=generator)
    mask = torch.rand(3, 5, generator=generator) < 0.4
    expected = torch.nn.functional.cross_entropy(logits[mask], tokens[mask], reduction="sum")
    torch.testing.assert_close(losses.nucleotide_loss_sum(logits, tokens, mask), expected)
