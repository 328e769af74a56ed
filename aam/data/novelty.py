"""How much of a table a model never saw: the ASVs of the predicted samples (and their reads)
that were in none of the model's training samples.

A fine-tuned model file records its training samples' ASVs as 64-bit fingerprints of the
sequences (``training_asvs``, sorted): 8 bytes per ASV, 8 MB at a million ASVs, and no
sequence data in the model file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from aam.data.samples import SampleSet

# Above this share of the predicted samples' reads on ASVs that training never saw, `aam
# predict` prints a warning line: the predictions rest mostly on sequences the model was not
# fitted on (it reads sequences, so it can still predict).
NOVELTY_WARNING = 0.25


def _prints(asv_ids: Sequence[str]) -> np.ndarray:
    """The int64 fingerprint (BLAKE2b, 8 bytes) of each ASV sequence of ``asv_ids``."""
    digests = b"".join(hashlib.blake2b(a.encode(), digest_size=8).digest() for a in asv_ids)
    return np.frombuffer(digests, dtype="<i8").astype(np.int64)


def fingerprints(asv_ids: Sequence[str]) -> np.ndarray:
    """Sorted unique fingerprints of the ASV sequences ``asv_ids``."""
    return np.unique(_prints(asv_ids))


def _entries(samples: SampleSet, positions: np.ndarray) -> np.ndarray:
    """Indices into ``samples.asv_idx`` / ``counts`` of the entries of samples ``positions``."""
    starts, ends = samples.asv_ptr[positions], samples.asv_ptr[np.asarray(positions) + 1]
    lengths = ends - starts
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return offsets + np.arange(int(lengths.sum()))


def sample_asvs(samples: SampleSet, positions: np.ndarray) -> np.ndarray:
    """Fingerprints of the ASVs with reads in samples ``positions`` (what a model trained on
    them saw)."""
    present = np.unique(samples.asv_idx[_entries(samples, positions)])
    return fingerprints([samples.asv_ids[k] for k in present])


def novelty(samples: SampleSet, positions: np.ndarray, training_asvs: np.ndarray) -> dict:
    """The ASVs of samples ``positions`` and their reads that ``training_asvs`` lacks: counts,
    fractions, the samples whose reads are mostly unseen, and whether that calls for a warning
    (``warning``: above ``NOVELTY_WARNING`` of the reads, or no ASV shared at all)."""
    entries = _entries(samples, positions)
    present = np.unique(samples.asv_idx[entries])
    unseen_asv = ~np.isin(_prints([samples.asv_ids[k] for k in present]), training_asvs)
    unseen_entry = np.zeros(len(samples.asv_ids), dtype=bool)
    unseen_entry[present[unseen_asv]] = True
    reads = samples.counts[entries]
    unseen_reads = np.where(unseen_entry[samples.asv_idx[entries]], reads, 0.0)
    lengths = samples.asv_ptr[np.asarray(positions) + 1] - samples.asv_ptr[positions]
    owner = np.repeat(np.arange(len(positions)), lengths)
    per_sample = np.bincount(owner, unseen_reads, len(positions)) / np.bincount(
        owner, reads, len(positions)
    )
    read_fraction = float(unseen_reads.sum() / reads.sum())
    none_shared = bool(unseen_asv.all())
    return {
        "asvs": len(present),
        "unseen_asvs": int(unseen_asv.sum()),
        "unseen_asv_fraction": float(unseen_asv.mean()),
        "unseen_read_fraction": read_fraction,
        "samples_mostly_unseen": int((per_sample > 0.5).sum()),
        "none_shared": none_shared,
        "warning_above": NOVELTY_WARNING,
        "warning": none_shared or read_fraction > NOVELTY_WARNING,
    }
