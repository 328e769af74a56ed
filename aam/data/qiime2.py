"""QIIME 2 artifacts (``.qza``) read without QIIME 2: a zip of one ``<uuid>/`` directory whose
``metadata.yaml`` names the semantic type and whose ``data/`` holds the plain file (BIOM,
FASTA, newick, TSV). The type is checked before the payload is read; nothing is extracted to
disk, so a member name cannot write outside the archive."""

from __future__ import annotations

import os
import zipfile
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
            declared = _semantic_type(path, archive.read(f"{root}/metadata.yaml"))
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
            return archive.read(member)
    except (zipfile.BadZipFile, OSError, KeyError) as err:
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


def _root(path: str | os.PathLike[str], names: list[str]) -> str:
    """The artifact's one top-level directory (the ``<uuid>`` holding metadata.yaml)."""
    roots = {name.split("/", 1)[0] for name in names}
    if len(roots) != 1 or f"{next(iter(roots))}/metadata.yaml" not in names:
        raise InputError(
            f"{path}: a zip, but not a QIIME 2 artifact (one <uuid>/ directory with "
            "metadata.yaml); give a .qza from QIIME 2 or the plain file"
        )
    return next(iter(roots))


def _semantic_type(path: str | os.PathLike[str], text: bytes) -> str:
    """The ``type:`` of an artifact's metadata.yaml."""
    try:
        metadata = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputError(f"{path}: unreadable metadata.yaml ({err}); check the file") from err
    declared = metadata.get("type") if isinstance(metadata, dict) else None
    if not isinstance(declared, str):
        raise InputError(f"{path}: its metadata.yaml names no type; check the file")
    return declared.strip()
