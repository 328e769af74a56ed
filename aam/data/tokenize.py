"""Nucleotide tokenization of ASV sequences."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PAD = 0
A = 1
C = 2
G = 3
T = 4
OTHER = 5  # any non-ACGT character (N, IUPAC codes, gaps): a real token, not padding
START = 6
MASK = 7
VOCAB_SIZE = 8

# Token for each code point below 128 (the last entry also serves every code point above).
_LOOKUP = np.full(128, OTHER, dtype=np.uint8)
_LOOKUP[0] = PAD  # numpy pads fixed-width strings with NUL
for _base, _token in zip("ACGT", (A, C, G, T), strict=True):
    _LOOKUP[ord(_base)] = _LOOKUP[ord(_base.lower())] = _token


def tokenize(sequences: Sequence[str], max_bp: int) -> np.ndarray:
    """Tokens of shape (n, max_bp + 1), uint8: START, then the bases truncated to ``max_bp``,
    right-padded with PAD. Case-insensitive; any non-ACGT character becomes OTHER."""
    if max_bp < 1:
        raise ValueError(f"max_bp must be at least 1, got {max_bp}")
    # A fixed-width unicode array truncates to max_bp and NUL-pads; view it as code points.
    codes = np.ascontiguousarray(sequences, dtype=f"U{max_bp}").view(np.uint32).reshape(-1, max_bp)
    tokens = np.empty((codes.shape[0], max_bp + 1), dtype=np.uint8)
    tokens[:, 0] = START
    tokens[:, 1:] = _LOOKUP[np.minimum(codes, len(_LOOKUP) - 1)]
    return tokens


def unique_tokens(sequences: Sequence[str], max_bp: int) -> tuple[np.ndarray, np.ndarray]:
    """Tokenize each distinct sequence once: ``tokens[inverse]`` equals ``tokenize(sequences)``."""
    unique, inverse = np.unique(np.asarray(sequences, dtype=str), return_inverse=True)
    return tokenize(unique, max_bp), inverse.reshape(-1)
