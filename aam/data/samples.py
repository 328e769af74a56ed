"""A table's samples as ASV lists: every distinct ASV sequence tokenized once, each sample an
index list into them with its reads (numpy only: commands that read a study without training,
`aam split` and `aam baselines`, never load torch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import biom
import numpy as np

from aam.data.tokenize import tokenize
from aam.errors import InputError

# IUPAC nucleotide codes, gaps and U: what an ASV's sequence may hold (any case)
NUCLEOTIDES = frozenset("ACGTURYSWKMBDHVN-.acgturyswkmbdhvn")


def check_sequences(asv_ids: list[str], table_name: str) -> None:
    """InputError, one line, unless every observation ID is a nucleotide sequence: AAM reads
    each ASV's sequence, and an ID like QIIME 2's md5 hash would tokenize to noise."""
    bad = [asv for asv in asv_ids if not asv or not set(asv) <= NUCLEOTIDES]
    if bad:
        raise InputError(
            f"{table_name}: {len(bad)} of {len(asv_ids)} observation IDs are not nucleotide "
            f"sequences (e.g. {bad[0][:40]!r}); AAM reads each ASV's sequence: give their "
            "sequences (a FASTA or QIIME 2 rep-seqs.qza) as the dataset's sequences: key, or "
            "stage the table and tree with them (aam stage --table NAME=TABLE --tree NAME=TREE "
            "--sequences FILE)"
        )


def check_samples_have_reads(sample_ids: list[str], asvs: np.ndarray, table_name: str) -> None:
    """InputError, one line, where a sample has no ASV with reads (``asvs``: the number of each
    sample's ASVs with reads): its embedding and its UniFrac distances are undefined."""
    empty = [s for s, n in zip(sample_ids, asvs, strict=True) if n == 0]
    if empty:
        raise InputError(
            f"{table_name}: {len(empty)} samples have no ASVs (e.g. {', '.join(empty[:3])}); "
            "drop them (rarefaction does) before training"
        )


@dataclass(frozen=True)
class SampleSet:
    """A table's samples as ASV index lists (CSR) plus the tokens of every table ASV."""

    sample_ids: list[str]
    asv_ids: list[str]  # table observation IDs (the ASV sequences), row k of ``tokens``
    tokens: np.ndarray  # (n_asvs, max_bp + 1) uint8, row k = table observation k
    asv_ptr: np.ndarray  # sample s owns asv_idx[asv_ptr[s]:asv_ptr[s + 1]]
    asv_idx: np.ndarray  # table observation indices, table order within a sample
    counts: np.ndarray  # reads of each (sample, ASV) entry, float64 (as UniFrac reads them)

    @classmethod
    def from_table(cls, table: biom.Table, max_bp: int, table_name: str = "table") -> SampleSet:
        """Index ``table`` (observation IDs must be the ASV sequences)."""
        matrix = table.matrix_data.tocsc()
        matrix.eliminate_zeros()
        matrix.sort_indices()
        sample_ids = [str(s) for s in table.ids()]
        check_samples_have_reads(sample_ids, np.diff(matrix.indptr), table_name)
        asv_ids = [str(o) for o in table.ids("observation")]
        check_sequences(asv_ids, table_name)
        return cls(
            sample_ids=sample_ids,
            asv_ids=asv_ids,
            tokens=tokenize(asv_ids, max_bp),
            asv_ptr=matrix.indptr.astype(np.int64),
            asv_idx=matrix.indices.astype(np.int64),
            counts=matrix.data.astype(np.float64),
        )

    def __len__(self) -> int:
        return len(self.sample_ids)

    def lengths(self, token_limit: int) -> np.ndarray:
        """ASVs each sample brings to a batch: its ASV count, at most ``token_limit``."""
        return np.minimum(np.diff(self.asv_ptr), token_limit)

    def sample_asvs(self, s: int) -> tuple[np.ndarray, np.ndarray]:
        """(table ASV indices, read counts) of sample ``s``."""
        lo, hi = self.asv_ptr[s], self.asv_ptr[s + 1]
        return self.asv_idx[lo:hi], self.counts[lo:hi]


class ReadDraw(Protocol):
    """Which reads of a sample a batch sees: a fresh rarefaction per epoch, for instance
    (``aam.data.rarefy.EpochDraw``)."""

    def reads(self, samples: SampleSet, s: int) -> tuple[np.ndarray, np.ndarray]:
        """(table ASV indices, read counts) of sample ``s`` as drawn."""
        ...


def sample_reads(
    samples: SampleSet, s: int, draw: ReadDraw | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Sample ``s``'s ASVs and reads: as in the table, or as ``draw`` draws them."""
    return samples.sample_asvs(s) if draw is None else draw.reads(samples, s)
