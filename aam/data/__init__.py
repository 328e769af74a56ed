"""Input data: BIOM tables, sample metadata, rarefaction, sample-ID matching, tokenization."""

from aam.data.metadata import load_metadata, numeric_column
from aam.data.rarefy import rarefy
from aam.data.reconcile import reconcile_sample_ids
from aam.data.table import load_table
from aam.data.tokenize import tokenize, unique_tokens

__all__ = [
    "load_metadata",
    "load_table",
    "numeric_column",
    "rarefy",
    "reconcile_sample_ids",
    "tokenize",
    "unique_tokens",
]
