"""`aam tree`: command lines, end-to-end run with the real MAFFT and FastTree, failure modes.

MAFFT and FastTree must be installed (CI installs the Debian packages); these tests do not skip.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import biom
import numpy as np
import pytest
from biom.util import biom_open
from skbio import TreeNode

from aam.cli import main
from aam.commands import tree as tree_command
from aam.data.feature_sequences import parse_fasta
from aam.errors import InputError
from aam.unifrac import phylogeny
from aam.workflow.snakefile import job_prefix

DEMO_TABLE = Path(__file__).resolve().parents[1] / "data" / "demo" / "table.biom"
N_ASVS = 25


def _write_table(path: Path, table: biom.Table) -> Path:
    with biom_open(str(path), "w") as handle:
        table.to_hdf5(handle, "aam tests")
    return path


def _small_table(n: int = N_ASVS) -> biom.Table:
    table = biom.load_table(str(DEMO_TABLE))
    keep = table.ids(axis="observation")[:n]
    small = table.filter(keep, axis="observation", inplace=False)
    return small.remove_empty(axis="sample", inplace=False)


def _synthetic_table(obs_ids: list[str]) -> biom.Table:
    data = np.arange(1, 2 * len(obs_ids) + 1, dtype=float).reshape(len(obs_ids), 2)
    return biom.Table(data, obs_ids, ["s1", "s2"])


@pytest.fixture(scope="module")
def small_table_path(tmp_path_factory) -> Path:
    return _write_table(tmp_path_factory.mktemp("table") / "small.biom", _small_table())


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    tree_command.add_arguments(parser)
    return parser.parse_args(argv)


def _check_tree(path: Path, expected_tips: set[str]) -> TreeNode:
    tree = TreeNode.read(str(path), format="newick")
    tips = [tip.name for tip in tree.tips()]
    assert len(tips) == len(expected_tips)
    assert set(tips) == expected_tips
    assert len(tree.children) == 2, "midpoint-rooted tree must have a bifurcating root"
    lengths = [node.length for node in tree.non_tips(include_self=False)]
    lengths += [tip.length for tip in tree.tips()]
    assert all(length is not None and length >= 0 for length in lengths)
    return tree


def test_mafft_command():
    assert phylogeny.mafft_command("mafft", "in.fasta", threads=4) == [
        "mafft",
        "--auto",
        "--thread",
        "4",
        "--quiet",
        "in.fasta",
    ]
    assert phylogeny.mafft_command("/usr/bin/mafft", Path("/t/in.fasta")) == [
        "/usr/bin/mafft",
        "--auto",
        "--thread",
        "1",
        "--quiet",
        "/t/in.fasta",
    ]


def test_fasttree_command():
    assert phylogeny.fasttree_command("fasttree", Path("/t/aligned.fasta")) == [
        "fasttree",
        "-nt",
        "-gtr",
        "-quiet",
        "/t/aligned.fasta",
    ]
    assert phylogeny.fasttree_command("FastTree", "aln.fa") == [
        "FastTree",
        "-nt",
        "-gtr",
        "-quiet",
        "aln.fa",
    ]


def test_end_to_end_run(small_table_path, tmp_path):
    out = tmp_path / "out" / "tree.nwk"
    tree_command.run(_parse(["--table", str(small_table_path), "--output", str(out)]))
    sequences = set(biom.load_table(str(small_table_path)).ids(axis="observation"))
    assert len(sequences) == N_ASVS
    _check_tree(out, sequences)
    assert sorted(p.name for p in out.parent.iterdir()) == ["tree.nwk"]  # no temp leftovers


def test_cli_entry_with_alignment(small_table_path, tmp_path):
    out = tmp_path / "tree.nwk"
    aln = tmp_path / "aligned.fasta"
    status = main(
        [
            "tree",
            "--table",
            str(small_table_path),
            "--output",
            str(out),
            "--threads",
            "2",
            "--keep-alignment",
            str(aln),
        ]
    )
    assert status == 0
    sequences = list(biom.load_table(str(small_table_path)).ids(axis="observation"))
    _check_tree(out, set(sequences))
    rows = parse_fasta(aln.read_text(), aln)
    assert list(rows) == sequences  # headers are the sequences, in table order
    assert len({len(row) for row in rows.values()}) == 1  # aligned: one width
    for seq, row in rows.items():
        assert row.replace("-", "").upper() == seq.upper()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aligned.fasta", "tree.nwk"]


def test_a_tree_jobs_provenance_names_mafft_fasttree_and_snakemake(small_table_path, tmp_path):
    """Rule tree's command under the workflow's shell prefix: its record names the versions of
    MAFFT and FastTree as the job ran them, and of the Snakemake that ran the job."""
    repo = Path(__file__).resolve().parents[1]
    record, out = tmp_path / "provenance.json", tmp_path / "built_tree.nwk"
    command = ["python", "-m", "aam", "--provenance", record, "tree", "--table", small_table_path]
    shell = job_prefix(repo, None, tmp_path / "cache").format() + shlex.join(
        map(str, [*command, "--output", out])
    )
    subprocess.run(["bash", "-c", shell], cwd=repo, check=True, capture_output=True)
    tools = json.loads(record.read_text())["tools"]
    assert list(tools) == ["snakemake", "mafft", "fasttree"], tools
    assert tools["snakemake"] == metadata.version("snakemake")
    assert tools["mafft"].startswith("v7.") and tools["fasttree"].startswith("FastTree 2."), tools


def test_bad_sequence_ids_exit_2(tmp_path, capsys):
    table = _write_table(
        tmp_path / "bad.biom", _synthetic_table(["ACGTACGTAC", "ASV_17", "ACGTTCGTAC"])
    )
    out = tmp_path / "tree.nwk"
    status = main(["tree", "--table", str(table), "--output", str(out)])
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(table) in err and "'ASV_17'" in err
    assert "observation IDs must be the ASV sequences" in err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.biom"]


def test_iupac_lowercase_ids_accepted_and_too_few_rejected(tmp_path):
    ok = _write_table(
        tmp_path / "ok.biom", _synthetic_table(["acgtnRYKM", "ACGUACGUSWBDHV", "ACGTACGTAC"])
    )
    assert phylogeny.read_sequences(ok) == ["acgtnRYKM", "ACGUACGUSWBDHV", "ACGTACGTAC"]
    two = _write_table(tmp_path / "two.biom", _synthetic_table(["ACGTACGTAC", "ACGTTCGTAC"]))
    with pytest.raises(InputError, match="at least 3"):
        phylogeny.read_sequences(two)
    with pytest.raises(InputError, match="no such file"):
        phylogeny.read_sequences(tmp_path / "missing.biom")


def _path_with_only(tmp_path: Path, tool: str) -> str:
    """A PATH holding a link to just ``tool`` (the other aligner/tree tool is then missing)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    real = shutil.which(tool)
    assert real, f"{tool} must be installed for these tests"
    os.symlink(real, bindir / tool)
    return str(bindir)


@pytest.mark.parametrize(
    ("present", "missing", "package"),
    [("fasttree", "mafft", "mafft"), ("mafft", "fasttree", "fasttree")],
)
def test_missing_tool_gives_install_hint(
    small_table_path, tmp_path, capsys, monkeypatch, present, missing, package
):
    monkeypatch.setenv("PATH", _path_with_only(tmp_path, present))
    out = tmp_path / "tree.nwk"
    status = main(["tree", "--table", str(small_table_path), "--output", str(out)])
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{missing} not found" in err
    assert f"apt-get install {package}" in err
    assert "conda install -c bioconda mafft fasttree" in err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]


def test_tool_failure_is_one_line_with_last_stderr_line(tmp_path):
    bad = tmp_path / "ragged.fasta"
    bad.write_text(">a\nACGTACGT\n>b\nACGTACG\n>c\nACGTACGT\n")
    fasttree = phylogeny.find_tool(["fasttree", "FastTree"], "fasttree")
    with pytest.raises(InputError) as info:
        phylogeny.run_tool(
            "FastTree", phylogeny.fasttree_command(fasttree, bad), tmp_path / "out.nwk"
        )
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("FastTree failed (exit ")
    assert message.endswith("another sequence may be too long.")


def test_threads_must_be_positive():
    with pytest.raises(SystemExit):
        _parse(["--table", "t.biom", "--output", "o.nwk", "--threads", "0"])


@pytest.mark.parametrize(
    ("option", "name", "what"),
    [("--output", "tree.csv", "tree"), ("--keep-alignment", "aligned.txt", "alignment")],
)
def test_unknown_output_extension_is_refused_before_any_work(
    tmp_path, capsys, monkeypatch, option, name, what
):
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # the tools are never looked for
    argv = ["tree", "--table", str(tmp_path / "absent.biom"), "--output", str(tmp_path / "t.nwk")]
    status = main([*argv, option, str(tmp_path / name)])
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{tmp_path / name}: unsupported {what} file name (extension" in err
    assert list(tmp_path.iterdir()) == []


def test_output_parent_is_a_file(tmp_path, capsys):
    (tmp_path / "results").write_text("a file\n")
    out = tmp_path / "results" / "tree.nwk"
    assert main(["tree", "--table", str(tmp_path / "absent.biom"), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        f"{tmp_path / 'results'}: tree directory is an existing file; choose another location"
    )
