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
from aam.options import OptionError, check_options, option

ATTN_IMPLEMENTATIONS = ("auto", "math", "mem_efficient", "flash")
COUNT_EMBEDDINGS = ("none", "add", "concat")
CATEGORICAL_FUSIONS = ("concat", "add")
# The transformer stacks; the `layers` option sets all of them (``ModelConfig.from_options``).
LAYER_STACKS = ("asv_layers", "sample_layers", "encoder_layers", "count_layers", "target_layers")
LAYERS_HELP = "transformer layers in every stack (a stack's own option wins)"
# The default model on a CPU (the demo's scale; the field defaults are sized for a GPU): what a
# training run on a CPU given none of these options, nor a stack's layers, trains
# (``aam.training.model_size``).
CPU_MODEL = {
    "embedding_dim": 32,
    "attention_heads": 4,
    "layers": 2,
    "max_bp": 100,
    "token_limit": 256,
}

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
    "asv_identity_buckets",
)


@dataclass
class ModelConfig:
    """Hyper-parameters of ``SequenceEncoder`` (the pretrained base) and ``SequencePredictor``.

    Runtime-only options (``attn_implementation``, ``gradient_checkpointing``) are stored too, and
    can be changed on a built model with ``set_attn_implementation`` /
    ``set_gradient_checkpointing``; they do not change the parameters.
    """

    # shared
    embedding_dim: int = option(128, "width of every embedding", minimum=1)
    attention_heads: int = option(4, "attention heads (must divide --embedding-dim)", minimum=1)
    dropout: float = option(
        0.1, "residual and feed-forward dropout", minimum=0, exclusive_maximum=1
    )
    attention_dropout: float = option(
        0.0,
        "dropout on attention weights (0 keeps the fused SDPA kernels)",
        minimum=0,
        exclusive_maximum=1,
    )
    # base: nucleotide (ASV) stack, sample stack, encoder stack
    asv_layers: int = option(2, "transformer layers over the nucleotides of an ASV", minimum=0)
    sample_layers: int = option(2, "transformer layers over the ASVs of a sample", minimum=0)
    encoder_layers: int = option(2, "transformer layers of the sample encoder", minimum=0)
    max_bp: int = option(
        150, "nucleotides read per ASV (positions: max_bp + 1, START first)", minimum=1
    )
    token_limit: int = option(1024, "most ASVs per sample", minimum=1)
    vocab_size: int = VOCAB_SIZE
    nuc_position_embedding: bool = True
    sample_position_embedding: bool = False  # OFF: ASV order within a sample carries no meaning
    count_embedding: str = option(
        "add", "how log1p(count) enters the ASV embedding", choices=COUNT_EMBEDDINGS
    )
    asv_identity_buckets: int = option(
        0,
        "rows of a learned per-ASV embedding, indexed by a hash of the sequence and added to "
        "the nucleotide encoder's (0: off; a prime keeps sequences one base apart distinct)",
        minimum=0,
    )
    # predictor
    out_dim: int = 1
    classifier: bool = False  # True: prediction = log-probabilities over out_dim classes
    count_prediction: bool = True
    count_layers: int = option(
        2, "transformer layers of the abundance head (fine-tuning)", minimum=0
    )
    target_layers: int = option(2, "transformer layers of the target head (fine-tuning)", minimum=0)
    categorical_cardinalities: tuple[int, ...] = field(default_factory=tuple)  # incl. 0 = unknown
    categorical_embed_dim: int = option(16, "width of each covariate's embedding", minimum=1)
    categorical_fusion: str = option(
        "concat", "how covariate embeddings join the sample's", choices=CATEGORICAL_FUSIONS
    )
    # runtime
    attn_implementation: str = option(
        "auto",
        "attention kernel (SDPA backend; auto: PyTorch's choice, on GPUs not cuDNN attention)",
        choices=ATTN_IMPLEMENTATIONS,
    )
    gradient_checkpointing: bool = option(False, "recompute activations in the backward pass")

    def __post_init__(self) -> None:
        if isinstance(self.categorical_cardinalities, list):
            self.categorical_cardinalities = tuple(self.categorical_cardinalities)
        for f in dataclasses.fields(self):
            _check_type(f.name, f.type, getattr(self, f.name))
        self.dropout, self.attention_dropout = float(self.dropout), float(self.attention_dropout)
        check_options(self)
        if self.out_dim < 1:
            raise OptionError("out_dim", self.out_dim, "must be at least 1")
        if self.embedding_dim % self.attention_heads:
            raise OptionError(
                "embedding_dim",
                self.embedding_dim,
                f"must be divisible by attention_heads ({self.attention_heads})",
            )
        if self.vocab_size < VOCAB_SIZE:
            raise OptionError("vocab_size", self.vocab_size, f"must be at least {VOCAB_SIZE}")
        if self.classifier and self.out_dim < 2:
            raise OptionError(
                "out_dim", self.out_dim, "is the number of classes of a classifier: need 2+"
            )
        for card in self.categorical_cardinalities:
            if card < 2:
                raise OptionError(
                    "categorical_cardinalities",
                    list(self.categorical_cardinalities),
                    "each column needs 2+ entries (index 0 = unknown, then its categories)",
                )

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

    @classmethod
    def from_options(
        cls, options: dict[str, Any], base: dict[str, Any] | None = None, **fixed: Any
    ) -> ModelConfig:
        """From command options, where ``layers`` sets every stack (``LAYER_STACKS``) unless a
        stack is given too. With a pretrained ``base`` config its architecture is kept: an
        option that contradicts it is an OptionError, and ``layers`` sets the head stacks only.
        """
        values: dict[str, Any] = dict(base or {})
        options = dict(options)
        layers = options.pop("layers", None)
        for name in LAYER_STACKS if layers is not None else ():
            if base is None or name not in BASE_FIELDS:
                values[name] = layers
        for name, given in options.items():
            if base is not None and name in BASE_FIELDS and base.get(name) != given:
                raise OptionError(
                    name,
                    given,
                    f"the pretrained encoder has {name}={base.get(name)}; "
                    "drop the option or pretrain again",
                )
            values[name] = given
        return cls.from_dict({**values, **fixed})

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed (validated like a new config)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class ModelOptions:
    """The model options a training command was given, as ``ModelConfig`` values: ``given``
    holds them over the defaults, ``names`` says which were given (a pretrained base fixes the
    others), ``layers`` sets every stack unless a stack is given (``ModelConfig.from_options``)."""

    given: ModelConfig = field(default_factory=ModelConfig)
    names: frozenset[str] = frozenset()
    layers: int | None = None

    def chosen(self) -> dict[str, Any]:
        """The given options by name, ``layers`` included (as ``ModelConfig.from_options``
        and `aam profile`'s probes take them)."""
        chosen: dict[str, Any] = {name: getattr(self.given, name) for name in self.names}
        return chosen if self.layers is None else {**chosen, "layers": self.layers}

    def config(self, base: dict[str, Any] | None = None, **fixed: Any) -> ModelConfig:
        """The run's model: these options over ``base`` (a pretrained encoder's config, whose
        architecture they may not contradict) or the defaults, and ``fixed``."""
        return ModelConfig.from_options(self.chosen(), base, **fixed)


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
        raise OptionError(name, value, f"must be {ann}")
