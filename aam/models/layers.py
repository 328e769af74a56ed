"""Building blocks: pre-norm transformer stack on SDPA with key-padding masks, attention pooling.

Masks follow one convention throughout: a boolean tensor, ``True`` = real position.

Attention backend (``attn_implementation``): ``auto`` lets PyTorch choose (on GPUs among flash,
mem_efficient and math: not cuDNN attention, which made bf16 pretraining 3.8x slower at batch
8 on an H100, likely by planning per padded shape, benchmarks/README.md); ``math``,
``mem_efficient`` and ``flash`` restrict ``scaled_dot_product_attention`` to that one kernel via
``torch.nn.attention.sdpa_kernel``. The fused kernels are GPU kernels: on any device that is not
``cuda`` (ROCm devices are ``cuda`` too), ``mem_efficient`` and ``flash`` fall back to ``math``
with a warning. NB: PyTorch's flash kernel accepts no attention mask, so on a GPU a stack given
padding masks refuses ``flash`` with one line (``FlashRefusesMasks``); use ``auto`` or
``mem_efficient`` there.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import checkpoint

from aam.errors import InputError
from aam.models.config import ATTN_IMPLEMENTATIONS, ModelConfig

_BACKENDS = {
    "math": SDPBackend.MATH,
    "mem_efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
}
_FUSED = ("mem_efficient", "flash")
_AUTO_GPU = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def effective_attn_implementation(name: str, device: torch.device | str) -> str:
    """The implementation actually used on ``device``: fused kernels only on ``cuda`` devices."""
    if name not in ATTN_IMPLEMENTATIONS:
        raise ValueError(
            f"attn_implementation must be one of {list(ATTN_IMPLEMENTATIONS)}, got {name!r}"
        )
    if name in _FUSED and torch.device(device).type != "cuda":
        return "math"
    return name


def sdpa_backends(name: str, device: torch.device | str) -> list[SDPBackend] | None:
    """The SDPA kernels that ``name`` allows on ``device``; None: PyTorch's own choice (auto
    on a CPU)."""
    impl = effective_attn_implementation(name, device)
    if impl != "auto":
        return [_BACKENDS[impl]]
    return _AUTO_GPU if torch.device(device).type == "cuda" else None


def available_backends(device: torch.device) -> tuple[str, ...]:
    """Attention backends worth comparing on ``device`` (fused SDPA kernels only on GPUs)."""
    if device.type == "cuda":
        return ("math", "mem_efficient", "flash", "auto")
    return ("math", "auto")


FLASH_REFUSES_MASKS = (
    "--attn-implementation flash: PyTorch's flash attention takes no padding mask, and aam's "
    "batches are padded; use mem_efficient or auto"
)


class FlashRefusesMasks(InputError, RuntimeError):
    """``flash`` asked for on a GPU where a stack has padding masks: one line before the
    kernel fails (eagerly "No available kernel", compiled a long dynamo trace). A RuntimeError
    too, so the comparisons that try every backend report flash as unsupported."""


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        self.heads = heads
        self.dropout = dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.attn_implementation = "auto"

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x [B, S, D]; attn_mask bool [B, 1, 1, S] (True = key may be attended) or None."""
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        p = self.dropout if self.training else 0.0
        impl = effective_attn_implementation(self.attn_implementation, x.device)
        if impl != self.attn_implementation and not torch.compiler.is_compiling():
            warnings.warn(  # eagerly only: in a compiled forward, a warning breaks the graph
                f"attn_implementation={self.attn_implementation!r} needs a CUDA/ROCm device; "
                f"using 'math' on {x.device.type}",
                stacklevel=2,
            )
        kernels = sdpa_backends(impl, x.device)
        if kernels is None or torch.compiler.is_compiling():  # compiled: ``pin_sdpa_backends``
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p)
        else:
            with sdpa_kernel(kernels):
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


_SWITCHES = {
    SDPBackend.FLASH_ATTENTION: torch.backends.cuda.enable_flash_sdp,
    SDPBackend.EFFICIENT_ATTENTION: torch.backends.cuda.enable_mem_efficient_sdp,
    SDPBackend.MATH: torch.backends.cuda.enable_math_sdp,
    SDPBackend.CUDNN_ATTENTION: torch.backends.cuda.enable_cudnn_sdp,
}


def pin_sdpa_backends(module: nn.Module, device: torch.device) -> None:
    """The SDPA kernels of ``module``'s attention, for this whole process: a compiled forward
    does not enter ``sdpa_kernel`` (its context manager keeps a graph out of the AOT autograd
    cache, so a later job would trace it all again), so the process-wide switches choose."""
    names = {
        m.attn_implementation for m in module.modules() if isinstance(m, MultiHeadSelfAttention)
    }
    if not names:  # no attention (every stack of 0 layers): nothing to choose
        return
    if len(names) > 1:
        raise ValueError(f"one attention implementation per compiled model, got {sorted(names)}")
    kernels = sdpa_backends(names.pop(), device)
    if kernels is not None:
        for backend, switch in _SWITCHES.items():
            switch(backend in kernels)


class Dropout(nn.Dropout):
    """``nn.Dropout`` whose masks on a CPU come from random bits, 16 per element: PyTorch's CPU
    ``bernoulli_`` costs about 20 elementwise multiplies, the bits about 3. The drop rate is
    rounded to a multiple of 2**-16. Other devices (and eval mode) use ``nn.Dropout`` as is."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or x.device.type != "cpu" or not 0 < self.p < 1:
            return super().forward(x)
        drop = min(round(self.p * 2**16), 2**16 - 1)
        words = torch.randint(-(2**63), 2**63 - 1, (-(-x.numel() // 4),), dtype=torch.int64)
        bits = words.view(torch.int16)[: x.numel()].view(x.shape)  # uniform on [-2**15, 2**15)
        return torch.where(bits >= drop - 2**15, x, 0.0).mul_(2**16 / (2**16 - drop))


class TransformerLayer(nn.Module):
    """Pre-norm: x + Drop(MHA(LN(x))), then x + Drop(FFN(LN(x))), FFN = Linear-GELU-Linear.

    Dropout sits on the two residual branches only (as in nanoGPT), not on the 4*D hidden
    activations, where on CPUs the random mask alone costs more than the FFN's matmuls.
    ``attention_dropout`` drops attention probabilities; it is separate from ``dropout`` because
    any value above 0 forces SDPA onto its unfused path with an S x S random mask per head.
    """

    def __init__(
        self, dim: int, heads: int, dropout: float, attention_dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = MultiHeadSelfAttention(dim, heads, attention_dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.drop1 = Dropout(dropout)
        self.drop2 = Dropout(dropout)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.drop1(self.attn(self.norm1(x), attn_mask))
        return x + self.drop2(self.ffn(self.norm2(x)))


class TransformerStack(nn.Module):
    """``num_layers`` pre-norm layers and a final LayerNorm; optional per-layer checkpointing."""

    def __init__(
        self, num_layers: int, dim: int, heads: int, dropout: float, attention_dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            TransformerLayer(dim, heads, dropout, attention_dropout) for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(dim)
        self.gradient_checkpointing = False

    @classmethod
    def from_config(cls, num_layers: int, config: ModelConfig) -> TransformerStack:
        """A stack with the width, heads and dropouts of ``config``."""
        return cls(
            num_layers,
            config.embedding_dim,
            config.attention_heads,
            config.dropout,
            config.attention_dropout,
        )

    def _attns(self) -> list[str]:
        return [layer.attn.attn_implementation for layer in self.layers]

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x [B, S, D]; mask bool [B, S], True = real. Outputs at padded positions are finite but
        meaningless (callers ignore or zero them); they never influence real positions."""
        attn_mask = None
        if mask is not None:
            if any(effective_attn_implementation(a, x.device) == "flash" for a in self._attns()):
                raise FlashRefusesMasks(FLASH_REFUSES_MASKS)
            # A row without any real position would give softmax over nothing (NaN): let it
            # attend to everything instead; its outputs are ignored anyway.
            keys = mask | ~mask.any(dim=-1, keepdim=True)
            attn_mask = keys[:, None, None, :]
        for layer in self.layers:
            if self.gradient_checkpointing and torch.is_grad_enabled():
                x = checkpoint(layer, x, attn_mask, use_reentrant=False)
            else:
                x = layer(x, attn_mask)
        return self.norm(x)


class AttentionPooling(nn.Module):
    """score = Linear(D->1, no bias)(x) / sqrt(D); softmax over real positions; weighted sum;
    LayerNorm. An all-padding row pools to zeros (LayerNorm then gives its bias): no NaN."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.score = nn.Linear(dim, 1, bias=False)
        self.norm = nn.LayerNorm(dim)
        self.scale = 1.0 / math.sqrt(dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x [B, S, D], mask bool [B, S] (True = real) -> [B, D]."""
        scores = (self.score(x).squeeze(-1) * self.scale).float()
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights * mask  # all-padding row: weights 0 instead of uniform
        pooled = torch.einsum("bs,bsd->bd", weights.to(x.dtype), x)
        return self.norm(pooled)


def set_attn_implementation(module: nn.Module, name: str) -> None:
    """Select the SDPA backend of every attention layer inside ``module``."""
    if name not in ATTN_IMPLEMENTATIONS:
        raise ValueError(
            f"attn_implementation must be one of {list(ATTN_IMPLEMENTATIONS)}, got {name!r}"
        )
    for m in module.modules():
        if isinstance(m, MultiHeadSelfAttention):
            m.attn_implementation = name


def set_gradient_checkpointing(module: nn.Module, enabled: bool) -> None:
    """Turn per-layer activation checkpointing on/off for every stack inside ``module``."""
    for m in module.modules():
        if isinstance(m, TransformerStack):
            m.gradient_checkpointing = bool(enabled)


class RuntimeOptions:
    """Runtime switches of a model that holds ``config``: they change no parameter."""

    config: ModelConfig

    def set_attn_implementation(self, name: str) -> None:
        """auto | math | mem_efficient | flash (fused kernels only on CUDA/ROCm devices)."""
        set_attn_implementation(self, name)
        self.config.attn_implementation = name

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        set_gradient_checkpointing(self, enabled)
        self.config.gradient_checkpointing = bool(enabled)

    def apply_runtime_options(self) -> None:
        """Apply the switches stored in ``config`` (after construction or loading)."""
        self.set_attn_implementation(self.config.attn_implementation)
        self.set_gradient_checkpointing(self.config.gradient_checkpointing)
