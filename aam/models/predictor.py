"""``SequencePredictor``: the fine-tuning model (a ``SequenceEncoder`` base plus heads)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from aam.models.config import ModelConfig
from aam.models.layers import (
    AttentionPooling,
    RuntimeOptions,
    TransformerStack,
)
from aam.models.sample_encoder import SequenceEncoder


class SequencePredictor(RuntimeOptions, nn.Module):
    """Base (``self.base``, a ``SequenceEncoder``) -> per-ASV embeddings [B, A, D] -> heads.

    Target head: [categorical fusion] -> target transformer -> attention pooling ->
    Linear(D -> out_dim); log_softmax for a classifier. Count head (``count_prediction``):
    count transformer -> Linear(D -> 1), an unbounded value per ASV (0 at padding); the trainer
    picks the target scale. Categorical covariates (``categorical_cardinalities``): one
    Embedding(card, categorical_embed_dim, padding_idx=0) per column (0 = unknown),
    concatenated + dropout, fused into the target path only: ``concat`` = Linear(D + C -> D) on
    [asv, c], ``add`` = asv + Linear(C -> D)(c).

    ``forward`` returns a dict: ``prediction [B, out_dim]``, ``count_prediction [B, A]`` (if
    enabled), and from the base ``sample_embedding [B, D]``, ``asv_embeddings [B, A, D]``,
    ``asv_mask [B, A]`` and ``nuc_logits [U, L, V]`` (only when ``nuc_mask`` is given).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d, p = config.embedding_dim, config.dropout
        self.base = SequenceEncoder(config)
        self._base_frozen = False

        self.count_stack = self.count_head = None
        if config.count_prediction:
            self.count_stack = TransformerStack.from_config(config.count_layers, config)
            self.count_head = nn.Linear(d, 1)

        cards = config.categorical_cardinalities
        self.categorical = nn.ModuleList(
            nn.Embedding(card, config.categorical_embed_dim, padding_idx=0) for card in cards
        )
        self.categorical_dropout = nn.Dropout(p)
        c = config.categorical_embed_dim * len(cards)
        self.categorical_fusion = None
        if cards:
            in_dim = d + c if config.categorical_fusion == "concat" else c
            self.categorical_fusion = nn.Linear(in_dim, d)

        self.target_stack = TransformerStack.from_config(config.target_layers, config)
        self.target_pooling = AttentionPooling(d)
        self.target_head = nn.Linear(d, config.out_dim)
        nn.init.xavier_uniform_(self.target_head.weight)
        nn.init.zeros_(self.target_head.bias)
        self.apply_runtime_options()

    # -- frozen base -------------------------------------------------------------------------
    def freeze_base(self) -> None:
        """No gradients for the base, and keep it in eval mode (no dropout) even under
        ``train()``, so cached ``encode_asvs`` embeddings equal what the forward computes."""
        for param in self.base.parameters():
            param.requires_grad_(False)
        self._base_frozen = True
        self.base.eval()

    def train(self, mode: bool = True) -> SequencePredictor:
        super().train(mode)
        if self._base_frozen:
            self.base.eval()
        return self

    def encode_asvs(
        self, unique_tokens: torch.Tensor, chunk_size: int | None = None
    ) -> torch.Tensor:
        """Base nucleotide-encoder embeddings [U, D] without autograd; feed them back through
        ``forward(None, asv_index, counts, unique_embeddings=...)``."""
        return self.base.encode_asvs(unique_tokens, chunk_size)

    # -- forward -----------------------------------------------------------------------------
    def forward(
        self,
        unique_tokens: torch.Tensor | None,
        asv_index: torch.Tensor,
        counts: torch.Tensor,
        categories: torch.Tensor | None = None,
        nuc_mask: torch.Tensor | None = None,
        unique_embeddings: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Inputs as ``SequenceEncoder.forward``; ``categories [B, n_columns]`` int (0 = unknown),
        columns in the order of ``config.categorical_cardinalities``; required iff it is set."""
        out = self.base(unique_tokens, asv_index, counts, nuc_mask, unique_embeddings)
        asv, mask = out["asv_embeddings"], out["asv_mask"]
        keep = mask.unsqueeze(-1)

        if self.count_stack is not None:
            counts_out = self.count_head(self.count_stack(asv, mask)).squeeze(-1)
            out["count_prediction"] = counts_out * mask

        x = asv
        if self.categorical_fusion is not None:
            c = self._embed_categories(categories, asv.shape[0])
            c = c.unsqueeze(1).expand(-1, asv.shape[1], -1)
            if self.config.categorical_fusion == "concat":
                x = self.categorical_fusion(torch.cat([x, c], dim=-1))
            else:
                x = x + self.categorical_fusion(c)
            x = x * keep
        elif categories is not None:
            raise ValueError("categories given but the model has no categorical_cardinalities")

        pooled = self.target_pooling(self.target_stack(x, mask), mask)
        prediction = self.target_head(pooled)
        if self.config.classifier:
            prediction = F.log_softmax(prediction, dim=-1)
        out["prediction"] = prediction
        return out

    def _embed_categories(self, categories: torch.Tensor | None, batch: int) -> torch.Tensor:
        n = len(self.categorical)
        if categories is None:
            raise ValueError(f"the model needs categories [B, {n}] (categorical covariates)")
        if categories.shape != (batch, n):
            raise ValueError(f"categories must be [B={batch}, {n}], got {tuple(categories.shape)}")
        parts = [emb(categories[:, i].long()) for i, emb in enumerate(self.categorical)]
        return self.categorical_dropout(torch.cat(parts, dim=-1))
