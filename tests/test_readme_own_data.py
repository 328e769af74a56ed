"""README's "Your own data in three steps" as a QIIME 2 user takes them (issue 73): data/ibd as
a table.qza whose feature IDs are the sequences (Qiita's layout), a metadata of more rows than
the table (Qiita's: samples of the study not in this table, a #q2:types row, a text target),
and README step 2's config example with its placeholders pointed at those files. The jobs up to
the split and the baselines run with no hand filtering (the training jobs too, measured: the
time README states for the three steps)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import biom
import h5py
import pandas as pd
import pytest
import yaml
from checkout import REPO, copy_checkout
from qiime2_artifacts import write_artifact

from aam.data.split import read_split

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


def readme_config() -> dict:
    """The YAML block of README's own-data section."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Your own data in three steps", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    return yaml.safe_load("\n".join(line[3:] for line in block.splitlines()))


def qiita_metadata(path, extra: int = 197) -> pd.DataFrame:
    """data/ibd's metadata, a #q2:types row and ``extra`` rows of samples no table holds."""
    frame = pd.read_csv(REPO / "data/ibd/metadata.tsv", sep="\t", dtype=str)
    others = pd.DataFrame(
        {
            "sample_id": [f"2538.other{k}" for k in range(extra)],
            "ibd": ["not applicable", "Crohns", "Control"] * (extra // 3)
            + ["Control"] * (extra % 3),
            "host_subject_id": "s999",
        }
    )
    both = pd.concat([frame, others]).fillna("")
    types = ["#q2:types"] + ["categorical"] * (len(both.columns) - 1)
    with open(path, "w") as handle:
        handle.write("\t".join(both.columns) + "\n" + "\t".join(types) + "\n")
        both.to_csv(handle, sep="\t", index=False, header=False)
    return frame


def test_the_readmes_own_data_example_reads_a_qiita_table_qza_and_metadata_superset(tmp_path):
    root = copy_checkout(tmp_path / "repo")
    table = biom.load_table(str(REPO / "data/ibd/table.biom"))
    hdf5 = io.BytesIO()
    with h5py.File(hdf5, "w") as handle:
        table.to_hdf5(handle, "qiita")
    write_artifact(tmp_path / "table.qza", "FeatureTable[Frequency]", hdf5.getvalue())
    ibd = qiita_metadata(tmp_path / "metadata.tsv")

    config = readme_config()
    assert set(config["datasets"]["mystudy"]) >= {"classifier", "split_group_column", "rarefy"}
    dataset = config["datasets"]["mystudy"]
    assert dataset["classifier"] is True and dataset["rarefy"]["depth"] == 1000
    dataset.update(
        table=str(tmp_path / "table.qza"),
        metadata=str(tmp_path / "metadata.tsv"),
        tree=str(REPO / "data/ibd/tree.nwk"),
        target="ibd",
        split_group_column="host_subject_id",
    )
    config["workdir"] = str(tmp_path / "work")
    path = tmp_path / "mystudy.yaml"
    path.write_text(yaml.safe_dump(config))
    data = tmp_path / "work/data/mystudy"
    targets = [data / "samples.json", data / "split.tsv", tmp_path / "work/baselines/mystudy.tsv"]
    cmd = [sys.executable, "-m", "snakemake", *map(str, targets), "--profile", "profiles/local"]
    run = subprocess.run(
        [*cmd, "--configfile", str(path), "--cores", "2"], cwd=root, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]

    counts = json.loads((data / "samples.json").read_text())
    assert (counts["table_samples"], counts["metadata_rows"]) == (449, 449 + 197)
    assert (counts["matched"], counts["metadata_only"], counts["with_target"]) == (449, 197, 449)
    split = read_split(data / "split.tsv")
    assert len(split) == 449 and set(split) == {"train", "val", "test"}
    people = ibd.set_index("sample_id")["host_subject_id"].reindex(split.index)
    assert (people.groupby(people).apply(lambda p: split[p.index].nunique()) == 1).all()
    for side in ("val", "test"):  # stratified: both classes on every side
        labels = ibd.set_index("sample_id").loc[split.index[split == side], "ibd"]
        assert set(labels) == {"Control", "Crohns"}, side
    baselines = pd.read_csv(tmp_path / "work/baselines/mystudy.tsv", sep="\t", dtype=str)
    assert set(baselines["sample_id"]) <= set(split.index)
    assert {"prob_Control", "prob_Crohns"} <= set(baselines.columns)
