"""`aam taxonomy`: the RDP classifier (Debian's rdp-classifier) trained for real on the sample
training set of rdp-classifier-doc, classifying a handful of the demo's ASVs (~6 s)."""

from __future__ import annotations

import json
from pathlib import Path

import biom
import numpy as np
import pandas as pd
import pytest

from aam.analysis.rdp import DEBIAN_JAR, lineage
from aam.cli import main

SAMPLES = Path("/usr/share/doc/rdp-classifier/examples/samplefiles")
TRAINING = ["--training-sequences", SAMPLES / "new_trainset.fasta"]
TRAINING += ["--training-taxa", SAMPLES / "new_trainset_db_taxid.txt"]
DEMO = Path(__file__).parent.parent / "data/demo/table.biom"
needs_rdp = pytest.mark.skipif(
    not (DEBIAN_JAR.is_file() and SAMPLES.is_dir()),
    reason="apt-get install rdp-classifier rdp-classifier-doc (.ci/run does)",
)


def aam(*args) -> int:
    try:
        return main([str(a) for a in args]) or 0
    except SystemExit as exit:
        return exit.code


def test_lineage_is_cut_above_the_first_rank_below_the_confidence():
    fields = "Root rootrank 1.0 Bacteria domain 0.99 Firmicutes phylum 0.9".split()
    fields += '"Bacilli" class 0.8 Bacillales_x subclass 0.7 Lactobacillales order 0.6'.split()
    assert lineage(fields, 0.8) == ("d__Bacteria; p__Firmicutes; c__Bacilli", 0.8)
    assert lineage(fields, 0.5) == (
        "d__Bacteria; p__Firmicutes; c__Bacilli; o__Lactobacillales",
        0.6,
    )
    assert lineage(fields, 1.0) == ("Unassigned", 0.99)  # the domain's confidence


@needs_rdp
def test_taxonomy_classifies_the_table_as_qiime2_taxonomy_tsv(tmp_path):
    demo = biom.load_table(str(DEMO))
    asvs = list(demo.ids("observation")[:6])
    small = demo.filter(asvs, axis="observation", inplace=False)
    table = tmp_path / "table.biom"
    with biom.util.biom_open(str(table), "w") as handle:
        small.to_hdf5(handle, "test")
    out, record = tmp_path / "taxonomy.tsv", tmp_path / "rdp_taxonomy.provenance.json"
    argv = ["--provenance", record, "taxonomy", "--table", table, *TRAINING, "--output", out]
    assert aam(*argv) == 0
    tools = json.loads(record.read_text())["tools"]  # what the job ran, for the landing page
    assert tools["java"].startswith(("openjdk version", "java version")), tools
    assert tools["rdp-classifier"].startswith(f"{DEBIAN_JAR.name} sha256:"), tools
    taxonomy = pd.read_csv(out, sep="\t")
    assert taxonomy.columns.tolist() == ["Feature ID", "Taxon", "Confidence"]
    assert taxonomy["Feature ID"].tolist() == asvs  # the table's IDs, the sequences
    assigned = taxonomy[taxonomy["Taxon"] != "Unassigned"]
    assert len(assigned) >= 5 and assigned["Taxon"].str.startswith("d__Bacteria").all()
    assert (assigned["Confidence"] >= 0.8).all()  # cut at the default confidence
    prefixes = assigned["Taxon"].str.split("; ").map(lambda ranks: [r[:3] for r in ranks])
    order = ["d__", "p__", "c__", "o__", "f__", "g__"]
    assert all(p == order[: len(p)] for p in prefixes)
    assert np.isfinite(taxonomy["Confidence"]).all()


@needs_rdp
def test_taxonomy_names_a_bad_training_set_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.fasta"
    bad.write_text(">x\tRoot;Bacteria\nACGT\n>y\tRoot\nACGT\n")
    args = ["--table", DEMO, "--training-sequences", bad]
    args += ["--training-taxa", SAMPLES / "new_trainset_db_taxid.txt"]
    assert aam("taxonomy", *args, "--output", tmp_path / "t.tsv") == 2
    err = capsys.readouterr().err.strip()
    assert "RDP classifier train failed" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "t.tsv").exists()
    missing = ["--training-sequences", tmp_path / "none.fa", "--training-taxa", bad]
    assert aam("taxonomy", "--table", DEMO, *missing, "--output", tmp_path / "t.tsv") == 2
    assert "none.fa: no such file (training sequences)" in capsys.readouterr().err
