"""The matmul FLOPs of a training batch and the device's dense peak: each epoch's achieved
TFLOP/s and its share of the peak (MFU), as torchtitan reports them.

FLOPs are counted from the shapes the device computes (padding included): each transformer
layer's projections (qkv, output, the two FFN matrices: 12 D^2 multiply-adds per position) and
attention (QK^T and AV: 2 S D per position), forward x 3 for a stack that trains (the backward
costs twice the forward) and x 1 for a frozen one. Embeddings, pooling, heads and losses are
left out (a few percent at the reference model).
"""

from __future__ import annotations

import torch
from torch import nn

from aam.data.batching import Batch
from aam.models.layers import TransformerStack

# Dense (no sparsity) peak TFLOP/s of a torch device, (bf16, fp32), from the vendors' data
# sheets: NVIDIA H100 SXM and H200 (GH200 alike), H100 PCIe; AMD MI250X per GCD (one torch
# device; fp32 on the matrix cores), MI300A. Matched in this order against the device's name.
PEAK_TFLOPS = {
    "H100 PCIe": (756.5, 51.2),
    "H100": (989.4, 66.9),
    "H200": (989.4, 66.9),
    "MI250X": (191.5, 47.9),
    "MI300A": (980.6, 122.6),
}


def peak_tflops(device: torch.device, bf16: bool) -> float | None:
    """The dense bf16 (or fp32) peak of ``device``; None for a CPU or a GPU not in the table."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, (bf16_peak, fp32_peak) in PEAK_TFLOPS.items():
        if key in name:
            return bf16_peak if bf16 else fp32_peak
    return None


def stack_flops(rows: int, length: int, layers: int, dim: int) -> float:
    """Forward matmul FLOPs of ``layers`` transformer layers of width ``dim`` over ``rows``
    sequences of ``length`` positions."""
    positions = rows * length
    return layers * (2 * positions * 12 * dim**2 + 4 * positions * length * dim)


def batch_flops(model: nn.Module, batch: Batch, asv_encoded: bool = True) -> float:
    """Training FLOPs of ``batch`` through the stacks of ``model`` (the bare model): the ASV
    encoder's over the batch's distinct sequences [U, L] (unless ``asv_encoded`` is False: the
    embeddings were read, not encoded), every other stack over its samples [B, A]."""
    samples, width = batch.asv_index.shape
    total = 0.0
    for name, stack in model.named_modules():
        if not isinstance(stack, TransformerStack) or not len(stack.layers):
            continue
        if "asv_encoder" in name:
            if not asv_encoded:
                continue
            rows, length = batch.unique_tokens.shape
        else:
            rows, length = samples, width
        trains = any(p.requires_grad for p in stack.parameters())
        dim = stack.norm.normalized_shape[0]
        total += (3 if trains else 1) * stack_flops(rows, length, len(stack.layers), dim)
    return total


class MatmulRate:
    """An epoch's training FLOPs (``batch_flops``, this process's batches) as achieved TFLOP/s
    and, on a device of ``PEAK_TFLOPS``, the share of its peak at the run's precision (MFU)."""

    def __init__(
        self, model: nn.Module, device: torch.device, bf16: bool, asv_encoded: bool
    ) -> None:
        self.model, self.asv_encoded = model, asv_encoded
        self.peak = peak_tflops(device, bf16)
        self.flops = 0.0

    def add(self, batch: Batch) -> None:
        self.flops += batch_flops(self.model, batch, self.asv_encoded)

    def columns(self, seconds: float) -> dict[str, float]:
        """``tflops`` (and ``mfu``) of the FLOPs added since the last call, over ``seconds``."""
        tflops = self.flops / seconds / 1e12 if seconds > 0 else 0.0
        self.flops = 0.0
        return {"tflops": tflops} | ({"mfu": tflops / self.peak} if self.peak else {})
