"""QIIME 2 artifacts (``.qza``) read without QIIME 2: a zip of one ``<uuid>/`` directory whose
``metadata.yaml`` names the semantic type and whose ``data/`` holds the plain file (BIOM,
FASTA, newick, TSV). The type is checked before the payload is read; nothing is extracted to
disk, so a member name cannot write outside the archive. Reading is bounded: a member that
inflates far beyond its compressed size (a zip bomb), a link member, a member listed twice, a
uuid directory other than metadata.yaml's, and any archive zipfile cannot read (encrypted, an
unsupported compression, a corrupt stream) stop in one line before their bytes are held."""

from __future__ import annotations

import os
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import yaml

from aam.errors import InputError


@dataclass(frozen=True)
class Artifact:
    """What a kind of input is as a QIIME 2 artifact: its semantic type and payload file."""

    semantic_type: str
    payload: str  # file name under <uuid>/data/
    export: str  # how a QIIME 2 user makes the plain file instead (in error lines)


METADATA_BYTES = 1 << 20  # the most metadata.yaml may inflate to (QIIME 2's are < 1 KB)
# A member that inflates to more than INFLATED_BYTES at more than INFLATION times its compressed
# size is refused as a zip bomb (real payloads: BIOM's HDF5 is compressed already, text 3-10x).
INFLATED_BYTES = 64 << 20
INFLATION = 200
# What zipfile raises on an archive it cannot read: a corrupt stream, an encrypted member, an
# unsupported compression method, a truncated file.
UNREADABLE = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    KeyError,
    EOFError,
    RuntimeError,
    NotImplementedError,
    zlib.error,
)

ARTIFACTS: dict[str, Artifact] = {
    "table": Artifact("FeatureTable[Frequency]", "feature-table.biom", "a BIOM table"),
    "sequences": Artifact("FeatureData[Sequence]", "dna-sequences.fasta", "a FASTA file"),
    "tree": Artifact("Phylogeny[Rooted]", "tree.nwk", "a rooted newick tree"),
    "taxonomy": Artifact("FeatureData[Taxonomy]", "taxonomy.tsv", "a taxonomy TSV"),
}


def is_artifact(path: str | os.PathLike[str]) -> bool:
    """True for an existing zip file (a ``.qza``); plain BIOM, FASTA, newick and TSV are not."""
    return Path(path).is_file() and zipfile.is_zipfile(path)


def read_artifact(path: str | os.PathLike[str], kind: str) -> bytes:
    """The payload of artifact ``path`` of ``kind`` (a key of ARTIFACTS); InputError, one line
    naming the file, for a zip that is not a QIIME 2 artifact or one of another type."""
    expected = ARTIFACTS[kind]
    try:
        with zipfile.ZipFile(path) as archive:
            root = _root(path, archive.namelist())
            metadata = _member(path, archive, f"{root}/metadata.yaml", METADATA_BYTES)
            declared = _semantic_type(path, metadata, root)
            if declared != expected.semantic_type:
                raise InputError(
                    f"{path}: a QIIME 2 artifact of type {declared}, where a {kind} needs "
                    f"{expected.semantic_type}; give that artifact or {expected.export}"
                )
            member = f"{root}/data/{expected.payload}"
            if member not in archive.namelist():
                raise InputError(
                    f"{path}: {expected.semantic_type} artifact without data/{expected.payload};"
                    f" export it (qiime tools export) and give {expected.export}"
                )
            return _member(path, archive, member)
    except UNREADABLE as err:
        raise InputError(
            f"{path}: not a readable QIIME 2 artifact ({err}); check the file"
        ) from err


def read_text(path: str | os.PathLike[str], kind: str) -> str:
    """A plain file's text, or the payload of a ``.qza`` of ``kind`` (UTF-8)."""
    if is_artifact(path):
        data = read_artifact(path, kind)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{path}: its {kind} is not UTF-8 text ({err})") from err
    return Path(path).read_text(encoding="utf-8")


def _member(
    path: str | os.PathLike[str], archive: zipfile.ZipFile, name: str, limit: int | None = None
) -> bytes:
    """Member ``name``'s bytes, read only if it is a regular file that inflates to at most
    ``limit`` bytes (default: not a zip bomb, ``INFLATED_BYTES`` at ``INFLATION`` times its
    compressed size), and read no further than it declares."""
    info = archive.getinfo(name)
    if stat.S_ISLNK(info.external_attr >> 16):
        raise InputError(f"{path}: {name} is a link, not a file; give the artifact QIIME 2 wrote")
    ratio = info.file_size / max(info.compress_size, 1)
    if (limit is not None and info.file_size > limit) or (
        limit is None and info.file_size > INFLATED_BYTES and ratio > INFLATION
    ):
        raise InputError(
            f"{path}: {name} inflates to {info.file_size:,} bytes from {info.compress_size:,} "
            "(a zip bomb, or not an artifact QIIME 2 wrote); give the artifact QIIME 2 wrote or "
            "the plain file"
        )
    with archive.open(info) as handle:
        data = handle.read(info.file_size + 1)
    if len(data) > info.file_size:
        raise InputError(f"{path}: {name} holds more than it declares; check the file")
    return data


def _root(path: str | os.PathLike[str], names: list[str]) -> str:
    """The artifact's one top-level directory (the ``<uuid>`` holding metadata.yaml), each
    member listed once."""
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise InputError(
            f"{path}: lists {twice[0]} twice (which one QIIME 2 meant is unknown); give the "
            "artifact QIIME 2 wrote"
        )
    roots = {name.split("/", 1)[0] for name in names}
    if len(roots) != 1 or f"{next(iter(roots))}/metadata.yaml" not in names:
        raise InputError(
            f"{path}: a zip, but not a QIIME 2 artifact (one <uuid>/ directory with "
            "metadata.yaml); give a .qza from QIIME 2 or the plain file"
        )
    return next(iter(roots))


def _semantic_type(path: str | os.PathLike[str], text: bytes, root: str) -> str:
    """The ``type:`` of an artifact's metadata.yaml, whose ``uuid:`` must name its directory
    ``root`` (QIIME 2 refuses an artifact where they differ)."""
    try:
        metadata = yaml.safe_load(text)
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        problem = " ".join(str(getattr(err, "problem", None) or err).split())
        raise InputError(
            f"{path}: metadata.yaml{line} is not plain YAML ({problem}); give the artifact "
            "QIIME 2 wrote"
        ) from err
    uuid = str(metadata.get("uuid", "")).strip() if isinstance(metadata, dict) else ""
    if uuid != root:
        raise InputError(
            f"{path}: its metadata.yaml names uuid {uuid or 'none'!r}, its directory is {root!r} "
            "(QIIME 2 refuses such an artifact); give the artifact QIIME 2 wrote"
        )
    declared = metadata.get("type") if isinstance(metadata, dict) else None
    if not isinstance(declared, str):
        raise InputError(f"{path}: its metadata.yaml names no type; check the file")
    return declared.strip()
