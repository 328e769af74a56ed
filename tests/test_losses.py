"""Loss terms."""

import math
from types import SimpleNamespace

import pytest
import torch

from aam.training.inputs.target_scale import TargetScale
from aam.training.losses import (
    DISTANCE_SCALE,
    count_loss,
    embedding_distances,
    regression_loss,
    unifrac_loss,
    unifrac_row_loss,
)
from aam.training.objective import Objective


def test_unifrac_loss_uses_every_pair_once():
    emb = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 8.0]])
    target = torch.tensor([[0.0, 0.1, 0.2], [0.1, 0.0, 0.3], [0.2, 0.3, 0.0]])
    squash = [math.tanh(d / DISTANCE_SCALE) for d in (5.0, 8.0, 5.0)]  # pairs 01, 02, 12
    expected = sum((s - t) ** 2 for s, t in zip(squash, (0.1, 0.2, 0.3), strict=True)) / 3
    assert unifrac_loss(emb, target).item() == pytest.approx(expected, rel=1e-6)


def test_unifrac_loss_needs_pairs_and_has_finite_gradients_for_identical_samples():
    with pytest.raises(ValueError, match="at least 2"):
        unifrac_loss(torch.zeros(1, 4), torch.zeros(1, 1))
    emb = torch.zeros(3, 4, requires_grad=True)
    unifrac_loss(emb, torch.ones(3, 3)).backward()
    assert torch.isfinite(emb.grad).all()


@pytest.mark.parametrize("world", [1, 2, 3, 6])
def test_ranks_rows_add_up_to_the_loss_and_twice_their_gradients_to_its_gradient(world):
    """Each rank's rows of the pairs (its samples against the gathered batch, no gradient
    through the gathered copy): the parts sum to ``unifrac_loss``; each rank's samples get
    the loss's gradient from twice its part."""
    generator = torch.Generator().manual_seed(world)
    embeddings = torch.randn(6, 5, generator=generator, dtype=torch.float64) * 4
    upper = torch.rand(6, 6, generator=generator, dtype=torch.float64).triu(1)
    distances = upper + upper.T
    whole = embeddings.clone().requires_grad_()
    expected = unifrac_loss(whole, distances)
    expected.backward()
    b = 6 // world
    parts, grads = [], []
    for rank in range(world):
        rows = slice(rank * b, (rank + 1) * b)
        local = embeddings[rows].clone().requires_grad_()
        part = unifrac_row_loss(local, embeddings, distances[rows], rank * b)
        (2 * part).backward()
        parts.append(part.detach())
        grads.append(local.grad)
    torch.testing.assert_close(sum(parts), expected.detach(), rtol=1e-12, atol=0)
    torch.testing.assert_close(torch.cat(grads), whole.grad, rtol=1e-10, atol=1e-14)


def test_embedding_distances_lie_in_unit_interval():
    d = embedding_distances(torch.randn(5, 8) * 3)
    assert (d >= 0).all() and (d < 1).all() and torch.allclose(d, d.T)


@pytest.mark.parametrize(("kind", "expected"), [("mse", 4.0), ("mae", 2.0), ("huber", 1.5)])
def test_regression_losses(kind, expected):
    assert regression_loss(torch.tensor([2.0]), torch.tensor([0.0]), kind).item() == expected


def test_count_loss_compares_relative_abundance_of_real_asvs_only():
    counts = torch.tensor([[3.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, False]])
    perfect = torch.tensor([[0.75, 0.25, 0.9]])  # padding value ignored
    assert count_loss(perfect, counts, mask).item() == 0.0
    zero = count_loss(torch.zeros(1, 3), counts, mask).item()
    assert zero == pytest.approx((0.5625 + 0.0625) / 2)


def test_the_objective_weighs_its_terms_from_model_outputs_and_batch_targets_alone():
    """``Objective.loss`` needs no study, config or model: outputs and the batch's targets."""
    objective = Objective(
        predictor=True,
        use_unifrac=True,
        use_nucleotides=True,
        weights={"unifrac_loss": 2.0, "nuc_loss": 0.5, "target_loss": 3.0, "count_loss": 0.0},
        mask_rate=0.5,
        regression_loss="mse",
        scale=TargetScale(mean=1.0, std=2.0),
    )
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 8.0]])
    distances = torch.tensor([[0.0, 0.1, 0.2], [0.1, 0.0, 0.3], [0.2, 0.3, 0.0]])
    tokens = torch.tensor([[1, 2, 3], [4, 1, 2]])
    nuc_mask = torch.tensor([[True, False, True], [False, True, False]])
    logits = torch.randn(2, 3, 6, generator=generator)  # every position's; 3 are masked
    out = {
        "sample_embedding": embeddings,
        "nuc_logits": logits,
        "prediction": torch.tensor([[0.5], [1.5], [-1.0]]),
    }
    targets = torch.tensor([2.0, 4.0, 0.0])
    batch = SimpleNamespace(distances=distances, unique_tokens=tokens, targets=targets)
    total, terms = objective.loss(out, batch, nuc_mask)
    unifrac = unifrac_loss(embeddings, distances)
    nucleotides = torch.nn.functional.cross_entropy(logits[nuc_mask], tokens[nuc_mask])
    target = regression_loss(out["prediction"].squeeze(-1), (targets - 1.0) / 2.0, "mse")
    expected = 2.0 * unifrac + 0.5 * nucleotides + 3.0 * target
    assert total.item() == pytest.approx(expected.item(), rel=1e-6)
    assert terms["loss"].item() == pytest.approx(expected.item(), rel=1e-6)
    assert terms["nuc_loss"].item() == pytest.approx(nucleotides.item(), rel=1e-6)
    assert not {"study", "cfg", "token_limit"} & set(vars(objective))


def test_the_unifrac_fit_of_one_pair_has_no_correlation_and_no_warning(recwarn):
    from aam.training.metrics import unifrac_fit

    one = unifrac_fit([torch.tensor([[0.0, 0.0], [3.0, 4.0]])], [torch.tensor([0.5])])
    assert math.isnan(one["unifrac_r"]) and math.isfinite(one["unifrac_loss"])
    three = unifrac_fit(
        [torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])], [torch.tensor([0.9, 0.1, 0.8])]
    )
    assert three["unifrac_r"] > 0.9  # the farther pairs are the more distant ones
    assert not recwarn.list
