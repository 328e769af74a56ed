"""AAM model: nucleotide (ASV) encoder, sample encoder, the pretrained ``SequenceEncoder`` base
and the fine-tuning ``SequencePredictor``, all built from one ``ModelConfig``."""

from aam.models.asv_encoder import ASVEncoder, mask_nucleotides
from aam.models.config import (
    ATTN_IMPLEMENTATIONS,
    BASE_FIELDS,
    CATEGORICAL_FUSIONS,
    COUNT_EMBEDDINGS,
    ModelConfig,
)
from aam.models.layers import (
    AttentionPooling,
    TransformerStack,
    effective_attn_implementation,
)
from aam.models.predictor import SequencePredictor
from aam.models.sample_encoder import SampleEncoder, SequenceEncoder, gather_asvs

__all__ = [
    "ATTN_IMPLEMENTATIONS",
    "BASE_FIELDS",
    "CATEGORICAL_FUSIONS",
    "COUNT_EMBEDDINGS",
    "ASVEncoder",
    "AttentionPooling",
    "ModelConfig",
    "SampleEncoder",
    "SequenceEncoder",
    "SequencePredictor",
    "TransformerStack",
    "effective_attn_implementation",
    "gather_asvs",
    "mask_nucleotides",
]
