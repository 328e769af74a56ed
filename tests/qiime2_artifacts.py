"""QIIME 2 artifacts built from data/demo in QIIME 2's archive layout (one ``<uuid>/`` with
VERSION, metadata.yaml and data/), the way QIIME 2 users hold their data: feature IDs are the
md5 hashes of the sequences (the table, the tree's tips, the taxonomy), rep-seqs maps them."""

from __future__ import annotations

import hashlib
import io
import uuid
import zipfile
from pathlib import Path

import biom
import h5py
import skbio

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data/demo"
FORMATS = {
    "FeatureTable[Frequency]": ("BIOMV210DirFmt", "feature-table.biom"),
    "FeatureData[Sequence]": ("DNASequencesDirectoryFormat", "dna-sequences.fasta"),
    "Phylogeny[Rooted]": ("NewickDirectoryFormat", "tree.nwk"),
    "Phylogeny[Unrooted]": ("NewickDirectoryFormat", "tree.nwk"),
    "FeatureData[Taxonomy]": ("TSVTaxonomyDirectoryFormat", "taxonomy.tsv"),
}


def md5(sequence: str) -> str:
    return hashlib.md5(sequence.encode()).hexdigest()


def write_artifact(path: Path, semantic_type: str, payload: bytes) -> Path:
    """A .qza of ``semantic_type`` holding ``payload`` as QIIME 2 writes one."""
    fmt, name = FORMATS[semantic_type]
    root = str(uuid.uuid4())
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{root}/VERSION", "QIIME 2\narchive: 5\nframework: 2024.10.0\n")
        archive.writestr(
            f"{root}/metadata.yaml", f"uuid: {root}\ntype: {semantic_type}\nformat: {fmt}\n"
        )
        archive.writestr(f"{root}/data/{name}", payload)
        archive.writestr(f"{root}/provenance/VERSION", "QIIME 2\narchive: 5\n")
    return path


def demo_artifacts(directory: Path) -> dict[str, Path]:
    """table.qza, rep-seqs.qza, rooted-tree.qza and taxonomy.qza of data/demo, md5 IDs."""
    table = biom.load_table(str(DEMO / "table.biom"))
    sequences = [str(x) for x in table.ids("observation")]
    hashed = table.update_ids({s: md5(s) for s in sequences}, axis="observation", inplace=False)
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as h5:
        hashed.to_hdf5(h5, "q2 test")
    fasta = "".join(f">{md5(s)}\n{s}\n" for s in sequences).encode()
    tree = skbio.TreeNode.read(str(DEMO / "tree.nwk"), format="newick")
    for tip in tree.tips():
        tip.name = md5(tip.name)
    newick = io.StringIO()
    tree.write(newick, format="newick")
    taxonomy = "Feature ID\tTaxon\tConfidence\n" + "".join(
        f"{md5(s)}\tk__Bacteria; p__Phylum{k % 7}; g__Genus{k}\t0.9\n"
        for k, s in enumerate(sequences)
    )
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "table": write_artifact(
            directory / "table.qza", "FeatureTable[Frequency]", buffer.getvalue()
        ),
        "sequences": write_artifact(directory / "rep-seqs.qza", "FeatureData[Sequence]", fasta),
        "tree": write_artifact(
            directory / "rooted-tree.qza", "Phylogeny[Rooted]", newick.getvalue().encode()
        ),
        "taxonomy": write_artifact(
            directory / "taxonomy.qza", "FeatureData[Taxonomy]", taxonomy.encode()
        ),
    }
