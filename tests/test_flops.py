"""The FLOPs behind each epoch's TFLOP/s and MFU (``aam.training.meters.flops``): the shape formula
against torch's own FLOP counter on a real batch, and the device peaks it divides by."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_model import tiny_model
from torch.utils.flop_counter import FlopCounterMode

from aam.data.batching import make_batch
from aam.models import SequenceEncoder, SequencePredictor
from aam.training.inputs.study import load_study
from aam.training.meters.flops import PEAK_TFLOPS, MatmulRate, batch_flops, peak_tflops


@pytest.fixture(scope="module")
def batch(small_study):
    study = load_study(small_study / "table.biom", max_bp=100)
    return make_batch(study.samples, np.arange(16), token_limit=64)


def counted(model, batch, backward: bool) -> int:
    """torch's count of the matmul FLOPs of one forward (and backward) of ``batch``."""
    with FlopCounterMode(display=False) as counter:
        out = model(batch.unique_tokens, batch.asv_index, batch.counts)
        if backward:  # through every head, as the training losses reach them
            sum(v.float().sum() for v in out.values() if v.is_floating_point()).backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("kind", [SequenceEncoder, SequencePredictor])
def test_the_shape_formula_counts_what_torch_counts_in_the_stacks(batch, kind):
    """Forward x 3 of the transformer stacks is within 10% of torch's count of a training step
    at 64 dims (the heads, pooling and embeddings it leaves out are the rest), and a frozen
    model counts its forward only."""
    torch.manual_seed(0)
    model = kind(tiny_model(embedding_dim=64, attention_heads=4, attn_implementation="math"))
    step = counted(model, batch, backward=True)
    assert batch_flops(model, batch) == pytest.approx(step, rel=0.10)
    model.requires_grad_(False)
    assert batch_flops(model, batch) == pytest.approx(counted(model, batch, False), rel=0.10)
    unencoded = batch_flops(model, batch, asv_encoded=False)
    assert 0 < unencoded < batch_flops(model, batch)


def test_mfu_divides_by_the_named_gpus_dense_peak_and_not_on_a_cpu(monkeypatch, batch):
    """The peak is looked up by the device's name (H100 PCIe before H100), at the run's
    precision; a CPU or an unknown GPU gets TFLOP/s without MFU."""
    cpu = torch.device("cpu")
    assert peak_tflops(cpu, bf16=True) is None
    names = {"NVIDIA H100 80GB HBM3": "H100", "NVIDIA H100 PCIe": "H100 PCIe"}
    names |= {"AMD Instinct MI300A": "MI300A", "NVIDIA H200": "H200"}
    for name, key in names.items():
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device, n=name: n)
        assert peak_tflops(torch.device("cuda", 0), bf16=True) == PEAK_TFLOPS[key][0]
        assert peak_tflops(torch.device("cuda", 0), bf16=False) == PEAK_TFLOPS[key][1]
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA A2")
    assert peak_tflops(torch.device("cuda", 0), bf16=True) is None
    model = SequenceEncoder(tiny_model())
    rate = MatmulRate(model, cpu, bf16=False, asv_encoded=True)
    rate.add(batch), rate.add(batch)
    assert rate.columns(2.0) == {"tflops": batch_flops(model, batch) / 1e12}
    assert rate.columns(2.0) == {"tflops": 0.0}  # counted afresh each epoch
