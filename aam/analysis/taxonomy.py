"""How results name an ASV: a short stable ID (a prefix of the md5 of its sequence, as QIIME 2's
hashed feature IDs are) and, with a QIIME 2 taxonomy TSV (``Feature ID``, ``Taxon``,
``Confidence``), its deepest confident rank (``g__Prevotella e1913f14``).

A taxonomy's Feature IDs may be the sequences themselves (the table's IDs) or their md5 hashes
(DADA2's and QIIME 2's default); both are matched. Its Taxon is read as QIIME 2 writes it:
already cut at the classifier's confidence threshold, so the deepest rank with a name is the
deepest confident one (``g__`` or ``s__`` without a name does not count).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from aam.data.qiime2 import is_artifact, read_artifact
from aam.errors import InputError

SHORT_ID_LENGTH = 8  # hex digits of the md5; longer where two ASVs of a table would share one
UNASSIGNED = "Unassigned"
# What QIIME 2 accepts as the header of the ID column of a metadata-like TSV (lower case).
_ID_HEADERS = {"feature id", "feature-id", "featureid", "id", "#otuid", "#otu id", "otu id"}


def md5_hex(sequence: str) -> str:
    """md5 of ``sequence`` in hex: QIIME 2's hashed feature ID of an ASV."""
    return hashlib.md5(sequence.encode()).hexdigest()


def short_ids(asvs: Sequence[str], length: int = SHORT_ID_LENGTH) -> list[str]:
    """The md5 prefix of each ASV, ``length`` hex digits or, if two ASVs share one, the
    shortest longer prefix that tells every ASV of ``asvs`` apart (the same for all)."""
    hashes = [md5_hex(asv) for asv in asvs]
    if len(set(hashes)) < len(hashes):
        raise ValueError("short_ids: an ASV is given twice")
    while len({h[:length] for h in hashes}) < len(hashes):
        length += 1
    return [h[:length] for h in hashes]


def read_taxonomy(path: Path) -> pd.DataFrame:
    """A QIIME 2 taxonomy TSV (or taxonomy.qza) as a frame indexed by Feature ID with columns
    ``taxon`` and ``confidence`` (NaN where the file has none); InputError naming the file and
    the fix."""
    if not Path(path).is_file():
        raise InputError(f"{path}: no such taxonomy file; fix the dataset's taxonomy path")
    try:
        source = io.BytesIO(read_artifact(path, "taxonomy")) if is_artifact(path) else path
        frame = pd.read_csv(source, sep="\t", dtype=str, keep_default_na=False, comment=None)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"{path}: not a taxonomy TSV ({reason})") from None
    columns = {c.strip().lower(): c for c in frame.columns}
    id_column = frame.columns[0] if len(frame.columns) else ""
    if str(id_column).strip().lower() not in _ID_HEADERS or "taxon" not in columns:
        raise InputError(
            f"{path}: header {'<TAB>'.join(map(str, frame.columns))!r} is not a QIIME 2 "
            "taxonomy's; expected Feature ID<TAB>Taxon[<TAB>Confidence] (qiime tools export)"
        )
    frame = frame[~frame[id_column].str.startswith("#q2:")]  # QIIME 2's type directives
    ids = frame[id_column].str.strip()
    if ids.duplicated().any():
        raise InputError(
            f"{path}: Feature ID {ids[ids.duplicated()].iloc[0]!r} appears twice; "
            "keep one row per feature"
        )
    confidence = frame[columns["confidence"]] if "confidence" in columns else None
    return pd.DataFrame(
        {
            "taxon": frame[columns["taxon"]].str.strip().to_numpy(),
            "confidence": pd.to_numeric(confidence, errors="coerce").to_numpy()
            if confidence is not None
            else float("nan"),
        },
        index=pd.Index(ids.to_numpy(), name="feature_id"),
    )


def deepest_rank(taxon: str) -> str:
    """The deepest rank of a QIIME 2 Taxon string that has a name (``g__Prevotella`` of
    ``d__Bacteria; ...; g__Prevotella; s__``); ``Unassigned`` where none has."""
    ranks = [rank.strip() for rank in str(taxon).split(";")]
    named = [r for r in ranks if r and not r.endswith("__") and r.lower() != "unassigned"]
    return named[-1] if named else UNASSIGNED


def taxa_of(asvs: Sequence[str], taxonomy: pd.DataFrame) -> pd.DataFrame:
    """The ``taxon`` (full Taxon string) and ``confidence`` of each ASV of ``asvs`` (rows in
    that order), matched by sequence or by its md5; NaN where the taxonomy has neither."""
    by_sequence = taxonomy.reindex(list(asvs))
    by_hash = taxonomy.reindex([md5_hex(asv) for asv in asvs])
    return by_sequence.reset_index(drop=True).combine_first(by_hash.reset_index(drop=True))


def asv_labels(ids: Sequence[str], taxa: Sequence[str | float] | None = None) -> list[str]:
    """The name of each ASV in plots: ``<deepest rank> <short ID>``, or the short ID alone
    where there is no taxonomy (``taxa`` None) or the ASV is not in it (NaN)."""
    if taxa is None:
        return list(ids)
    return [
        f"{deepest_rank(taxon)} {short}" if isinstance(taxon, str) else short
        for short, taxon in zip(ids, taxa, strict=True)
    ]
