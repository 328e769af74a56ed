"""The smallest model the training tests and their helper scripts run (16-dim, one layer per
stack), with per-test changes."""

from __future__ import annotations

from aam.models import ModelConfig


def tiny_model(**changes) -> ModelConfig:
    """16-dim, 2 heads, one layer per stack, max_bp 100, token_limit 64, unless changed."""
    base = dict(
        embedding_dim=16,
        attention_heads=2,
        asv_layers=1,
        sample_layers=1,
        encoder_layers=1,
        max_bp=100,
        token_limit=64,
    )
    return ModelConfig(**{**base, **changes})


# The same model as `aam` flags (``--layers 1``: one layer per stack).
TINY_FLAGS = [
    "--embedding-dim",
    "16",
    "--attention-heads",
    "2",
    "--layers",
    "1",
    "--max-bp",
    "100",
    "--token-limit",
    "64",
]
