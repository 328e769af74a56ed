"""Sample level: per-sample transformer over a sample's ASVs (with abundance information), and
``SequenceEncoder``, the pretrained base (ASV encoder + sample encoder + encoder stack + pooling).

Batch layout (``B`` samples, ``A`` ASV slots = the batch's longest sample, ``U`` unique ASVs):
``unique_tokens [U, L]`` holds each distinct sequence of the batch once; ``asv_index [B, A]``
points into those U rows (-1 = padding slot); ``counts [B, A]`` are the ASVs' raw counts (0 at
padding). The model applies log1p to the counts itself.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from aam.models.asv_encoder import ASVEncoder
from aam.models.config import ModelConfig
from aam.models.layers import (
    AttentionPooling,
    RuntimeOptions,
    TransformerStack,
)


class SampleEncoder(nn.Module):
    """ASV embeddings [B, A, D] + counts [B, A] -> contextual ASV embeddings [B, A, D].

    count embedding of log1p(count) (``add``: + Linear(1->D); ``concat``: Linear(2D->D) of
    [x, Linear(1->D)]; ``none``), optional learned slot-position embedding (off by default: ASV
    order carries no meaning), then the sample transformer. Padding slots come out as zeros.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d = config.embedding_dim
        self.token_limit = config.token_limit
        self.count_method = config.count_embedding
        self.count_embedding = nn.Linear(1, d) if self.count_method != "none" else None
        self.count_fusion = nn.Linear(2 * d, d) if self.count_method == "concat" else None
        self.position_embedding = (
            nn.Embedding(config.token_limit, d) if config.sample_position_embedding else None
        )
        if self.position_embedding is not None:
            nn.init.normal_(self.position_embedding.weight, std=0.02)
        self.stack = TransformerStack.from_config(config.sample_layers, config)

    def forward(self, x: torch.Tensor, counts: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        keep = mask.unsqueeze(-1)
        x = x * keep
        if self.count_embedding is not None:
            c = torch.log1p(counts.to(self.count_embedding.weight.dtype).clamp_min(0)).unsqueeze(-1)
            c = self.count_embedding(c)
            x = x + c if self.count_fusion is None else self.count_fusion(torch.cat([x, c], -1))
        if self.position_embedding is not None:
            x = x + self.position_embedding.weight[: x.shape[1]]
        x = self.stack(x * keep, mask)
        return x * keep


def gather_asvs(unique_embeddings: torch.Tensor, asv_index: torch.Tensor) -> torch.Tensor:
    """unique_embeddings [U, D], asv_index [B, A] (-1 = padding) -> [B, A, D], zeros at padding.

    An embedding lookup in the rows plus a zero row for the padding (which gets no gradient):
    its backward sums each ASV's gradients in a fixed order, where indexing's adds them with
    atomics across CPU threads (a run's weights then changed from one run to the next), and
    faster."""
    padding, dim = unique_embeddings.shape
    rows = torch.cat([unique_embeddings, unique_embeddings.new_zeros(1, dim)])
    return F.embedding(torch.where(asv_index >= 0, asv_index, padding), rows, padding_idx=padding)


def check_batch(asv_index: torch.Tensor, counts: torch.Tensor, token_limit: int) -> None:
    if asv_index.dim() != 2:
        raise ValueError(f"asv_index must be [B, A], got shape {tuple(asv_index.shape)}")
    if asv_index.dtype.is_floating_point or asv_index.dtype == torch.bool:
        raise ValueError(f"asv_index must be an integer tensor, got {asv_index.dtype}")
    if counts.shape != asv_index.shape:
        raise ValueError(
            f"counts shape {tuple(counts.shape)} != asv_index shape {tuple(asv_index.shape)}"
        )
    if asv_index.shape[1] > token_limit:
        raise ValueError(
            f"batch has {asv_index.shape[1]} ASV slots per sample but token_limit is {token_limit}"
        )


class SequenceEncoder(RuntimeOptions, nn.Module):
    """The pretrained base: ASV encoder -> sample encoder -> encoder stack -> attention pooling.

    ``forward`` returns a dict:
      ``sample_embedding [B, D]`` (the UniFrac embedding), ``asv_embeddings [B, A, D]``
      (contextual per-ASV embeddings from the sample transformer; zeros at padding),
      ``asv_mask [B, A]`` (bool, True = real ASV), and ``nuc_logits [U, L, V]`` only when
      ``nuc_mask`` is given (every position's; the masked ones are scored).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d = config.embedding_dim
        self.asv_encoder = ASVEncoder(config)
        self.sample_encoder = SampleEncoder(config)
        self.encoder_stack = TransformerStack.from_config(config.encoder_layers, config)
        self.pooling = AttentionPooling(d)
        self.apply_runtime_options()

    def encode_asvs(
        self, unique_tokens: torch.Tensor, chunk_size: int | None = None
    ) -> torch.Tensor:
        """Embeddings [U, D] of the nucleotide encoder, without autograd (for caching, e.g. a
        frozen base or inference over a whole table). Call in eval mode for dropout-free values."""
        return self.asv_encoder.encode(unique_tokens, chunk_size)

    def forward(
        self,
        unique_tokens: torch.Tensor | None,
        asv_index: torch.Tensor,
        counts: torch.Tensor,
        nuc_mask: torch.Tensor | None = None,
        unique_embeddings: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Give exactly one of ``unique_tokens [U, L]`` and ``unique_embeddings [U, D]`` (e.g.
        from ``encode_asvs``); ``asv_index [B, A]`` indexes their rows (-1 = padding)."""
        check_batch(asv_index, counts, self.config.token_limit)
        if (unique_tokens is None) == (unique_embeddings is None):
            raise ValueError("pass exactly one of unique_tokens and unique_embeddings")
        out: dict[str, torch.Tensor] = {}
        if unique_tokens is not None:
            unique_embeddings, logits = self.asv_encoder(unique_tokens, nuc_mask)
            if logits is not None:
                out["nuc_logits"] = logits
        elif nuc_mask is not None:
            raise ValueError("nuc_mask needs unique_tokens (the nucleotide encoder must run)")
        mask = asv_index >= 0
        asv = self.sample_encoder(gather_asvs(unique_embeddings, asv_index), counts, mask)
        pooled = self.pooling(self.encoder_stack(asv, mask), mask)
        out.update(sample_embedding=pooled, asv_embeddings=asv, asv_mask=mask)
        return out
