"""Every command that writes, with a fault at each of its write points (tests/faults/
injection.py): ENOSPC and EIO in this process, SIGKILL in a child. Each run goes into a
directory that holds the previous run's outputs. After a full disk or an I/O error: exit 2, one
error line, the previous outputs exactly as they were (same files, bytes and inodes: nothing
renamed over them) and no temporary left. After a kill: the previous outputs as they were; the
rerun publishes the whole new set and leaves no temporary. Training: test_training_kills.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from injection import INJECTION, WritePoints, published, temporaries
from qiime2_artifacts import demo_artifacts
from test_cli_training import TINY, aam, error_line
from test_disk_full import DEMO, demo_subset

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> dict[str, Path]:
    """24 demo samples: table, metadata, tree, UniFrac matrix and its two shards, a split, a
    fine-tuned model and its test metrics (the inputs of the commands below)."""
    root = tmp_path_factory.mktemp("inputs")
    paths = demo_subset(root)
    paths["tree"] = DEMO / "tree.nwk"
    tree = ["--table", paths["table"], "--tree", paths["tree"], "--metric", "unweighted"]
    paths["unifrac"] = root / "unifrac.h5"
    assert aam("unifrac", *tree, "--output", paths["unifrac"], "--no-progress") == 0
    for k in (1, 2):
        paths[f"shard{k}"] = root / f"part{k}.h5"
        shard = ["--shard", str(k), "--shards", "2", "--output", paths[f"shard{k}"]]
        assert aam("unifrac-shard", *tree, *shard) == 0
    paths["split"] = root / "split.tsv"
    split = ["--table", paths["table"], "--metadata", paths["metadata"], "--seed", "1"]
    assert aam("split", *split, "--target-column", "age", "--output", paths["split"]) == 0
    paths["half"] = root / "half.split.tsv"
    half = ["--from-file", paths["split"], "--train-fraction", "0.5", "--output", paths["half"]]
    assert aam("split", *split, "--target-column", "age", *half) == 0
    truth = ["--metadata", paths["metadata"], "--target-column", "age"]
    training = ["--table", paths["table"], "--split", paths["split"], *truth, *TINY]
    assert aam("finetune", *training, "--output-dir", root / "finetune") == 0
    paths["model"] = root / "finetune" / "model.pt"
    model = ["--model", paths["model"], "--table", paths["table"], "--split", paths["split"]]
    predict = [*model, "--metadata", paths["metadata"], "--threads", "1"]
    assert aam("predict", *predict, "--output-dir", root / "predict") == 0
    paths["metrics"] = root / "predict" / "metrics.json"
    pretraining = ["--table", paths["table"], "--split", paths["split"], "--tree", paths["tree"]]
    assert aam("pretrain", *pretraining, *TINY, "--output-dir", root / "pretrain") == 0
    paths["encoder"] = root / "pretrain" / "encoder.pt"
    paths |= {f"q2_{kind}": path for kind, path in demo_artifacts(root / "q2").items()}
    return paths


Argv = Callable[[dict[str, Path], Path], list]
# command -> its arguments, given the inputs and the output directory (provenance included)
CASES: dict[str, Argv] = {
    "unifrac": lambda s, out: [
        *("unifrac", "--table", s["table"], "--tree", s["tree"], "--no-progress"),
        *("--metric", "unweighted", "--metric", "weighted_normalized"),
        *("--output", out / "{metric}.h5"),
    ],
    "unifrac-shard": lambda s, out: [
        *("unifrac-shard", "--table", s["table"], "--tree", s["tree"], "--metric", "unweighted"),
        *("--shard", "2", "--shards", "2", "--output", out / "part2.h5"),
    ],
    "unifrac-gather": lambda s, out: [
        *("unifrac-gather", "--table", s["table"], "--tree", s["tree"], "--metric", "unweighted"),
        *("--partials", s["shard1"], s["shard2"], "--shards", "2", "--output", out / "u.h5"),
    ],
    "split": lambda s, out: [
        *("split", "--table", s["table"], "--metadata", s["metadata"], "--seed", "2"),
        *("--target-column", "age", "--output", out / "split.tsv"),
    ],
    "stage": lambda s, out: [
        *("stage", "--output-dir", out, "--tree", f"tree.nwk={s['tree']}"),
        *("--file", f"table.biom={s['table']}", "--file", f"metadata.tsv={s['metadata']}"),
    ],
    "stage-qiime2": lambda s, out: [
        *("stage", "--output-dir", out, "--table", f"table.biom={s['q2_table']}"),
        *("--tree", f"tree.nwk={s['q2_tree']}", "--sequences", s["q2_sequences"]),
        *("--taxonomy", f"taxonomy.tsv={s['q2_taxonomy']}"),
    ],
    "embedding-forest": lambda s, out: [
        *("embedding-forest", "--encoder", s["encoder"], "--table", s["table"]),
        *("--metadata", s["metadata"], "--target-column", "age", "--split", s["split"]),
        *("--trees", "10", "--output", out / "forests.tsv"),
    ],
    "rarefy": lambda s, out: [
        *("rarefy", "--table", s["table"], "--rarefy-depth", "500", "--seed", "1"),
        *("--output", out / "rarefied.biom"),
    ],
    "baselines": lambda s, out: [
        *("baselines", "--table", s["table"], "--metadata", s["metadata"], "--split", s["split"]),
        *("--target-column", "age", "--trees", "10", "--output", out / "baselines.tsv"),
    ],
    "predict": lambda s, out: [
        *("predict", "--model", s["model"], "--table", s["table"], "--metadata", s["metadata"]),
        *("--training-table", s["table"], "--training-split", s["split"], "--threads", "1"),
        *("--output-dir", out),
    ],
    "importance": lambda s, out: [
        *("importance", "--model", s["model"], "--table", s["table"], "--split", s["split"]),
        *("--metadata", s["metadata"], "--trees", "10", "--threads", "1", "--output-dir", out),
    ],
    "pcoa": lambda s, out: [
        *("pcoa", "--matrix", s["unifrac"], "--metadata", s["metadata"]),
        *("--color-column", "qiita_study_id", "--output-dir", out),
    ],
    "overview": lambda s, out: [
        *("overview", "--run", f"r=demo={s['metrics']}", "--output", out / "overview.html"),
    ],
    "learning-curve": lambda s, out: [
        *("learning-curve", "--fractions", "0.5", "1", "--splits", s["half"], s["split"]),
        *("--metrics", s["metrics"], s["metrics"], "--target-column", "age"),
        *("--output", out / "curve.tsv", "--plot", out / "curve.png"),
    ],
    "cross-validation": lambda s, out: [
        *("cross-validation", "--metrics", s["metrics"], s["metrics"]),
        *("--output", out / "cv.tsv"),
    ],
    "tree": lambda s, out: [
        *("tree", "--table", s["table"], "--output", out / "tree.nwk"),
        *("--keep-alignment", out / "aligned.fasta"),
    ],
}


def command(case: str, s: dict[str, Path], out: Path) -> list[str]:
    """``aam --provenance OUT/provenance.json <case> ...`` as strings."""
    return [str(a) for a in ["--provenance", out / "provenance.json", *CASES[case](s, out)]]


def run_counted(monkeypatch, argv: list[str], points: WritePoints) -> int:
    from aam.cli import main

    with monkeypatch.context() as patch:
        patch.setattr("os.fsync", points)
        return main(argv)


@pytest.fixture(scope="module")
def previous(study, tmp_path_factory) -> dict[str, Path]:
    """Each command's outputs, written once (the "previous run" every faulty run starts on)."""
    root = tmp_path_factory.mktemp("previous")
    outputs = {}
    for case in CASES:
        out = root / case
        assert aam(*command(case, study, out)) == 0, case
        outputs[case] = out
    return outputs


def rerun_points(monkeypatch, study, previous, case: str, work: Path) -> list[Path]:
    """The write points of ``case`` rerun over its previous outputs (a copy in ``work``);
    every one is an output of the command."""
    shutil.copytree(previous[case], work)
    points = WritePoints()
    assert run_counted(monkeypatch, command(case, study, work), points) == 0
    assert points.targets, f"{case} wrote nothing through atomic_output"
    names = {str(p.relative_to(work)) for p in points.targets}
    assert names <= set(published(work)), names
    return points.targets


@pytest.mark.parametrize("fault", ["enospc", "eio"])
@pytest.mark.parametrize("case", CASES)
def test_a_write_error_at_any_point_keeps_the_previous_outputs(
    study, previous, tmp_path, monkeypatch, capsys, case, fault
):
    targets = rerun_points(monkeypatch, study, previous, case, tmp_path / "count")
    capsys.readouterr()
    for at in range(1, len(targets) + 1):
        work = tmp_path / f"at{at}"
        shutil.copytree(previous[case], work)
        before = published(work)
        rc = run_counted(monkeypatch, command(case, study, work), WritePoints(fault, at))
        line = error_line(capsys, CASES[case](study, work)[0])
        assert rc == 2, (at, line)
        failed = work / targets[at - 1].relative_to(tmp_path / "count")
        assert str(failed) in line, (at, line)
        reason = "no space left on device" if fault == "enospc" else "Input/output error"
        assert reason in line, (at, line)
        assert published(work) == before, f"{case}: outputs changed by a failed run (point {at})"
        assert not temporaries(work), temporaries(work)


@pytest.mark.parametrize("case", CASES)
def test_a_kill_at_any_write_point_keeps_the_previous_outputs_and_a_rerun_replaces_them_all(
    study, previous, tmp_path, monkeypatch, case
):
    targets = rerun_points(monkeypatch, study, previous, case, tmp_path / "count")
    expected = set(published(tmp_path / "count"))
    for at in range(1, len(targets) + 1):
        work = tmp_path / f"at{at}"
        shutil.copytree(previous[case], work)
        before = published(work)
        argv = [sys.executable, INJECTION, "kill", str(at), "--", *command(case, study, work)]
        killed = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert killed.returncode == -9, (at, killed.stderr[-2000:])
        assert published(work) == before, f"{case}: outputs changed by a killed run (point {at})"
        assert temporaries(work), "the kill came after the point's file was written"
        assert aam(*command(case, study, work)) == 0
        after = published(work)
        assert set(after) == expected and not temporaries(work), (at, set(after) ^ expected)
        replaced = [name for name in after if after[name][0] != before.get(name, (None,))[0]]
        assert sorted(replaced) == sorted(str(p.relative_to(tmp_path / "count")) for p in targets)
