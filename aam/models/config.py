"""One dataclass holds every hyper-parameter of the model.

``ModelConfig.to_dict()`` gives plain Python types only (int, float, bool, str, list), so it can be
stored inside every checkpoint (``torch.load(..., weights_only=True)`` reads it back) and
``ModelConfig.from_dict()`` rebuilds exactly the same architecture from the checkpoint alone.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from aam.data.tokenize import VOCAB_SIZE

ATTN_IMPLEMENTATIONS = ("auto", "math", "mem_efficient", "flash")
COUNT_EMBEDDINGS = ("none", "add", "concat")
CATEGORICAL_FUSIONS = ("concat", "add")

# Fields that fix the architecture (and so the state-dict keys/shapes) of the pretrained base,
# i.e. of ``SequenceEncoder``. Everything else concerns the predictor heads or runtime options.
BASE_FIELDS = (
    "embedding_dim",
    "attention_heads",
    "asv_layers",
    "sample_layers",
    "encoder_layers",
    "max_bp",
    "token_limit",
    "vocab_size",
    "nuc_position_embedding",
    "sample_position_embedding",
    "count_embedding",
)


@dataclass
class ModelConfig:
    """Hyper-parameters of ``SequenceEncoder`` (the pretrained base) and ``SequencePredictor``.

    Runtime-only options (``attn_implementation``, ``gradient_checkpointing``) are stored too, and
    can be changed on a built model with ``set_attn_implementation`` /
    ``set_gradient_checkpointing``; they do not change the parameters.
    """

    # shared
    embedding_dim: int = 128
    attention_heads: int = 4
    dropout: float = 0.1  # residual and feed-forward dropout
    attention_dropout: float = 0.0  # on attention probabilities; > 0 disables fused SDPA kernels
    # base: nucleotide (ASV) stack, sample stack, encoder stack
    asv_layers: int = 2
    sample_layers: int = 2
    encoder_layers: int = 2
    max_bp: int = 150  # nucleotide positions = max_bp + 1 (START token first)
    token_limit: int = 1024  # most ASVs per sample
    vocab_size: int = VOCAB_SIZE
    nuc_position_embedding: bool = True
    sample_position_embedding: bool = False  # OFF: ASV order within a sample carries no meaning
    count_embedding: str = "add"  # none | add | concat, of log1p(count)
    # predictor
    out_dim: int = 1
    classifier: bool = False  # True: prediction = log-probabilities over out_dim classes
    count_prediction: bool = True
    count_layers: int = 2
    target_layers: int = 2
    categorical_cardinalities: tuple[int, ...] = field(default_factory=tuple)  # incl. 0 = unknown
    categorical_embed_dim: int = 16
    categorical_fusion: str = "concat"  # concat | add
    # runtime
    attn_implementation: str = "auto"  # auto | math | mem_efficient | flash
    gradient_checkpointing: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.categorical_cardinalities, list):
            self.categorical_cardinalities = tuple(self.categorical_cardinalities)
        for f in dataclasses.fields(self):
            _check_type(f.name, f.type, getattr(self, f.name))
        self.dropout, self.attention_dropout = float(self.dropout), float(self.attention_dropout)
        positive = ("embedding_dim", "attention_heads", "max_bp", "token_limit", "out_dim")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(
                    f"ModelConfig.{name} must be at least 1, got {getattr(self, name)}"
                )
        layers = ("asv_layers", "sample_layers", "encoder_layers", "count_layers", "target_layers")
        for name in layers:
            if getattr(self, name) < 0:
                raise ValueError(f"ModelConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.embedding_dim % self.attention_heads:
            raise ValueError(
                f"ModelConfig.embedding_dim ({self.embedding_dim}) must be divisible by "
                f"attention_heads ({self.attention_heads})"
            )
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"ModelConfig.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.vocab_size < VOCAB_SIZE:
            raise ValueError(
                f"ModelConfig.vocab_size must be at least {VOCAB_SIZE}, got {self.vocab_size}"
            )
        _check_choice("count_embedding", self.count_embedding, COUNT_EMBEDDINGS)
        _check_choice("categorical_fusion", self.categorical_fusion, CATEGORICAL_FUSIONS)
        _check_choice("attn_implementation", self.attn_implementation, ATTN_IMPLEMENTATIONS)
        if self.classifier and self.out_dim < 2:
            raise ValueError(
                f"ModelConfig.out_dim is the number of classes for a classifier: need >= 2, "
                f"got {self.out_dim}"
            )
        for card in self.categorical_cardinalities:
            if card < 2:
                raise ValueError(
                    "ModelConfig.categorical_cardinalities: each column needs >= 2 entries "
                    "(index 0 = unknown, then its categories), "
                    f"got {list(self.categorical_cardinalities)}"
                )
        if self.categorical_cardinalities and self.categorical_embed_dim < 1:
            raise ValueError(
                f"ModelConfig.categorical_embed_dim must be >= 1, got {self.categorical_embed_dim}"
            )

    @property
    def head_dim(self) -> int:
        return self.embedding_dim // self.attention_heads

    @property
    def max_positions(self) -> int:
        """Nucleotide positions per ASV including the START token."""
        return self.max_bp + 1

    def to_dict(self) -> dict[str, Any]:
        """Plain types only (tuples become lists), safe for ``torch.load(weights_only=True)``."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Inverse of ``to_dict``. Unknown keys raise ValueError; missing keys take defaults."""
        if not isinstance(data, dict):
            raise ValueError(f"model config must be a dict, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown model config key(s) {unknown}; known keys: {sorted(known)} "
                "(was the checkpoint written by a different version of aam?)"
            )
        return cls(**data)

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed (validated like a new config)."""
        return dataclasses.replace(self, **changes)

    def base_mismatches(self, other: ModelConfig) -> list[str]:
        """Human-readable differences in the fields that fix the base (``BASE_FIELDS``), e.g. to
        check that a pretrained encoder fits a fine-tuning config. Empty list: compatible."""
        return [
            f"{name}: {getattr(self, name)!r} != {getattr(other, name)!r}"
            for name in BASE_FIELDS
            if getattr(self, name) != getattr(other, name)
        ]


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"ModelConfig.{name} must be one of {list(choices)}, got {value!r}")


def _check_type(name: str, annotation: Any, value: Any) -> None:
    ann = str(annotation)
    if ann == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif ann == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif ann == "bool":
        ok = isinstance(value, bool)
    elif ann == "str":
        ok = isinstance(value, str)
    elif ann == "tuple[int, ...]":
        ok = isinstance(value, tuple) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        )
    else:  # pragma: no cover - a new field type needs a branch here
        raise TypeError(f"ModelConfig.{name}: unsupported annotation {ann}")
    if not ok:
        raise ValueError(f"ModelConfig.{name} must be {ann}, got {value!r}")
