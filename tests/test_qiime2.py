"""QIIME 2 inputs read as they are: table.qza, rep-seqs.qza (or a FASTA), rooted-tree.qza and
taxonomy.qza, without QIIME 2, by the loaders, `aam stage` and `aam check-data`; a wrong type,
a zip that is no artifact and bad FASTA are one line each."""

import zipfile
from pathlib import Path

import biom
import numpy as np
import pytest
import skbio
from errors import one_line_error
from qiime2_artifacts import DEMO, demo_artifacts, md5, write_artifact

from aam.analysis.taxonomy import read_taxonomy
from aam.cli import main
from aam.data.feature_sequences import parse_fasta, read_sequences, with_sequences
from aam.data.qiime2 import read_artifact
from aam.data.table import load_counts, load_table
from aam.unifrac.tree import load_tree


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    return demo_artifacts(tmp_path_factory.mktemp("qiime2"))


@pytest.fixture(scope="module")
def demo_table() -> biom.Table:
    return biom.load_table(str(DEMO / "table.biom"))


def _hashed(table: biom.Table) -> list[str]:
    return [md5(str(x)) for x in table.ids("observation")]


def test_loaders_read_artifacts(artifacts, demo_table):
    for loader in (load_table, load_counts):
        table = loader(artifacts["table"])
        assert list(
            table.observation_ids if hasattr(table, "observation_ids") else table.ids("observation")
        ) == _hashed(demo_table)
    counts = load_counts(artifacts["table"])
    assert counts.sample_ids == list(demo_table.ids())
    assert (counts.matrix != demo_table.matrix_data).nnz == 0
    tree = load_tree(artifacts["tree"])
    assert set(tree.tip_index) == set(_hashed(demo_table))
    assert set(read_taxonomy(artifacts["taxonomy"]).index) == set(_hashed(demo_table))
    sequences = read_sequences(artifacts["sequences"])
    assert sequences == {md5(str(s)): str(s) for s in demo_table.ids("observation")}


def test_wrong_type_is_one_line(artifacts):
    message = one_line_error(load_tree, artifacts["table"])
    assert "FeatureTable[Frequency]" in message and "Phylogeny[Rooted]" in message
    assert str(artifacts["table"]) in message
    message = one_line_error(read_sequences, artifacts["tree"])
    assert "FeatureData[Sequence]" in message


def test_unrooted_tree_artifact_is_refused(tmp_path):
    path = write_artifact(tmp_path / "unrooted.qza", "Phylogeny[Unrooted]", b"(a:1,b:1,c:1);")
    assert "Phylogeny[Unrooted]" in one_line_error(read_artifact, path, "tree")


@pytest.mark.parametrize("layout", ["two roots", "no metadata", "no payload", "no type"])
def test_zip_that_is_no_artifact(tmp_path, layout):
    path = tmp_path / "odd.qza"
    with zipfile.ZipFile(path, "w") as archive:
        if layout == "two roots":
            archive.writestr("a/metadata.yaml", "type: Phylogeny[Rooted]\n")
            archive.writestr("b/data/tree.nwk", "(a:1,b:1);")
        elif layout == "no metadata":
            archive.writestr("a/data/tree.nwk", "(a:1,b:1);")
        elif layout == "no payload":
            archive.writestr("a/metadata.yaml", "type: Phylogeny[Rooted]\n")
        else:
            archive.writestr("a/metadata.yaml", "uuid: a\n")
            archive.writestr("a/data/tree.nwk", "(a:1,b:1);")
    assert str(path) in one_line_error(load_tree, path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ACGT\n>a\nACGT\n", "before any '>' header"),
        (">a\nACGT\n>a\nACGT\n", "ID 'a' a second time"),
        (">\nACGT\n", "header without an ID"),
        ("", "no FASTA records"),
    ],
)
def test_bad_fasta_structure(tmp_path, text, expected):
    path = tmp_path / "seqs.fasta"
    path.write_text(text)
    assert expected in one_line_error(read_sequences, path)


@pytest.mark.parametrize(("record", "expected"), [("ACGZ", "not a nucleotide"), ("", "empty")])
def test_fasta_records_must_be_dna(tmp_path, record, expected):
    path = tmp_path / "seqs.fasta"
    path.write_text(f">a description\n{record}\n>b\nAC\nGT\n")
    assert expected in one_line_error(read_sequences, path)
    assert parse_fasta(">a x\nAC\nGT\n>b\nT\n", "s") == {"a": "ACGT", "b": "T"}


def test_with_sequences_needs_one_distinct_sequence_per_id():
    table = biom.Table(np.array([[1, 0], [0, 2]]), ["h1", "h2"], ["s1", "s2"])
    relabelled = with_sequences(table, {"h1": "ACGT", "h2": "ACGA", "x": "T"}, "t", "f")
    assert list(relabelled.ids("observation")) == ["ACGT", "ACGA"]
    assert "no sequence for 1 of the 2" in one_line_error(
        with_sequences, table, {"h1": "A"}, "t", "f"
    )
    message = one_line_error(with_sequences, table, {"h1": "A", "h2": "A"}, "t", "f")
    assert "'h1' and 'h2'" in message and "same sequence" in message


def test_stage_writes_plain_files_with_sequences(artifacts, demo_table, tmp_path):
    out = tmp_path / "staged"
    argv = ["stage", "--output-dir", str(out), "--table", f"table.biom={artifacts['table']}"]
    argv += ["--tree", f"tree.nwk={artifacts['tree']}", "--sequences", str(artifacts["sequences"])]
    assert main(argv) == 0
    staged = load_table(out / "table.biom")
    assert list(staged.ids("observation")) == list(demo_table.ids("observation"))
    assert (staged.matrix_data != demo_table.matrix_data).nnz == 0
    tree = skbio.TreeNode.read(str(out / "tree.nwk"), format="newick")
    original = skbio.TreeNode.read(str(DEMO / "tree.nwk"), format="newick")
    assert {t.name for t in tree.tips()} == {t.name for t in original.tips()}
    assert tree.descending_branch_length() == pytest.approx(original.descending_branch_length())
    assert len((out / "manifest.sha256").read_text().splitlines()) == 2

    taxonomy = tmp_path / "tax"
    assert (
        main(
            [
                "stage",
                "--output-dir",
                str(taxonomy),
                "--taxonomy",
                f"taxonomy.tsv={artifacts['taxonomy']}",
            ]
        )
        == 0
    )
    assert (taxonomy / "taxonomy.tsv").read_bytes() == read_artifact(
        artifacts["taxonomy"], "taxonomy"
    )


def test_stage_refuses_an_artifact_as_plain_file(artifacts, tmp_path, capsys):
    argv = ["stage", "--output-dir", str(tmp_path), "--file", f"metadata.tsv={artifacts['table']}"]
    assert main(argv) == 2
    assert "a QIIME 2 artifact where a plain file is expected" in capsys.readouterr().err
    assert not (tmp_path / "metadata.tsv").exists()


def test_check_data_md5_ids_need_the_sequences(artifacts, tmp_path, capsys):
    argv = [
        "check-data",
        "--dataset",
        "q2",
        "--table",
        str(artifacts["table"]),
        "--metadata",
        str(DEMO / "metadata.tsv"),
        "--target-column",
        "age",
    ]
    assert main([*argv, "--output", str(tmp_path / "a.sha256")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "are not nucleotide sequences" in err[0] and "sequences:" in err[0]
    assert not (tmp_path / "a.sha256").exists()
    out = tmp_path / "b.sha256"
    assert main([*argv, "--output", str(out), "--sequences", str(artifacts["sequences"])]) == 0
    assert str(artifacts["sequences"]) in out.read_text()
