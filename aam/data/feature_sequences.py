"""The sequence of each feature ID, from a FASTA file or QIIME 2's rep-seqs
(FeatureData[Sequence]), and a table whose feature IDs (e.g. QIIME 2's md5 hashes) are
replaced by their sequences: AAM reads each ASV's sequence from its ID."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from aam.data.qiime2 import read_text
from aam.data.reconcile import preview
from aam.data.samples import NUCLEOTIDES
from aam.errors import InputError

if TYPE_CHECKING:
    import biom


def read_sequences(path: str | os.PathLike[str]) -> dict[str, str]:
    """Feature ID -> DNA sequence of a FASTA file or a rep-seqs.qza; InputError, one line, for
    anything else."""
    try:
        text = read_text(path, "sequences")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: unreadable sequences file ({err}); give a FASTA file") from err
    sequences = parse_fasta(text, path)
    for name, sequence in sequences.items():
        if not sequence or not set(sequence) <= NUCLEOTIDES:
            what = "empty" if not sequence else "not a nucleotide sequence"
            raise InputError(
                f"{path}: record {name!r} is {what}; give the features' DNA sequences "
                "(QIIME 2: rep-seqs.qza)"
            )
    return sequences


def parse_fasta(text: str, source: object) -> dict[str, str]:
    """FASTA records as {ID: sequence} (an ID is the header's first word; a sequence may span
    lines); InputError naming ``source`` for text before a header, a header without an ID, an
    ID given twice or no record at all."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line.startswith(">"):
            header = line[1:].split(maxsplit=1)
            if not header or header[0] in parts:
                what = f"ID {header[0]!r} a second time" if header else "a header without an ID"
                raise InputError(f"{source}: line {number} has {what}; one record per ID")
            current = parts[header[0]] = []
        elif line:
            if current is None:
                raise InputError(f"{source}: line {number} comes before any '>' header; not FASTA")
            current.append(line)
    if not parts:
        raise InputError(f"{source}: no FASTA records")
    return {name: "".join(lines) for name, lines in parts.items()}


def with_sequences(
    table: biom.Table, sequences: dict[str, str], table_name: object, sequences_name: object
) -> biom.Table:
    """``table`` with each observation ID replaced by its sequence; InputError, one line, where
    an ID has no sequence or two IDs share one."""
    ids = [str(x) for x in table.ids("observation")]
    missing = [x for x in ids if x not in sequences]
    if missing:
        raise InputError(
            f"{sequences_name}: no sequence for {len(missing)} of the {len(ids)} feature IDs "
            f"of {table_name} (e.g. {preview(missing, 3)}); give the rep-seqs of this table"
        )
    seen: dict[str, str] = {}
    for x in ids:
        other = seen.setdefault(sequences[x], x)
        if other != x:
            raise InputError(
                f"{sequences_name}: features {other!r} and {x!r} of {table_name} have the same "
                "sequence; merge them first (qiime feature-table group, or biom collapse)"
            )
    return table.update_ids({x: sequences[x] for x in ids}, axis="observation", inplace=False)
