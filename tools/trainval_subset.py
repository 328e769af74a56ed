"""The training and validation samples of a workflow split as a study of their own (table and
metadata), so that a recipe can be chosen by cross-validation on them without reading the test
samples (config/demo-recipe.yaml):

    python tools/trainval_subset.py --split results/workflow/data/demo/split.tsv \
        --table data/demo/table.biom --metadata data/demo/metadata.tsv \
        --output-dir results/demo-recipe/inputs
"""

from __future__ import annotations

import argparse
from pathlib import Path

import biom
import h5py
import pandas as pd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", required=True, type=Path, help="sample_id<TAB>split TSV")
    parser.add_argument("--table", required=True, type=Path, help="the study's BIOM table")
    parser.add_argument("--metadata", required=True, type=Path, help="the study's metadata TSV")
    parser.add_argument("--output-dir", required=True, type=Path)
    args = parser.parse_args()
    split = pd.read_csv(args.split, sep="\t", dtype=str).set_index("sample_id")["split"]
    kept = list(split.index[split != "test"])
    table = biom.load_table(str(args.table)).filter(kept, inplace=False)
    table = table.remove_empty(axis="observation", inplace=False)
    metadata = pd.read_csv(args.metadata, sep="\t", dtype=str).set_index("sample_id")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    with h5py.File(args.output_dir / "table.biom", "w") as handle:
        table.to_hdf5(handle, "tools/trainval_subset.py")
    metadata.loc[list(table.ids())].to_csv(args.output_dir / "metadata.tsv", sep="\t")
    print(f"{args.output_dir}: {table.shape[1]} samples (train and val), {table.shape[0]} ASVs")


if __name__ == "__main__":
    main()
