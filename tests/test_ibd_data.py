"""data/ibd (Crohn's disease or not, 24 people sampled over time; data/ibd/README.md) and
config/ibd.yaml, which evaluates on people the models never saw: the files agree with each
other, and the config's split, made from the real files, keeps each person on one side."""

import re
import shlex

import biom
import pandas as pd
import skbio
from checkout import REPO
from planning import planned
from test_cli_training import aam

from aam.data.split import read_split
from aam.workflow.flags import Flags

IBD = REPO / "data/ibd"


def test_the_ibd_files_describe_the_same_asvs_and_samples():
    table = biom.load_table(str(IBD / "table.biom"))
    asvs = set(table.ids("observation"))
    assert all(re.fullmatch("[ACGT]{100}", asv) for asv in asvs)
    assert {tip.name for tip in skbio.TreeNode.read(str(IBD / "tree.nwk")).tips()} == asvs
    metadata = pd.read_csv(IBD / "metadata.tsv", sep="\t", dtype=str)
    assert sorted(metadata["sample_id"]) == sorted(table.ids())
    assert table.sum("sample").min() >= 1000
    taxonomy = pd.read_csv(IBD / "taxonomy.tsv", sep="\t", dtype=str)
    assert set(taxonomy["Feature ID"]) == asvs
    # one label per person: a person on both sides of a split could be recognised
    assert metadata.groupby("host_subject_id")["ibd"].nunique().max() == 1
    assert set(metadata["ibd"]) == {"Control", "Crohns"}


def test_the_ibd_config_splits_the_people_not_their_samples(tmp_path):
    scheme = planned(REPO / "config/ibd.yaml")
    data = scheme.datasets["ibd"]
    assert data["classifier"] and data["split_group_column"] == "host_subject_id"

    class Wildcards:
        dataset = "ibd"

    out = tmp_path / "split.tsv"
    flags = shlex.split(Flags(scheme).split(Wildcards))
    inputs = ["--table", str(REPO / data["table"]), "--metadata", str(REPO / data["metadata"])]
    assert aam("split", *inputs, *flags, "--output", str(out)) == 0
    split = read_split(out)
    metadata = pd.read_csv(IBD / "metadata.tsv", sep="\t", dtype=str).set_index("sample_id")
    sides = metadata.loc[split.index, "host_subject_id"].groupby(split.values).agg(set)
    assert set(sides.index) == {"train", "val", "test"}
    assert not sides["train"] & sides["test"] and not sides["train"] & sides["val"]
    assert not sides["val"] & sides["test"]
    for side in ("train", "val", "test"):  # both classes on each side (stratified by class)
        assert metadata.loc[split.index[split == side], "ibd"].nunique() == 2
