"""A training step waits for the device once: its loss terms and gradient norm come back in one
host read at the optimizer step, none while micro-batches accumulate (on a GPU every read is a
synchronisation that leaves the device idle while the host queues the next work)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tiny_model import tiny_model

from aam.errors import NonFiniteError
from aam.models import SequenceEncoder
from aam.training import losses
from aam.training.config import TrainConfig
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import UniFracSource, load_study
from aam.training.objective import Objective
from aam.training.step import TrainStep, build_optimizer, step_loss

# A tensor's value read on the host (on a GPU: the host waits for the device).
HOST_READS = ("item", "tolist", "__float__", "__int__", "__bool__")


@pytest.fixture
def step_parts(small_study):
    """A tiny encoder's TrainStep accumulating 3 micro-batches, and the study's batches."""
    study = load_study(
        small_study / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(matrix=small_study / "unifrac.h5"),
    )
    cfg = TrainConfig(batch_size=4, grad_accum=3, max_grad_norm=1.0)
    objective = Objective.of(cfg, predictor=False, study=study)
    torch.manual_seed(0)
    model = SequenceEncoder(tiny_model(token_limit=32, dropout=0.0))
    step = TrainStep(model, objective, build_optimizer(model, cfg), cfg, torch.device("cpu"))
    batches = [
        TrainBatches(study, 32, distances=True).batch(np.arange(k, k + 4)) for k in (0, 4, 8)
    ]
    return step, batches


def count_host_reads(monkeypatch) -> list[str]:
    """The names of the host reads of tensors made from now on (every call, counted)."""
    calls: list[str] = []
    for name in HOST_READS:
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return calls


def test_a_step_of_three_micro_batches_reads_the_device_once(step_parts, monkeypatch):
    step, batches = step_parts
    calls = count_host_reads(monkeypatch)
    generator = torch.Generator().manual_seed(0)
    assert step(batches[0], generator, at_step=False) == []
    assert step(batches[1], generator, at_step=False) == []
    assert calls == []  # micro-batches only queue work
    real_step, seen = step.optimizer.step, []

    def optimizer_step():  # AdamW's own reads are of step counters it keeps on the host
        seen.extend(calls)
        real_step()

    step.optimizer.step = optimizer_step
    terms = step(batches[2], generator, at_step=True, where="step 1")
    assert seen == ["tolist"]  # the terms of all three and the gradient norm, together
    assert len(terms) == 3 and step.pending == []
    assert {"loss", "unifrac_loss", "nuc_loss"} == set(terms[0])
    for batch_terms in terms:
        assert all(isinstance(v, float) and math.isfinite(v) for v in batch_terms.values())
        expected = batch_terms["unifrac_loss"] + batch_terms["nuc_loss"]  # both weights 1
        assert batch_terms["loss"] == pytest.approx(expected, rel=1e-12)


def test_a_non_finite_term_stops_the_step_before_the_optimizer(step_parts, monkeypatch):
    step, batches = step_parts
    real = losses.unifrac_loss
    calls = []

    def nan_on_second(*args):  # the second micro-batch's UniFrac term is NaN
        calls.append(1)
        value = real(*args)
        return value * math.nan if len(calls) == 2 else value

    monkeypatch.setattr(losses, "unifrac_loss", nan_on_second)
    before = [p.detach().clone() for p in step.model.parameters()]
    generator = torch.Generator().manual_seed(0)
    step(batches[0], generator, at_step=False)
    step(batches[1], generator, at_step=False)  # no read yet: the NaN waits for the step
    with pytest.raises(NonFiniteError, match=r"^unifrac_loss is nan at epoch 1, step 1; lower"):
        step(batches[2], generator, at_step=True, where="epoch 1, step 1")
    after = list(step.model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))  # no AdamW step


def test_a_micro_batch_sizes_nothing_from_its_values(step_parts):
    """Forward, loss (masked nucleotides and UniFrac) and backward run on the meta device, which
    holds shapes and no values: no op sizes its output from tensor values (on a GPU such an op,
    e.g. a boolean index of the masked nucleotides, waits for the device in every forward)."""
    step, batches = step_parts
    assert step.objective.use_nucleotides and step.objective.use_unifrac
    with torch.device("meta"):
        model = SequenceEncoder(tiny_model(token_limit=32, dropout=0.0))
    loss, terms = step_loss(model, step.objective, batches[0].to(torch.device("meta")), None)
    loss.backward()
    assert loss.device.type == "meta" and set(terms) == {"unifrac_loss", "nuc_loss", "loss"}
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
