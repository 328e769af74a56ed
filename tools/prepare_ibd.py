"""Make data/ibd from the IBD-2538 tutorial data of biocore/gemelli (BSD-3; data/ibd/README.md).

    python tools/prepare_ibd.py GEMELLI_DATA_DIR data/ibd

GEMELLI_DATA_DIR holds ``table.biom``, ``metadata.tsv``, ``taxonomy.tsv`` and
``sepp-insertion-tree.qza`` of ``ipynb/tutorials/IBD-2538/data/``. Kept: the ASVs that SEPP
placed in its tree, the samples with at least ``MIN_READS`` reads of them, the tree sheared to
those ASVs (unary nodes merged, their branch lengths summed), their taxonomy lines, and the
metadata columns ``COLUMNS``.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import biom
import pandas as pd
import skbio

MIN_READS = 1000
COLUMNS = ["ibd", "host_subject_id", "timepoint", "age", "sex", "surgery_and_ibd"]


def sheared_newick(tree: skbio.TreeNode, keep: set[str]) -> str:
    """Newick of ``tree`` cut to the tips in ``keep``, in one postorder pass (skbio's shear
    is quadratic on SEPP's 217k-tip reference tree)."""
    text: dict[int, tuple[str, float]] = {}
    for node in tree.postorder(include_self=True):
        length = node.length or 0.0
        if node.is_tip():
            if node.name in keep:
                text[id(node)] = (node.name, length)
            continue
        kids = [text.pop(id(child)) for child in node.children if id(child) in text]
        if len(kids) == 1:
            label, below = kids[0]
            text[id(node)] = (label, below + length)
        elif kids:
            inner = ",".join(f"{label}:{below:g}" for label, below in kids)
            text[id(node)] = (f"({inner})", length)
    label, _ = text[id(tree)]
    return label + ";\n"


def main(source: Path, target: Path) -> None:
    """Write table.biom, tree.nwk, metadata.tsv and taxonomy.tsv of data/ibd into ``target``."""
    with zipfile.ZipFile(source / "sepp-insertion-tree.qza") as artifact:
        (member,) = [n for n in artifact.namelist() if n.endswith("/data/tree.nwk")]
        with artifact.open(member) as handle:
            tree = skbio.TreeNode.read(handle.read().decode().splitlines())
    placed = {tip.name for tip in tree.tips()}
    table = biom.load_table(str(source / "table.biom"))
    table = table.filter(
        [i for i in table.ids("observation") if i in placed], "observation", inplace=False
    )
    table = table.filter(lambda values, *_: values.sum() >= MIN_READS, "sample", inplace=False)
    table = table.filter(lambda values, *_: values.sum() > 0, "observation", inplace=False)
    asvs = set(table.ids("observation"))
    target.mkdir(parents=True, exist_ok=True)
    with biom.util.biom_open(str(target / "table.biom"), "w") as handle:
        table.to_hdf5(handle, "aam-hpc tools/prepare_ibd.py")
    (target / "tree.nwk").write_text(sheared_newick(tree, asvs))
    metadata = pd.read_csv(source / "metadata.tsv", sep="\t", dtype=str)
    metadata = metadata[metadata["sample_name"].isin(set(table.ids()))]
    metadata = metadata.rename(columns={"sample_name": "sample_id"})[["sample_id", *COLUMNS]]
    metadata.to_csv(target / "metadata.tsv", sep="\t", index=False)
    taxonomy = pd.read_csv(source / "taxonomy.tsv", sep="\t", dtype=str)
    taxonomy[taxonomy["Feature ID"].isin(asvs)].to_csv(
        target / "taxonomy.tsv", sep="\t", index=False
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
