"""`aam split/pretrain/finetune/predict` end to end on demo samples, and their bad-input errors.

Every command runs in-process through ``aam.cli.main`` with a tiny model, so the whole module
stays well under a minute on two CPU cores. Bad input must give one ``aam <command>: error:``
line on stderr, exit status 2, and leave no outputs behind.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import biom
import numpy as np
import pandas as pd
import pytest
import torch
from biom.util import biom_open
from matplotlib.text import Text
from read_only import read_only_dir

from aam.analysis.spread import NEAR_CONSTANT
from aam.cli import main
from aam.commands.plot_history import SERIES, history_figure
from aam.training.meters.events import WRITERS
from aam.training.trainer import epoch_line

# One xdist worker: every worker that ran one of these tests would build the module fixtures.
pytestmark = pytest.mark.xdist_group("test_cli_training")

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
TINY = (
    "--embedding-dim 16 --attention-heads 2 --layers 1 --max-bp 100 --token-limit 64 "
    "--epochs 1 --batch-size 8 --threads 2 --no-progress"
).split()
# Flags for the hand-made tables below (24-bp ASVs, a handful of samples).
MICRO = (
    "--embedding-dim 8 --attention-heads 2 --layers 1 --max-bp 24 --token-limit 8 "
    "--epochs 1 --batch-size 4 --threads 2 --no-progress"
).split()
HISTORY_COLUMNS = {
    *("epoch", "step", "lr", "train_loss", "val_loss"),
    *("samples_per_s", "epoch_seconds", "peak_memory_mb", "tflops"),
}


def aam(*args: str | Path) -> int:
    """Exit status of `aam ARGS` run in-process (argparse errors raise SystemExit)."""
    try:
        return main([str(a) for a in args])
    except SystemExit as stop:
        return int(stop.code or 0)


def error_line(capsys, command: str) -> str:
    """The single `aam <command>: error:` line of stderr (log lines may precede it)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, err
    assert errors[0].startswith(f"aam {command}: error: "), err
    return errors[0]


def assert_failed(rc: int, capsys, command: str, out_dir: Path, *expected: str) -> str:
    """Exit 2, one error line containing ``expected``, nothing written to ``out_dir``."""
    line = error_line(capsys, command)
    assert rc == 2, line
    for text in expected:
        assert text in line, line
    if out_dir.exists():
        assert not list(out_dir.iterdir()), list(out_dir.iterdir())
    return line


def write_table(path: Path, table: biom.Table) -> Path:
    with biom_open(str(path), "w") as handle:
        table.to_hdf5(handle, "aam tests")
    return path


def write_metadata(path: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(path, sep="\t", index_label="sample_id")
    return path


def micro_table(n_samples: int = 12, empty: tuple[int, ...] = ()) -> biom.Table:
    """Seeded table of 8 random 24-bp ASVs; samples ``empty`` have no reads at all."""
    rng = np.random.default_rng(7)
    asvs = ["".join(rng.choice(list("ACGT"), 24)) for _ in range(8)]
    counts = rng.integers(0, 20, size=(8, n_samples)).astype(float)
    counts[0] += 1  # every sample has reads of at least one ASV
    counts[:, list(empty)] = 0
    return biom.Table(counts, asvs, [f"s{k:02d}" for k in range(n_samples)])


def micro_metadata(n_samples: int = 12) -> pd.DataFrame:
    ids = [f"s{k:02d}" for k in range(n_samples)]
    return pd.DataFrame(
        {"age": np.linspace(20, 70, n_samples), "site": ["gut", "oral"] * (n_samples // 2)},
        index=pd.Index(ids, name="sample_id"),
    )


@pytest.fixture
def micro(tmp_path) -> tuple[Path, Path]:
    """A hand-made 12-sample table and its metadata (age, site)."""
    table = write_table(tmp_path / "table.biom", micro_table())
    return table, write_metadata(tmp_path / "metadata.tsv", micro_metadata())


# --------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict[str, Path]:
    """60 demo samples: table, metadata, UniFrac matrix (`aam unifrac`), split (`aam split`)."""
    root = tmp_path_factory.mktemp("demo60")
    full = biom.load_table(str(DEMO / "table.biom"))
    table = full.filter(full.ids()[:60], inplace=False).remove_empty(axis="observation")
    paths = {"root": root, "table": write_table(root / "table.biom", table)}
    metadata = pd.read_csv(DEMO / "metadata.tsv", sep="\t", dtype=str, index_col="sample_id")
    paths["metadata"] = write_metadata(root / "metadata.tsv", metadata.loc[list(table.ids())])
    paths["unifrac"] = root / "unifrac.h5"
    inputs = ["--table", paths["table"], "--tree", DEMO / "tree.nwk", "--metric", "unweighted"]
    rc = aam("unifrac", *inputs, "--output", paths["unifrac"], "--no-progress")
    assert rc == 0 and paths["unifrac"].is_file()
    paths["split"] = root / "split.tsv"
    inputs = ["--table", paths["table"], "--metadata", paths["metadata"], "--target-column", "age"]
    rc = aam("split", *inputs, "--output", paths["split"], "--seed", "3")
    assert rc == 0
    return paths


@pytest.fixture(scope="module")
def pretrained(demo) -> Path:
    """`aam pretrain` output directory (2 epochs)."""
    out = demo["root"] / "pretrain"
    assert pretrain(demo, out, "--epochs", "2") == 0
    return out


def pretrain(demo: dict[str, Path], out: Path, *extra: str | Path) -> int:
    """`aam pretrain` of the tiny model on the 60 demo samples."""
    inputs = ["--table", demo["table"], "--unifrac", demo["unifrac"], "--split", demo["split"]]
    return aam("pretrain", *inputs, "--output-dir", out, *TINY, *extra)


def train(demo: dict[str, Path], out: Path, target: str, *extra: str | Path) -> int:
    """`aam finetune` of the tiny model on ``target`` of the 60 demo samples."""
    inputs = ["--table", demo["table"], "--metadata", demo["metadata"], "--split", demo["split"]]
    return aam("finetune", *inputs, "--target-column", target, "--output-dir", out, *TINY, *extra)


def micro_train(table: Path, metadata: Path, out: Path, *extra: str | Path, target="age") -> int:
    """`aam finetune` on a hand-made table (defaults: no split file, no test samples)."""
    inputs = ["--table", table, "--metadata", metadata, "--target-column", target]
    return aam("finetune", *inputs, "--output-dir", out, *MICRO, *extra)


@pytest.fixture(scope="module")
def trained(demo, pretrained) -> Path:
    """`aam finetune` on age from the pretrained encoder, with the UniFrac regulariser."""
    out = demo["root"] / "train"
    encoder = pretrained / "encoder.pt"
    rc = train(demo, out, "age", "--unifrac", demo["unifrac"], "--pretrained-encoder", encoder)
    assert rc == 0
    return out


def read_split(path: Path) -> pd.Series:
    return pd.read_csv(path, sep="\t", dtype=str).set_index("sample_id")["split"]


def read_history(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t")


def predict(model: Path, demo, out: Path, *extra: str | Path) -> int:
    inputs = ["--model", model, "--table", demo["table"], "--split", demo["split"]]
    return aam("predict", *inputs, "--output-dir", out, "--threads", "2", *extra)


def test_split_assigns_every_sample_once(demo):
    split = read_split(demo["split"])
    table = biom.load_table(str(demo["table"]))
    assert sorted(split.index) == sorted(table.ids())
    assert split.value_counts().to_dict() == {"train": 42, "test": 12, "val": 6}


@pytest.mark.slow
def test_pretrain_outputs(demo, pretrained):
    state = torch.load(pretrained / "encoder.pt", weights_only=True)
    assert state["kind"] == "encoder"
    assert state["config"]["embedding_dim"] == 16 and state["config"]["max_bp"] == 100
    history = read_history(pretrained / "history.tsv")
    assert list(history["epoch"]) == [1, 2]
    assert HISTORY_COLUMNS | {"train_unifrac_loss", "train_nuc_loss", "val_unifrac_r"} <= set(
        history.columns
    )
    assert (history["samples_per_s"] > 0).all() and (history["peak_memory_mb"] > 0).all()
    assert (history["tflops"] > 0).all() and "mfu" not in history  # no peak known for a CPU
    assert np.isfinite(history["train_loss"]).all()
    recorded, given = read_split(pretrained / "split.tsv"), read_split(demo["split"])
    assert recorded.sort_index().equals(given.sort_index())
    assert (pretrained / "checkpoints" / "latest.pt").is_file()


def test_training_writes_tensorboard_events_of_every_epoch(pretrained, micro, tmp_path):
    """OUTPUT_DIR/events/train and /val: each history column of each epoch as a TensorBoard
    scalar at the epoch's last optimizer step, a train_ column and its val_ twin under one tag
    (one chart), read back with TensorBoard's own event reader; a fresh run first removes an
    earlier run's events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from aam.training.meters.events import tag

    readers = {name: EventAccumulator(str(pretrained / "events" / name)) for name in WRITERS}
    for reader in readers.values():
        reader.Reload()
    history = read_history(pretrained / "history.tsv")
    assert {"metrics/loss", "run/lr", "run/samples_per_s", "run/epoch"} <= set(
        readers["train"].Tags()["scalars"]
    )
    assert {"metrics/loss", "metrics/unifrac_r"} <= set(readers["val"].Tags()["scalars"])
    for column in ("train_loss", "val_loss", "val_unifrac_r", "lr", "epoch"):
        writer, name = tag(column)
        scalars = {s.step: s.value for s in readers[writer].Scalars(name)}
        assert np.allclose([scalars[s] for s in history["step"]], history[column], rtol=1e-5)
    out = tmp_path / "run"
    (out / "events").mkdir(parents=True)
    (out / "events/events.out.tfevents.old").write_text("an earlier run's")
    assert micro_train(*micro, out, "--epochs", "2") == 0
    assert sorted(p.name for p in (out / "events").iterdir()) == sorted(WRITERS)
    assert all(len(list((out / "events" / name).iterdir())) == 1 for name in WRITERS)


@pytest.mark.slow
def test_pretrain_rerun_after_finishing_does_not_retrain(demo, pretrained, caplog):
    before = torch.load(pretrained / "encoder.pt", weights_only=True)["model"]
    latest = (pretrained / "checkpoints" / "latest.pt").read_bytes()
    caplog.set_level(logging.INFO)
    assert pretrain(demo, pretrained, "--epochs", "2") == 0
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("resumed from") for m in messages), messages
    assert not any(m.startswith("epoch ") for m in messages), messages  # no epoch trained
    assert (pretrained / "checkpoints" / "latest.pt").read_bytes() == latest  # not re-saved
    assert list(read_history(pretrained / "history.tsv")["epoch"]) == [1, 2]
    after = torch.load(pretrained / "encoder.pt", weights_only=True)["model"]
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.slow
def test_pretrain_resume_with_another_config_is_refused(demo, pretrained, capsys):
    rc = pretrain(demo, pretrained, "--epochs", "2", "--lr", "0.01")
    line = error_line(capsys, "pretrain")
    assert rc == 2 and "different config" in line and "lr" in line
    assert "--stale-checkpoints restart" in line


@pytest.mark.parametrize("off", [["--mask-rate", "0"], ["--nuc-weight", "0"]])
def test_pretrain_without_a_loss_term_is_refused(small_study, tmp_path, capsys, off):
    out = tmp_path / "out"
    inputs = ["--table", small_study / "table.biom", "--unifrac", small_study / "unifrac.h5"]
    rc = aam("pretrain", *inputs, "--output-dir", out, *TINY, "--unifrac-weight", "0", *off)
    assert_failed(rc, capsys, "pretrain", out, "--unifrac-weight 0", "no loss to learn from")


def refused_then_restarted(demo, run: Path, capsys, caplog, epochs: int) -> str:
    """``aam pretrain --epochs EPOCHS`` of the finished ``run`` whose checkpoint is stale: the
    error line by hand (returned), then with --stale-checkpoints restart every epoch trained
    afresh, nothing resumed."""
    assert pretrain(demo, run, "--epochs", str(epochs)) == 2
    line = error_line(capsys, "pretrain")
    assert "--stale-checkpoints restart" in line
    caplog.set_level(logging.INFO)
    assert pretrain(demo, run, "--epochs", str(epochs), "--stale-checkpoints", "restart") == 0
    messages = [r.getMessage() for r in caplog.records]
    assert any("starting afresh" in m for m in messages)
    assert not any(m.startswith("resumed from") for m in messages), messages
    assert list(read_history(run / "history.tsv")["epoch"]) == list(range(1, epochs + 1))
    return line


@pytest.mark.slow
def test_a_checkpoint_of_another_schedule_length_is_stale(demo, pretrained, capsys, caplog):
    """More epochs make another learning-rate schedule: resuming a finished 2-epoch run for a
    third epoch would end with weights no fresh 3-epoch run has (the workflow reran the job
    after `epochs` changed and kept the stale weights)."""
    run = pretrained.parent / "pretrain-longer"
    shutil.copytree(pretrained, run)
    line = refused_then_restarted(demo, run, capsys, caplog, epochs=3)
    assert "train.epochs: saved 2, current 3" in line


@pytest.mark.slow
def test_a_checkpoint_of_other_code_is_stale_and_restart_trains_afresh(
    demo, pretrained, capsys, caplog
):
    """A finished run's latest.pt is resumed only by the same config, samples and code: the
    workflow reruns a training job because one of them changed (--stale-checkpoints restart),
    and must not get the old run's weights back."""
    run = pretrained.parent / "pretrain-stale"
    shutil.copytree(pretrained, run)
    latest = run / "checkpoints/latest.pt"
    saved = torch.load(latest, weights_only=True)
    assert len(saved["config"]["code"]) == 16  # the command's code fingerprint
    saved["config"]["code"] = "0" * 16  # as if aam's training code had changed since
    torch.save(saved, latest)
    old_best = (run / "checkpoints/best.pt").read_bytes()
    (run / "checkpoints/best.prev.pt").write_bytes(old_best)  # the old run's previous best
    line = refused_then_restarted(demo, run, capsys, caplog, epochs=2)
    assert "code: saved '0000000000000000'" in line
    assert torch.load(latest, weights_only=True)["config"]["code"] != "0" * 16
    for name in ("best.pt", "best.prev.pt"):  # no fallback can return the old run's weights
        path = run / "checkpoints" / name
        assert not path.exists() or path.read_bytes() != old_best, name


@pytest.mark.slow
def test_train_and_predict_regression(demo, trained, pretrained, tmp_path, caplog):
    state = torch.load(trained / "model.pt", weights_only=True)
    assert state["kind"] == "predictor" and state["target"]["column"] == "age"
    encoder = torch.load(pretrained / "encoder.pt", weights_only=True)
    for name in ("embedding_dim", "attention_heads", "max_bp", "token_limit"):
        assert state["config"][name] == encoder["config"][name]
    history = read_history(trained / "history.tsv")
    assert len(history) == 1
    assert HISTORY_COLUMNS | {"train_target_loss", "train_unifrac_loss", "val_mae"} <= set(
        history.columns
    )
    summary = json.loads((trained / "summary.json").read_text())
    assert summary["best_epoch"] == 1 and "val_mae" in summary["mean_baseline"]
    assert summary["best_metric"] == "val_mae"  # --best-metric auto: the target's MAE

    out = tmp_path / "predict"
    assert predict(trained / "model.pt", demo, out, "--metadata", demo["metadata"]) == 0
    table = pd.read_csv(out / "predictions.tsv", sep="\t", dtype={"sample_id": str})
    split = read_split(demo["split"])
    assert sorted(table["sample_id"]) == sorted(split.index[split == "test"])
    assert list(table.columns) == ["sample_id", "prediction", "true"]
    # Years, not z-scores: the training mean is about 30 years.
    assert table["prediction"].between(5, 150).all(), table
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == len(table) == 12
    assert np.isfinite(metrics["model"]["mae"]) and np.isfinite(metrics["mean_baseline"]["mae"])
    mae = float((table["prediction"] - table["true"]).abs().mean())
    assert metrics["model"]["mae"] == pytest.approx(mae, rel=1e-4)
    # without --baselines: the training mean and median the model file records, each scored
    # with its interval and paired difference like any baseline
    ages = pd.read_csv(demo["metadata"], sep="\t", dtype={"sample_id": str}).set_index("sample_id")
    median = float(ages["age"].reindex(split.index[split == "train"]).median())
    assert state["target"]["median"] == pytest.approx(median)
    constants = {"mean_baseline", "median_baseline"}
    assert constants <= set(metrics["intervals"]) and constants <= set(metrics["differences"])
    mae = float((table["true"] - median).abs().mean())
    assert metrics["median_baseline"]["mae"] == pytest.approx(mae, rel=1e-6)
    # the spread of AAM's predictions beside the target's; the constants have none
    spread = metrics["spread"]
    assert list(spread["models"]) == ["model"]
    assert spread["target_sd"] == pytest.approx(table["true"].std(ddof=1), rel=1e-6)
    aam_spread = spread["models"]["model"]
    assert aam_spread["prediction_sd"] == pytest.approx(table["prediction"].std(), rel=1e-4)
    assert aam_spread["near_constant"] == (aam_spread["sd_ratio"] < NEAR_CONSTANT)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    flat = [line for line in warned if "near-constant" in line]
    assert len(flat) == int(aam_spread["near_constant"]), warned  # one line, where it is
    assert (out / "predicted_vs_true.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_predict_scores_the_baselines_beside_the_model(demo, trained, tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO)
    baselines = tmp_path / "baselines.tsv"
    args = ["--table", demo["table"], "--metadata", demo["metadata"], "--target-column", "age"]
    args += ["--split", demo["split"], "--output", baselines, "--trees", "20"]
    assert aam("baselines", *args, "--group-column", "qiita_study_id") == 0
    out = tmp_path / "predict"
    extra = ["--metadata", demo["metadata"], "--baselines", baselines]
    assert predict(trained / "model.pt", demo, out, *extra, "--group-column", "qiita_study_id") == 0
    metrics = json.loads((out / "metrics.json").read_text())
    sections = (
        "model",
        "mean_baseline",
        "median_baseline",
        "random_forest_baseline",
        "group_mean_baseline",
    )
    assert set(metrics["intervals"]) == set(sections)
    assert metrics["inputs"] == {  # as `aam baselines` wrote them beside each model
        "model": ["microbiome"],
        "mean_baseline": [],
        "median_baseline": [],
        "random_forest_baseline": ["microbiome"],
        "group_mean_baseline": ["qiita_study_id"],
    }
    for name in sections:
        for metric in ("mae", "rmse"):
            low, high = metrics["intervals"][name][metric]
            assert low <= metrics[name][metric] <= high, (name, metric)
    # AAM minus each baseline, on the same samples and the same bootstrap draws
    assert set(metrics["differences"]) == set(sections[1:])
    for name in sections[1:]:
        for metric, difference in metrics["differences"][name].items():
            value = metrics["model"][metric] - metrics[name][metric]
            assert difference["value"] == pytest.approx(value, abs=1e-9), (name, metric)
            low, high = difference["interval"]
            assert low <= value <= high, (name, metric)
    # per study: every model scored on each group's test samples, largest group first
    predicted = pd.read_csv(out / "predictions.tsv", sep="\t", dtype={"sample_id": str})
    study = pd.read_csv(demo["metadata"], sep="\t", dtype=str).set_index("sample_id")
    study = study["qiita_study_id"].reindex(predicted["sample_id"]).to_numpy()
    assert metrics["group_column"] == "qiita_study_id"
    assert [g["n"] for g in metrics["by_group"]] == sorted(
        [int((study == g).sum()) for g in set(study)], reverse=True
    )
    for group in metrics["by_group"]:
        rows = predicted[study == group["group"]]
        mae = (rows["prediction"] - rows["true"]).abs().mean()
        assert group["model"]["mae"] == pytest.approx(mae, rel=1e-4), group
        assert set(group) == {"group", "n", *sections}
    table = pd.read_csv(baselines, sep="\t", dtype={"sample_id": str})
    truth = pd.read_csv(demo["metadata"], sep="\t", dtype={"sample_id": str}).set_index("sample_id")
    forest = table[(table["model"] == "random_forest") & (table["split"] == "test")]
    mae = (forest["prediction"] - truth["age"].reindex(forest["sample_id"]).to_numpy()).abs().mean()
    assert metrics["random_forest_baseline"]["mae"] == pytest.approx(mae, rel=1e-4)
    median = table[(table["model"] == "median") & (table["split"] == "test")]
    train = read_split(demo["split"])
    ages = truth["age"].reindex(train.index[train == "train"])
    assert median["prediction"].to_numpy() == pytest.approx(np.full(len(median), ages.median()))
    errors = np.abs(ages.median() - truth["age"].reindex(median["sample_id"]).to_numpy())
    assert metrics["median_baseline"]["mae"] == pytest.approx(errors.mean(), rel=1e-4)
    # ... and printed: AAM first, then the baselines, each metric with its interval
    printed = [r.getMessage() for r in caplog.records if r.name == "aam.analysis.predict"]
    table_at = printed.index(f"metrics of {metrics['n']} samples (age), 95% bootstrap intervals:")
    rows = printed[table_at + 1 : table_at + 6]
    labels = [row.split("  ")[1].strip() for row in rows]
    others = ["mean of each qiita_study_id", "random forest", "training mean", "training median"]
    assert labels[0] == "AAM" and sorted(labels[1:]) == others, rows
    forest_mae = metrics["differences"]["random_forest_baseline"]["mae"]
    low, high = forest_mae["interval"]
    line = f"AAM - random forest: mae {forest_mae['value']:+.3g} [{low:+.3g}, {high:+.3g}]"
    assert any(row.strip().startswith(line) for row in printed[table_at + 6 :]), printed
    low, high = metrics["intervals"]["model"]["mae"]
    mae_cell = f"mae {metrics['model']['mae']:.3g} [{low:.3g}, {high:.3g}]"
    assert mae_cell in rows[0] and "rmse " in rows[0] and "r2 " in rows[0]

    table[table["sample_id"] != forest["sample_id"].iloc[0]].to_csv(
        baselines, sep="\t", index=False
    )
    rc = predict(trained / "model.pt", demo, tmp_path / "bad", *extra)
    assert_failed(rc, capsys, "predict", tmp_path / "bad", str(baselines), "no prediction for 1")
    rc = predict(trained / "model.pt", demo, tmp_path / "bad", *extra, "--group-column", "site")
    assert_failed(rc, capsys, "predict", tmp_path / "bad", "no column 'site' for --group-column")


@pytest.mark.slow
def test_predict_says_whether_the_test_groups_of_the_split_were_trained_on(
    demo, trained, tmp_path, capsys
):
    """--split-group-column (the workflow's split_group_column): split_groups in metrics.json,
    which the landing page reads, without per-group metrics (--group-column's)."""
    out = tmp_path / "predict"
    extra = ["--metadata", demo["metadata"], "--split-group-column", "qiita_study_id"]
    assert predict(trained / "model.pt", demo, out, *extra) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    split, metadata = read_split(demo["split"]), pd.read_csv(demo["metadata"], sep="\t", dtype=str)
    study = metadata.set_index("sample_id")["qiita_study_id"]
    tested, trained_on = (set(study[split.index[split == side]]) for side in ("test", "train"))
    assert metrics["split_groups"]["column"] == "qiita_study_id"
    assert metrics["split_groups"]["in_training"] == sorted(tested & trained_on)
    assert metrics["split_groups"]["test_groups"] == len(tested)
    assert "by_group" not in metrics
    # the split's unit is the study: intervals resample whole studies, not samples
    assert f"the {len(tested)} qiita_study_id groups" in metrics["interval_note"]
    by_sample = tmp_path / "by_sample"
    assert predict(trained / "model.pt", demo, by_sample, "--metadata", demo["metadata"]) == 0
    samples = json.loads((by_sample / "metrics.json").read_text())
    assert samples["model"] == metrics["model"]  # the same scores, other intervals
    assert samples["intervals"]["model"] != metrics["intervals"]["model"]
    extra[-1] = "site"
    rc = predict(trained / "model.pt", demo, tmp_path / "bad", *extra)
    assert_failed(rc, capsys, "predict", tmp_path / "bad", "no column 'site' for --split-group")
    alone = ["--model", trained / "model.pt", "--table", demo["table"], *extra[:2]]
    lone = tmp_path / "no_split"
    rc = aam("predict", *alone, "--split-group-column", "qiita_study_id", "--output-dir", lone)
    assert_failed(rc, capsys, "predict", lone, "--split-group-column qiita_study_id: needs --split")


@pytest.mark.slow
def test_predict_rebuilds_the_model_from_the_checkpoint_alone(demo, trained, tmp_path):
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(trained / "model.pt", alone / "model.pt")
    assert predict(trained / "model.pt", demo, tmp_path / "first") == 0
    assert predict(alone / "model.pt", demo, tmp_path / "second") == 0
    first = (tmp_path / "first" / "predictions.tsv").read_bytes()
    assert first == (tmp_path / "second" / "predictions.tsv").read_bytes()
    # Without truth there are no metrics and no plot.
    assert sorted(p.name for p in (tmp_path / "first").iterdir()) == ["predictions.tsv"]


@pytest.mark.slow
def test_train_frozen_base_keeps_the_encoder_weights(demo, pretrained, tmp_path):
    out = tmp_path / "frozen"
    encoder = pretrained / "encoder.pt"
    flags = ["--unifrac", demo["unifrac"], "--pretrained-encoder", encoder, "--freeze-base"]
    rc = train(demo, out, "age", *flags)
    assert rc == 0
    model = torch.load(out / "model.pt", weights_only=True)["model"]
    encoder = torch.load(pretrained / "encoder.pt", weights_only=True)["model"]
    assert all(torch.equal(model[f"base.{k}"], v) for k, v in encoder.items())
    history = read_history(out / "history.tsv")
    assert "train_target_loss" in history and "train_unifrac_loss" not in history  # base off
    assert predict(out / "model.pt", demo, out / "predictions") == 0
    predicted = pd.read_csv(out / "predictions" / "predictions.tsv", sep="\t")
    assert len(predicted) == 12 and predicted["prediction"].between(5, 150).all()


@pytest.mark.slow
def test_classifier_probabilities_sum_to_one(demo, tmp_path):
    out = tmp_path / "classifier"
    assert train(demo, out, "qiita_study_id", "--classifier") == 0
    classes = torch.load(out / "model.pt", weights_only=True)["target"]["classes"]
    assert len(classes) == 8 and "550" in classes
    pred = out / "predict"
    assert predict(out / "model.pt", demo, pred, "--metadata", demo["metadata"]) == 0
    table = pd.read_csv(pred / "predictions.tsv", sep="\t", dtype=str)
    prob_columns = [f"prob_{c}" for c in classes]
    assert list(table.columns) == ["sample_id", "prediction", *prob_columns, "true"]
    probs = table[prob_columns].astype(float).to_numpy()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-4)
    assert list(table["prediction"]) == [classes[k] for k in probs.argmax(axis=1)]
    metrics = json.loads((pred / "metrics.json").read_text())
    assert metrics["n"] == 12 and 0.0 <= metrics["model"]["accuracy"] <= 1.0


@pytest.mark.slow
def test_categorical_covariate_needs_metadata_at_prediction(demo, tmp_path, capsys):
    out = tmp_path / "covariate"
    covariate = ["--categorical-columns", "qiita_study_id", "--categorical-fusion", "add"]
    rc = train(demo, out, "age", *covariate)
    assert rc == 0
    state = torch.load(out / "model.pt", weights_only=True)
    assert state["config"]["categorical_fusion"] == "add"
    assert state["categorical"]["columns"] == ["qiita_study_id"]
    capsys.readouterr()
    rc = predict(out / "model.pt", demo, out / "bare")
    assert_failed(rc, capsys, "predict", out / "bare", "qiita_study_id", "--metadata")
    assert predict(out / "model.pt", demo, out / "with", "--metadata", demo["metadata"]) == 0
    assert len(pd.read_csv(out / "with" / "predictions.tsv", sep="\t")) == 12


@pytest.mark.slow
def test_pretrain_batch_leaving_a_single_sample_still_trains(demo, tmp_path):
    # 42 training samples in batches of 41: the lone last sample joins the previous batch.
    out = tmp_path / "odd"
    rc = pretrain(demo, out, "--batch-size", "41")
    assert rc == 0
    history = read_history(out / "history.tsv")
    assert history["step"].tolist() == [1] and np.isfinite(history["train_unifrac_loss"]).all()


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("batch_size", ["1", "0"])
def test_pretrain_batch_too_small_for_pairs(demo, tmp_path, capsys, batch_size):
    out = tmp_path / "out"
    rc = pretrain(demo, out, "--batch-size", batch_size)
    assert_failed(rc, capsys, "pretrain", out, f"--batch-size {batch_size}")


@pytest.mark.slow
def test_train_batch_of_one_without_pairwise_loss(micro, tmp_path):
    table, metadata = micro
    assert micro_train(table, metadata, tmp_path / "out", "--batch-size", "1") == 0
    assert read_history(tmp_path / "out" / "history.tsv")["step"].tolist() == [11]  # 11 samples


def test_train_with_unifrac_batch_of_one(micro, demo, tmp_path, capsys):
    out = tmp_path / "out"
    rc = train(demo, out, "age", "--unifrac", demo["unifrac"], "--batch-size", "1")
    assert_failed(rc, capsys, "finetune", out, "--batch-size 1", "pairs")


@pytest.mark.parametrize(
    ("flag", "value"), [("--epochs", "0"), ("--grad-accum", "0"), ("--batch-size", "-2")]
)
def test_train_rejects_non_positive_counts(micro, tmp_path, capsys, flag, value):
    table, metadata = micro
    out = tmp_path / "out"
    rc = micro_train(table, metadata, out, flag, value)
    assert_failed(rc, capsys, "finetune", out, f"{flag} {value}")


@pytest.mark.slow
def test_predict_rejects_batch_size_zero(demo, trained, tmp_path, capsys):
    out = tmp_path / "out"
    rc = predict(trained / "model.pt", demo, out, "--batch-size", "0")
    assert_failed(rc, capsys, "predict", out, "--batch-size 0")


@pytest.mark.parametrize(
    ("column", "classifier", "expected"),
    [
        ("height", False, "no column 'height'"),
        ("height", True, "no column 'height'"),
        ("Age", True, "no column 'Age'; did you mean 'age'?"),
        ("site", False, "holds text, not numbers (12 of its 12 values, e.g. gut, oral)"),
    ],
)
def test_train_bad_target_column(micro, tmp_path, capsys, column, classifier, expected):
    table, metadata = micro
    out = tmp_path / "out"
    flags = ["--classifier"] if classifier else []
    rc = micro_train(table, metadata, out, *flags, target=column)
    assert_failed(rc, capsys, "finetune", out, str(metadata), expected)


@pytest.mark.slow
def test_train_drops_and_counts_missing_targets(micro, tmp_path, caplog):
    table, _ = micro
    frame = micro_metadata()
    frame.loc[["s03", "s07"], "age"] = np.nan
    metadata = write_metadata(tmp_path / "nan.tsv", frame)
    split = tmp_path / "split.tsv"
    caplog.set_level(logging.INFO)
    # `aam split --target-column` lists the two samples unused; train accepts that split.
    inputs = ["--table", table, "--metadata", metadata, "--target-column", "age"]
    assert aam("split", *inputs, "--output", split, "--test-fraction", "0") == 0
    labels = read_split(split)
    assert len(labels) == 12 and labels[["s03", "s07"]].tolist() == ["unused", "unused"]
    out = tmp_path / "out"
    assert micro_train(table, metadata, out, "--split", split) == 0
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 2 and all("dropped 2 samples with no age value" in m for m in dropped)
    assert all("s03" in m and "s07" in m for m in dropped)
    assert sorted(read_split(out / "split.tsv").index) == sorted(labels[labels != "unused"].index)


def test_train_all_targets_missing(micro, tmp_path, capsys):
    table, _ = micro
    frame = micro_metadata().assign(age=np.nan)
    metadata = write_metadata(tmp_path / "empty.tsv", frame)
    out = tmp_path / "out"
    rc = micro_train(table, metadata, out)
    assert_failed(rc, capsys, "finetune", out, "'age'", "empty for every sample")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["finetune", "predict"])
def test_samples_without_asvs(tmp_path, capsys, trained, command):
    table = write_table(tmp_path / "table.biom", micro_table(empty=(4, 9)))
    metadata = write_metadata(tmp_path / "metadata.tsv", micro_metadata())
    out = tmp_path / "out"
    if command == "finetune":
        rc = micro_train(table, metadata, out)
    else:
        rc = aam("predict", "--model", trained / "model.pt", "--table", table, "--output-dir", out)
    assert_failed(rc, capsys, command, out, "2 samples have no ASVs", "s04")


def test_split_samples_without_asvs(tmp_path, capsys):
    table = write_table(tmp_path / "table.biom", micro_table(empty=(4,)))
    out = tmp_path / "split.tsv"
    rc = aam("split", "--table", table, "--output", out)
    assert_failed(rc, capsys, "split", tmp_path / "none", "1 samples have no ASVs", "s04")
    assert not out.exists()


def _edit_config(config: dict, how: str) -> dict | str:
    if how == "delete":
        return "delete"
    if how == "junk":
        return "not a config"
    edits = {
        "wider": {"embedding_dim": 32},
        "deeper": {"target_layers": 3},
        "unknown_key": {"colour": "blue"},
        "invalid": {"classifier": True},
    }
    return {**config, **edits[how]}


@pytest.mark.slow
@pytest.mark.parametrize("how", ["wider", "deeper", "unknown_key", "invalid", "junk", "delete"])
def test_predict_with_altered_model_config(demo, trained, tmp_path, capsys, how):
    state = torch.load(trained / "model.pt", weights_only=True)
    config = _edit_config(state["config"], how)
    if config == "delete":
        del state["config"]
    else:
        state["config"] = config
    altered = tmp_path / "model.pt"
    torch.save(state, altered)
    out = tmp_path / "out"
    assert_failed(predict(altered, demo, out), capsys, "predict", out, str(altered))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["encoder.pt", "checkpoints/latest.pt"])
def test_predict_with_a_file_that_is_not_a_model(demo, pretrained, tmp_path, capsys, name):
    out = tmp_path / "out"
    rc = predict(pretrained / name, demo, out)
    assert_failed(rc, capsys, "predict", out, "not a fine-tuned model")


def test_predict_with_unreadable_or_missing_model(demo, tmp_path, capsys):
    garbage = tmp_path / "garbage.pt"
    garbage.write_text("not a torch file")
    out = tmp_path / "out"
    assert_failed(predict(garbage, demo, out), capsys, "predict", out, "unreadable model file")
    assert_failed(predict(tmp_path / "nope.pt", demo, out), capsys, "predict", out, "not found")


def test_a_plain_pickle_model_is_one_line_without_a_library_warning(demo, tmp_path, capsys):
    """torch warns about a pickle it will refuse (protocol 4); the user sees only the error."""
    plain = tmp_path / "plain.pt"
    plain.write_bytes(pickle.dumps({"kind": "predictor"}, protocol=4))
    out = tmp_path / "out"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = predict(plain, demo, out)
    assert_failed(rc, capsys, "predict", out, str(plain), "unreadable model file")
    assert not caught, [str(w.message) for w in caught]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["wider", "unknown_key", "model_pt", "garbage"])
def test_train_with_bad_pretrained_encoder(demo, pretrained, trained, tmp_path, capsys, how):
    path = tmp_path / "encoder.pt"
    if how == "model_pt":
        path = trained / "model.pt"
    elif how == "garbage":
        path.write_text("not a torch file")
    else:
        state = torch.load(pretrained / "encoder.pt", weights_only=True)
        state["config"] = _edit_config(state["config"], how)
        torch.save(state, path)
    out = tmp_path / "out"
    rc = train(demo, out, "age", "--pretrained-encoder", path)
    assert_failed(rc, capsys, "finetune", out, str(path))


@pytest.mark.slow
def test_train_flag_contradicting_the_encoder(demo, pretrained, tmp_path, capsys):
    out = tmp_path / "out"
    encoder = pretrained / "encoder.pt"
    rc = train(demo, out, "age", "--pretrained-encoder", encoder, "--attention-heads", "4")
    assert_failed(rc, capsys, "finetune", out, "--attention-heads 4", "attention_heads=2")


def test_best_metric_not_measured(micro, tmp_path, capsys):
    table, metadata = micro
    out = tmp_path / "out"
    rc = micro_train(table, metadata, out, "--best-metric", "val_auc")
    assert_failed(rc, capsys, "finetune", out, "--best-metric val_auc", "val_mae")


@pytest.mark.slow
def test_train_rerun_with_another_target_does_not_resume(micro, tmp_path, capsys):
    table, _ = micro
    bmi = np.linspace(18.0, 35.0, 12)
    metadata = write_metadata(tmp_path / "two.tsv", micro_metadata().assign(bmi=bmi))
    out = tmp_path / "out"
    assert micro_train(table, metadata, out) == 0
    before = (out / "model.pt").read_bytes()
    rc = micro_train(table, metadata, out, target="bmi")
    line = error_line(capsys, "finetune")
    assert rc == 2 and "different config" in line and "target.column" in line
    assert (out / "model.pt").read_bytes() == before


def test_freeze_base_needs_an_encoder(micro, tmp_path, capsys):
    table, metadata = micro
    out = tmp_path / "out"
    rc = micro_train(table, metadata, out, "--freeze-base")
    assert_failed(rc, capsys, "finetune", out, "--freeze-base", "--pretrained-encoder")


@pytest.mark.slow
def test_metadata_missing_samples(micro, tmp_path, capsys):
    table, _ = micro
    metadata = write_metadata(tmp_path / "partial.tsv", micro_metadata().drop(["s02", "s05"]))
    out = tmp_path / "out"
    expected = [f"{metadata} lacks 2 ID(s)", "(s02, s05)", "--allow-missing-samples"]
    assert_failed(micro_train(table, metadata, out), capsys, "finetune", out, *expected)

    assert micro_train(table, metadata, out, "--allow-missing-samples") == 0
    assert len(read_split(out / "split.tsv")) == 10 and (out / "model.pt").is_file()

    # predict: the same check, and the same way out
    pred = tmp_path / "pred"
    inputs = ["--model", out / "model.pt", "--table", table, "--metadata", metadata]
    predict_args = ["predict", *inputs, "--output-dir", pred]
    capsys.readouterr()
    assert_failed(aam(*predict_args), capsys, "predict", pred, "lacks 2 ID(s)")
    assert aam(*predict_args, "--allow-missing-samples") == 0
    assert len(pd.read_csv(pred / "predictions.tsv", sep="\t")) == 10


def test_split_metadata_missing_samples(micro, tmp_path, capsys):
    table, _ = micro
    metadata = write_metadata(tmp_path / "partial.tsv", micro_metadata().drop(["s11"]))
    out = tmp_path / "split.tsv"
    rc = aam("split", "--table", table, "--metadata", metadata, "--output", out)
    expected = [f"{metadata} lacks 1 ID(s)", "(s11)", "--allow-missing-samples"]
    assert_failed(rc, capsys, "split", tmp_path / "none", *expected)
    assert not out.exists()
    flag = "--allow-missing-samples"
    assert aam("split", "--table", table, "--metadata", metadata, "--output", out, flag) == 0
    assert len(read_split(out)) == 12 and read_split(out)["s11"] == "unused"


def test_predict_empty_subset(micro, tmp_path, capsys):
    table, metadata = micro
    trained = tmp_path / "train"
    assert micro_train(table, metadata, trained) == 0  # --test-fraction 0: no test samples
    out = tmp_path / "out"
    inputs = ["--model", trained / "model.pt", "--table", table, "--split", trained / "split.tsv"]
    rc = aam("predict", *inputs, "--output-dir", out)
    assert_failed(rc, capsys, "predict", out, "no samples in split 'test'")


@pytest.mark.slow
def test_error_exit_status_of_the_real_command(tmp_path):
    """One process end to end: status 2 and the error as the last stderr line."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    table = write_table(tmp_path / "table.biom", micro_table())
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "aam",
            "predict",
            "--model",
            str(tmp_path / "missing.pt"),
            "--table",
            str(table),
            "--output-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("aam predict: error: ")
    assert "model not found" in proc.stderr and not out.exists()


# --------------------------------------------------------------------------- checkpoints, outputs


@pytest.mark.slow
def test_resume_falls_back_to_the_previous_checkpoint_and_keeps_it(micro, tmp_path, caplog):
    table, metadata = micro
    out = tmp_path / "out"
    assert micro_train(table, metadata, out, "--epochs", "2") == 0
    latest, previous = out / "checkpoints" / "latest.pt", out / "checkpoints" / "latest.prev.pt"
    corrupt = latest.read_bytes()[:100]
    latest.write_bytes(corrupt)
    caplog.set_level(logging.INFO)
    assert micro_train(table, metadata, out, "--epochs", "2") == 0  # epoch 2 again, from prev
    messages = [r.getMessage() for r in caplog.records]
    assert any(re.search(r"resumed from .*latest\.prev\.pt at epoch 2", m) for m in messages)
    assert torch.load(previous, weights_only=True)["epoch"] == 1  # the good file survived a save
    assert torch.load(latest, weights_only=True)["epoch"] == 2
    assert (latest.parent / "latest.pt.corrupt").read_bytes() == corrupt


def test_a_start_removes_temporary_files_of_killed_runs(micro, tmp_path):
    table, metadata = micro
    out = tmp_path / "out"
    checkpoints = out / "checkpoints"
    checkpoints.mkdir(parents=True)
    stale = [
        checkpoints / ".latest.pt.4242.tmp",
        checkpoints / ".best.pt.4242.tmp",
        out / ".model.pt.k2j_x9a1.tmp",
        out / ".history.tsv.abcdefgh.tmp",
    ]
    unrelated = [out / ".notes.txt.abcdefgh.tmp", out / "model.pt.tmp"]
    for path in stale + unrelated:
        path.write_bytes(b"partial")
    assert micro_train(table, metadata, out) == 0
    assert not [p for p in stale if p.exists()]
    assert all(p.read_bytes() == b"partial" for p in unrelated)


def test_output_dir_that_is_a_file_fails_before_training(micro, tmp_path, capsys):
    table, metadata = micro
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    checkpoints = tmp_path / "checkpoints"
    rc = micro_train(table, metadata, blocker, "--checkpoint-dir", checkpoints)
    assert_failed(rc, capsys, "finetune", checkpoints, str(blocker), "existing file")
    rc = micro_train(table, metadata, blocker / "out", "--checkpoint-dir", checkpoints)
    assert_failed(rc, capsys, "finetune", checkpoints, str(blocker / "out"), "Not a directory")
    assert not checkpoints.exists()  # no epoch was trained


def test_read_only_output_dir_fails_before_training(micro, tmp_path, capsys):
    table, metadata = micro
    with read_only_dir(tmp_path / "read-only") as out:
        rc = micro_train(table, metadata, out)
        assert_failed(rc, capsys, "finetune", out, str(out), "not writable")


def test_predict_with_a_truncated_model_file(micro, tmp_path, capsys):
    table, metadata = micro
    assert micro_train(table, metadata, tmp_path / "train") == 0
    truncated = tmp_path / "truncated.pt"
    data = (tmp_path / "train" / "model.pt").read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    out = tmp_path / "out"
    rc = aam("predict", "--model", truncated, "--table", table, "--output-dir", out)
    assert_failed(rc, capsys, "predict", out, str(truncated), "unreadable model file")


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00garbage\x00", b"a,b\n1,2\n"])
def test_plot_history_of_a_damaged_history(tmp_path, capsys, content):
    history = tmp_path / "history.tsv"
    history.write_bytes(content)
    out = tmp_path / "plots" / "history.png"
    rc = aam("plot-history", "--history", history, "--output", out)
    assert_failed(rc, capsys, "plot-history", out.parent, str(history))


def test_the_epoch_line_holds_the_few_numbers_that_matter():
    row = {"epoch": 1, "step": 5, "lr": 0.001, "train_loss": 1.5, "train_nuc_loss": 0.9}
    row |= {"val_loss": 1.7, "val_mae": 5.25, "val_r2": 0.1, "val_nuc_loss": 0.8}
    row |= {"samples_per_s": 31.6, "epoch_seconds": 9.14, "peak_memory_mb": 100.0}
    assert epoch_line(row, "val_r2") == (
        "train loss 1.5, val loss 1.7, val mae 5.25, val r2 0.1, 31.6 samples/s, 9.1 s "
        "(every column: history.tsv)"
    )
    del row["val_loss"], row["val_mae"], row["val_r2"]  # no validation samples
    assert epoch_line(row, "val_loss").startswith("train loss 1.5, 31.6 samples/s")
    row["device_busy"] = 0.934  # on a GPU: the share of the training window it computed
    assert epoch_line(row, "val_loss").endswith("9.1 s, GPU busy 93% (every column: history.tsv)")
    row["tflops"] = 0.0964  # achieved matmul TFLOP/s, on any device
    assert "9.1 s, 0.0964 TFLOP/s, GPU busy 93% (every" in epoch_line(row, "val_loss")
    row |= {"tflops": 412.3, "mfu": 0.4167}  # on a GPU of known peak, its share too
    assert "9.1 s, 412 TFLOP/s (42% MFU), GPU busy 93% (every" in epoch_line(row, "val_loss")


def test_history_figure_marks_the_chosen_epoch_and_the_mean_baseline(tmp_path, capsys):
    history = pd.DataFrame(
        {"epoch": [1, 2, 3], "train_loss": [3.0, 2.0, 1.5], "val_loss": [3.1, 2.2, 2.4]}
        | {"val_mae": [9.0, 7.0, 7.5]}
    )
    panels = [SERIES[0], SERIES[2]]  # the loss and the MAE
    summary = {"best_epoch": 2, "mean_baseline": {"val_mae": 8.25}}
    loss, mae = history_figure(history, panels, summary, "age", "years").axes
    assert mae.get_ylabel() == "MAE of age (years)" and loss.get_ylabel()  # every axis labelled
    for ax in (loss, mae):
        assert all(float(t).is_integer() for t in ax.get_xticks())  # whole epochs only
        assert [2, 2] in [list(line.get_xdata()) for line in ax.lines]  # the chosen epoch
    assert [8.25, 8.25] in [list(line.get_ydata()) for line in mae.lines]  # the mean's MAE
    assert [8.25, 8.25] not in [list(line.get_ydata()) for line in loss.lines]
    # through the command, and a damaged summary is one line naming it
    path = tmp_path / "history.tsv"
    history.to_csv(path, sep="\t", index=False)
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "plots" / "history.png"
    args = ["--history", path, "--summary", tmp_path / "summary.json", "--output", out]
    assert aam("plot-history", *args) == 0 and out.read_bytes()[:4] == b"\x89PNG"
    out.unlink()
    (tmp_path / "summary.json").write_text("{not json")
    rc = aam("plot-history", *args)
    assert_failed(rc, capsys, "plot-history", out.parent, "summary.json", "not a summary.json")


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00garbage\x00"])
def test_train_with_a_damaged_split_file(micro, tmp_path, capsys, content):
    table, metadata = micro
    split = tmp_path / "split.tsv"
    split.write_bytes(content)
    out = tmp_path / "out"
    rc = micro_train(table, metadata, out, "--split", split)
    assert_failed(rc, capsys, "finetune", out, str(split), "not a split table")


@pytest.mark.slow
def test_pretrain_with_a_token_budget_covers_every_sample(demo, tmp_path):
    out = tmp_path / "tokens"
    assert pretrain(demo, out, "--batch-tokens", "300", "--epochs", "2") == 0
    history = read_history(out / "history.tsv")
    assert np.isfinite(history["train_unifrac_loss"]).all() and (history["step"] > 0).all()
    state = torch.load(out / "encoder.pt", weights_only=True)
    assert state["train_config"]["batch_tokens"] == 300


def test_pretrain_rejects_a_non_positive_token_budget(demo, tmp_path, capsys):
    out = tmp_path / "out"
    rc = pretrain(demo, out, "--batch-tokens", "0")
    assert_failed(rc, capsys, "pretrain", out, "--batch-tokens 0")


@pytest.mark.slow
def test_pretrain_batch_size_auto_on_a_cpu_keeps_the_default(demo, tmp_path):
    out = tmp_path / "auto"
    assert pretrain(demo, out, "--batch-size", "auto") == 0
    state = torch.load(out / "encoder.pt", weights_only=True)
    assert state["train_config"]["batch_size"] == 8


def test_pretrain_rejects_a_batch_size_word_other_than_auto(demo, tmp_path, capsys):
    out = tmp_path / "out"
    rc = pretrain(demo, out, "--batch-size", "big")
    assert_failed(rc, capsys, "pretrain", out, "--batch-size big: ", "whole number or auto")


def test_metrics_lines_name_aam_and_say_undefined():
    from aam.analysis.prediction_metrics import metrics_lines

    metrics = {
        "n": 3,
        "target": "age",
        "model": {"mae": 1.23456, "r2": None},
        "mean_baseline": {"mae": 2.0, "r2": None},
        "intervals": {"model": {"mae": [1.0, 1.5], "r2": None}, "mean_baseline": {"mae": None}},
    }
    assert metrics_lines(metrics) == [
        "metrics of 3 samples (age), 95% bootstrap intervals:",
        "  AAM            mae 1.23 [1, 1.5], r2 undefined",
        "  training mean  mae 2, r2 undefined",
    ]
    assert metrics_lines({"n": 0, "target": "age", "no_metrics": "no truth"}) == []


@pytest.mark.slow
def test_importance_ranks_every_training_asv_by_aam_and_the_forest(
    demo, trained, tmp_path, monkeypatch
):
    from aam.analysis import importance_plot

    drawn = []  # the heatmap's words: its title names dataset and run, the target its unit
    save = importance_plot.save_figure
    monkeypatch.setattr(
        importance_plot,
        "save_figure",
        lambda fig, path: drawn.extend(t.get_text() for t in fig.findobj(Text)) or save(fig, path),
    )
    out = tmp_path / "importance"
    inputs = ["--model", trained / "model.pt", "--table", demo["table"]]
    inputs += ["--metadata", demo["metadata"], "--split", demo["split"]]
    args = [*inputs, "--output-dir", out, "--trees", "20", "--max-samples", "5", "--top", "4"]
    labels = ["--dataset", "demo", "--run", "tiny", "--target-unit", "years"]
    assert aam("importance", *args, *labels) == 0
    assert any(t.startswith("demo, run tiny: ASV importance: top 4") for t in drawn), drawn
    assert "age (years)" in drawn and not any("/" in t for t in drawn if "run tiny" in t)
    table = pd.read_csv(out / "importance.tsv", sep="\t")
    # every ASV of the training samples once, ranked by AAM
    split = read_split(demo["split"])
    counts = biom.load_table(str(demo["table"]))
    train = counts.filter(split.index[split == "train"], inplace=False)
    train_asvs = set(train.remove_empty(axis="observation").ids("observation"))
    assert set(table["asv"]) == train_asvs and table["asv"].is_unique
    assert table["aam_rank"].is_monotonic_increasing
    # AAM credits only ASVs present in the 5 explained test samples (the first 5 of the split)
    explained = [s for s in counts.ids() if split[s] == "test"][:5]
    present = set(
        counts.filter(explained, inplace=False).remove_empty(axis="observation").ids("observation")
    )
    credited = set(table.loc[table["aam_score"] > 0, "asv"])
    assert credited and credited <= present
    # the forest: at most 50 ASVs measured, the others 0
    scored = table[table["forest_scored"]]
    assert 0 < len(scored) <= 50 and (table.loc[~table["forest_scored"], "forest_score"] == 0).all()
    summary = json.loads((out / "importance.json").read_text())
    expected = scored["aam_score"].corr(scored["forest_score"], method="spearman")
    assert summary["spearman_aam_forest"] == pytest.approx(expected)
    assert summary["explained_test_samples"] == 5 and summary["asvs"] == len(table)
    assert (out / "importance.png").read_bytes()[:4] == b"\x89PNG"
    # the same inputs, the same scores (a fixed forest seed, AAM in eval mode)
    again = tmp_path / "again"
    assert (
        aam("importance", *inputs, "--output-dir", again, "--trees", "20", "--max-samples", "5")
        == 0
    )
    pd.testing.assert_frame_equal(pd.read_csv(again / "importance.tsv", sep="\t"), table)


@pytest.mark.slow
def test_a_checkpoint_made_before_the_code_counted_resumes_by_hand_and_restarts_in_the_workflow(
    demo, pretrained, caplog
):
    run = pretrained.parent / "pretrain-codeless"
    shutil.copytree(pretrained, run)
    latest = run / "checkpoints/latest.pt"
    saved = torch.load(latest, weights_only=True)
    del saved["config"]["code"]
    torch.save(saved, latest)
    caplog.set_level(logging.INFO)
    assert pretrain(demo, run, "--epochs", "2") == 0  # by hand: resumed, nothing retrained
    assert any(r.getMessage().startswith("resumed from") for r in caplog.records)
    assert "code" not in torch.load(latest, weights_only=True)["config"]  # not re-saved
    caplog.clear()
    assert pretrain(demo, run, "--epochs", "2", "--stale-checkpoints", "restart") == 0
    assert any("starting afresh" in r.getMessage() for r in caplog.records)
    assert "code" in torch.load(latest, weights_only=True)["config"]
