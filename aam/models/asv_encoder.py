"""Nucleotide-level encoder: one embedding per (unique) ASV sequence, plus the masked-nucleotide
head used in pretraining."""

from __future__ import annotations

import torch
from torch import nn

from aam.data.tokenize import MASK, OTHER, PAD, A
from aam.models.config import ModelConfig
from aam.models.layers import AttentionPooling, TransformerStack


def mask_nucleotides(
    tokens: torch.Tensor, rate: float, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace each real base (A, C, G, T, OTHER) by MASK independently with probability ``rate``.

    PAD and START (and MASK) are never chosen. Deterministic for a seeded ``generator``, which
    must live on ``tokens.device``. Returns (masked copy of tokens, bool mask of the chosen
    positions); the originals at the chosen positions are the targets of ``nuc_logits`` there.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"mask rate must be in [0, 1], got {rate}")
    eligible = (tokens >= A) & (tokens <= OTHER)
    draw = torch.rand(tokens.shape, generator=generator, device=tokens.device)
    mask = eligible & (draw < rate)
    return tokens.masked_fill(mask, MASK), mask


def sequence_keys(tokens: torch.Tensor, weights: torch.Tensor, buckets: int) -> torch.Tensor:
    """Bucket [U] of each token row: sum_i token_i * weights_i mod ``buckets`` (PAD adds 0).

    With a prime ``buckets`` and weights in [1, buckets), two rows that differ at one position
    never share a bucket (the difference, weight * (a - b) with |a - b| < 7, is not a multiple of
    the prime)."""
    return (tokens.long() * weights[: tokens.shape[1]]).sum(dim=1) % buckets


def trim_width(tokens: torch.Tensor) -> torch.Tensor:
    """``tokens`` [U, L] without the columns beyond its longest row (one host read); one
    column of an all-PAD block (its rows embed to zeros)."""
    cols = (tokens != PAD).any(dim=0)
    positions = torch.arange(1, tokens.shape[1] + 1, device=tokens.device)
    width = int((positions * cols).max()) if tokens.shape[1] else 0
    return tokens[:, : max(width, 1)]


class ASVEncoder(nn.Module):
    """Tokens [U, L] (START + bases, right-padded with PAD) -> ASV embeddings [U, D].

    token embedding (+ learned position embedding) -> transformer over positions -> attention
    pooling over non-PAD positions, plus (``asv_identity_buckets`` > 0) a learned embedding of
    the sequence itself (row ``sequence_keys`` of a zero-initialised table): the nucleotide path
    generalises to ASVs never seen, the identity path can tell apart ASVs one base apart. Rows
    that are entirely PAD get zero embeddings. The forward reads nothing back to the host, so a
    compiled model is one graph: PAD columns beyond the longest row change nothing but cost
    work, and callers trim them (``make_batch`` does; ``encode`` trims each chunk).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d = config.embedding_dim
        self.max_positions = config.max_positions
        self.token_embedding = nn.Embedding(config.vocab_size, d)
        self.position_embedding = (
            nn.Embedding(config.max_positions, d) if config.nuc_position_embedding else None
        )
        self.stack = TransformerStack.from_config(config.asv_layers, config)
        self.pooling = AttentionPooling(d)
        self.nucleotide_head = nn.Linear(d, config.vocab_size)
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        if self.position_embedding is not None:
            nn.init.normal_(self.position_embedding.weight, std=0.02)
        self.identity = None
        if config.asv_identity_buckets:
            self.identity = nn.Embedding(config.asv_identity_buckets, d)
            nn.init.zeros_(self.identity.weight)
            generator = torch.Generator().manual_seed(0)
            weights = torch.randint(
                1, max(config.asv_identity_buckets, 2), (config.max_positions,), generator=generator
            )
            self.register_buffer("identity_weights", weights)
            # Adam moves a row by about lr per step whatever its gradient; the gain lets a row
            # seen in a few batches reach the scale of the (layer-normalised) nucleotide path.
            self.identity_gain = float(d) ** 0.5

    def forward(
        self, tokens: torch.Tensor, nuc_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """tokens [U, L] int; nuc_mask bool [U, L] or None.

        The encoder reads MASK at the True positions of nuc_mask (``tokens`` may be the original
        sequences or already masked; the identity embedding needs the originals). Returns
        (embeddings [U, D], nuc_logits). nuc_logits is None without ``nuc_mask``, else [U, L, V]:
        every position's, of which the loss reads the masked ones. Every position, not
        ``h[nuc_mask]``: that boolean index sizes its output from the device (a host read in
        every forward, a shape that changes every batch); the head costs D x V per position.
        nuc_mask must be False at PAD positions, as ``mask_nucleotides`` makes it (not checked:
        the check would read the device in every training step).
        """
        if tokens.dim() != 2:
            raise ValueError(f"ASV tokens must be [U, L], got shape {tuple(tokens.shape)}")
        width = tokens.shape[1]
        if width > self.max_positions:
            raise ValueError(
                f"ASV tokens have {width} positions but the model takes at most "
                f"{self.max_positions} (max_bp + 1)"
            )
        if nuc_mask is not None and nuc_mask.shape != tokens.shape:
            raise ValueError(
                f"nuc_mask shape {tuple(nuc_mask.shape)} != tokens shape {tuple(tokens.shape)}"
            )
        valid = tokens != PAD
        x = tokens if nuc_mask is None else tokens.masked_fill(nuc_mask, MASK)
        h = self.token_embedding(x.long())
        if self.position_embedding is not None:
            h = h + self.position_embedding.weight[:width]
        h = self.stack(h, valid)
        emb = self.pooling(h, valid)
        if self.identity is not None:
            keys = sequence_keys(tokens, self.identity_weights, self.identity.num_embeddings)
            emb = emb + self.identity_gain * self.identity(keys)
        emb = emb * valid.any(dim=1, keepdim=True)  # all-PAD rows: zeros
        logits = None if nuc_mask is None else self.nucleotide_head(h)
        return emb, logits

    @torch.no_grad()
    def encode(self, tokens: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
        """Embeddings [U, D] without autograd, ``chunk_size`` rows at a time (each chunk trimmed to
        its own longest row, so sorting by length first saves work)."""
        if not chunk_size or tokens.shape[0] <= chunk_size:
            return self(trim_width(tokens))[0]
        return torch.cat([self(trim_width(part))[0] for part in tokens.split(chunk_size)])
