"""Nothing non-finite is reported as success: a diverging run exits 3 and keeps its last good
checkpoint, unscalable targets and unwritable outputs are refused before any work (exit 2),
and every JSON file aam writes is strict JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from test_cli_training import (
    MICRO,
    TINY,
    aam,
    assert_failed,
    error_line,
    micro_metadata,
    micro_table,
    write_metadata,
    write_table,
)

from aam.analysis import predict  # the predict stage: patched where it looks `load_study` up
from aam.commands import (
    doctor,  # patched where the command looks `diagnose` up
    plot_history,
)
from aam.diagnostics import golden
from aam.profiling import probe
from aam.training import losses, trainer
from aam.training import run as training_run
from aam.training.meters.events import EVENTS_DIR
from aam.training.trainer import TrainResult
from aam.workflow.provenance import write_provenance


def strict_json(path: Path):
    """``path`` parsed as JSON; NaN / Infinity (not JSON) fail the test."""

    def refuse(name: str):
        raise AssertionError(f"{path}: {name} is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def files(directory: Path) -> dict[Path, bytes]:
    """Every file's bytes but the TensorBoard events (a log: each attempt appends its own)."""
    return {
        p: p.read_bytes()
        for p in directory.rglob("*")
        if p.is_file() and EVENTS_DIR not in p.relative_to(directory).parts
    }


@pytest.fixture
def micro(tmp_path) -> tuple[Path, Path]:
    table = write_table(tmp_path / "table.biom", micro_table())
    return table, write_metadata(tmp_path / "metadata.tsv", micro_metadata())


@pytest.fixture(scope="module")
def trained_micro(tmp_path_factory) -> SimpleNamespace:
    """A model trained on the 12-sample table (its table, metadata and output directory)."""
    root = tmp_path_factory.mktemp("micro_model")
    table = write_table(root / "table.biom", micro_table())
    metadata = write_metadata(root / "metadata.tsv", micro_metadata())
    assert train(table, metadata, root / "out") == 0
    return SimpleNamespace(table=table, metadata=metadata, out=root / "out")


def train(table: Path, metadata: Path, out: Path, *extra: str | Path) -> int:
    inputs = ["--table", table, "--metadata", metadata, "--target-column", "age"]
    return aam("finetune", *inputs, "--output-dir", out, *MICRO, *extra)


def diverged(rc: int, capsys, command: str) -> str:
    """The single error line of a run that stopped on a non-finite value (exit 3)."""
    line = error_line(capsys, command)
    assert rc == 3, line
    return line


# --------------------------------------------------------------------------- training


@pytest.mark.slow
@pytest.mark.parametrize("clip", ["1", "0"])
def test_train_with_a_huge_learning_rate_exits_3(micro, tmp_path, capsys, clip):
    out = tmp_path / "out"
    flags = ["--lr", "1e30", "--max-grad-norm", clip, "--checkpoint-every-minutes", "1e-9"]
    line = diverged(train(*micro, out, *flags), capsys, "finetune")
    assert "at epoch 1, step" in line and "--lr (now 1e+30)" in line, line
    assert "--max-grad-norm" in line and "targets" in line, line
    assert not (out / "model.pt").exists() and not (out / "summary.json").exists()
    latest = out / "checkpoints" / "latest.pt"
    if latest.exists():  # saved before the divergence: never with non-finite weights
        weights = torch.load(latest, weights_only=True)["model"].values()
        assert all(torch.isfinite(w).all() for w in weights if w.is_floating_point())


@pytest.mark.slow
def test_pretrain_with_a_huge_learning_rate_exits_3(small_study, tmp_path, capsys):
    out = tmp_path / "out"
    inputs = ["--table", small_study / "table.biom", "--unifrac", small_study / "unifrac.h5"]
    rc = aam("pretrain", *inputs, "--output-dir", out, *TINY, "--lr", "1e30")
    line = diverged(rc, capsys, "pretrain")
    assert "at epoch 1, step" in line and "--lr" in line and "targets" not in line, line
    assert not (out / "encoder.pt").exists()


@pytest.mark.slow
def test_divergence_after_a_resume_keeps_the_last_good_files(micro, tmp_path, capsys, monkeypatch):
    """A 2-epoch run whose loss turns NaN after epoch 1 stops with epoch 1's checkpoints; run
    again, it resumes from them, diverges again and leaves them as they were."""
    real_loss, real_evaluate, validated = losses.regression_loss, trainer.evaluate, []

    def evaluate(*args, **kwargs):
        validated.append(1)
        return real_evaluate(*args, **kwargs)

    def loss(predicted, target, kind):
        nan = (predicted.float() * math.nan).mean()
        return nan if validated else real_loss(predicted, target, kind)

    monkeypatch.setattr(trainer, "evaluate", evaluate)
    monkeypatch.setattr(losses, "regression_loss", loss)
    out = tmp_path / "out"
    line = diverged(train(*micro, out, "--epochs", "2"), capsys, "finetune")
    assert "target_loss is nan at epoch 2, step" in line, line
    before = files(out)
    assert {out / "checkpoints" / "latest.pt", out / "checkpoints" / "best.pt"} <= set(before)
    line = diverged(train(*micro, out, "--epochs", "2"), capsys, "finetune")
    assert "target_loss is nan at epoch 2, step" in line, line
    assert files(out) == before  # latest.pt, best.pt untouched; no temporaries
    assert len(list((out / EVENTS_DIR / "train").iterdir())) == 2  # each attempt its own log


def test_non_finite_gradient_norm_exits_3(micro, tmp_path, capsys, monkeypatch):
    real = losses.regression_loss

    def infinite_gradient(predicted, target, kind):  # finite value, d sqrt(x)/dx at 0 is inf
        return real(predicted, target, kind) + (predicted - predicted.detach()).sqrt().sum()

    monkeypatch.setattr(losses, "regression_loss", infinite_gradient)
    out = tmp_path / "out"
    line = diverged(train(*micro, out), capsys, "finetune")
    assert "gradient norm is" in line and "at epoch 1, step 1;" in line, line
    assert not (out / "model.pt").exists()


def nan_validation(epochs: set[int], monkeypatch) -> None:
    """Make the validation loss NaN in ``epochs`` (1-based)."""
    real, calls = trainer.evaluate, []

    def evaluate(*args, **kwargs):
        calls.append(1)
        metrics = real(*args, **kwargs)
        return {**metrics, "loss": math.nan} if len(calls) in epochs else metrics

    monkeypatch.setattr(trainer, "evaluate", evaluate)


@pytest.mark.slow
def test_non_finite_validation_is_never_best(micro, tmp_path, monkeypatch):
    nan_validation({2}, monkeypatch)
    out = tmp_path / "out"
    assert train(*micro, out, "--epochs", "2", "--best-metric", "val_loss") == 0
    assert strict_json(out / "summary.json")["best_epoch"] == 1
    assert torch.load(out / "checkpoints" / "best.pt", weights_only=True)["row"]["epoch"] == 1


@pytest.mark.slow
def test_validation_non_finite_in_every_epoch_exits_3(micro, tmp_path, capsys, monkeypatch):
    nan_validation({1, 2}, monkeypatch)
    out = tmp_path / "out"
    line = diverged(
        train(*micro, out, "--epochs", "2", "--best-metric", "val_loss"), capsys, "finetune"
    )
    assert "validation val_loss was non-finite in every epoch" in line, line
    assert not (out / "model.pt").exists() and not (out / "checkpoints" / "best.pt").exists()


@pytest.mark.parametrize(
    ("ages", "expected"),
    [
        (np.resize([1.7e308, -1.7e308], 12), "too large to scale"),  # std overflows float64
        (np.linspace(1e39, 2e39, 12), "too large to scale"),  # beyond float32
        (np.full(12, 30.0), "one value (30)"),
    ],
)
def test_unscalable_targets_are_refused_before_training(micro, tmp_path, capsys, ages, expected):
    table, _ = micro
    metadata = write_metadata(tmp_path / "extreme.tsv", micro_metadata().assign(age=ages))
    out = tmp_path / "out"
    rc = train(table, metadata, out)
    assert_failed(rc, capsys, "finetune", out, str(metadata), "'age'", expected)


# --------------------------------------------------------------------------- prediction


def predict_into(trained_micro, model: Path, out: Path, metadata: Path) -> int:
    inputs = ["--model", model, "--table", trained_micro.table, "--metadata", metadata]
    return aam("predict", *inputs, "--output-dir", out, "--threads", "2")


@pytest.mark.slow
def test_predict_with_non_finite_weights_exits_3(trained_micro, tmp_path, capsys):
    state = torch.load(trained_micro.out / "model.pt", weights_only=True)
    state["model"] = {
        k: v.fill_(math.nan) if v.is_floating_point() else v for k, v in state["model"].items()
    }
    model = tmp_path / "nan.pt"
    torch.save(state, model)
    out = tmp_path / "out"
    rc = predict_into(trained_micro, model, out, trained_micro.metadata)
    line = diverged(rc, capsys, "predict")
    assert str(model) in line and "12 of 12 predictions are NaN or infinite" in line, line
    assert not out.exists() or not list(out.iterdir())


@pytest.mark.slow
def test_predict_truth_too_large_to_scale_is_bad_input_as_in_training(
    trained_micro, tmp_path, capsys
):
    """The values finetune refuses (exit 2) are refused as truth too: exit 2, not 3."""
    huge = np.resize([1.5e308, -1.5e308], 12)
    metadata = write_metadata(tmp_path / "huge.tsv", micro_metadata().assign(age=huge))
    out = tmp_path / "out"
    rc = predict_into(trained_micro, trained_micro.out / "model.pt", out, metadata)
    assert_failed(rc, capsys, "predict", out, str(metadata), "'age'", "too large to scale")
    rc = train(trained_micro.table, metadata, tmp_path / "train")
    assert_failed(rc, capsys, "finetune", tmp_path / "train", "too large to scale")


@pytest.mark.slow
def test_predict_undefined_r2_is_null_in_strict_json(trained_micro, tmp_path):
    metadata = write_metadata(tmp_path / "flat.tsv", micro_metadata().assign(age=30.0))
    out = tmp_path / "out"
    assert predict_into(trained_micro, trained_micro.out / "model.pt", out, metadata) == 0
    metrics = strict_json(out / "metrics.json")
    assert metrics["model"]["r2"] is None and math.isfinite(metrics["model"]["mae"])


# --------------------------------------------------------------------------- JSON


def test_every_json_writer_writes_strict_json(tmp_path, monkeypatch, capsys):
    nan, inf = math.nan, math.inf
    write_provenance(tmp_path / "provenance.json", {"x": nan})
    golden.write_report(
        {"passed": False, "rows": [{"max_abs": inf, "x": nan}]}, tmp_path / "golden.json"
    )
    result = probe.ProfileResult(None, {"peak": nan}, {"rows": [{"samples_per_s": inf}]})
    probe.write_results(result, tmp_path / "profile")
    split = pd.Series(["train"], index=pd.Index(["s1"], name="sample_id"), name="split")
    run = TrainResult({}, [{"epoch": 1, "val_r2": nan}], 1, {"val_r2": nan})
    training_run.write_outputs(
        tmp_path / "run",
        "m.pt",
        {},
        run,
        SimpleNamespace(split=split),
        {"mean_baseline": {"val_r2": inf}},
    )
    report = {
        "torch": "t",
        "rocm": None,
        "cuda": None,
        "device": "cpu",
        "device_name": "cpu",
        "arch": None,
        "backends": [{"backend": "math", "unmasked": nan, "masked": inf}],
        "compile": "ok",
        "recommendation": "r",
    }
    monkeypatch.setattr(doctor, "diagnose", lambda device: report)
    assert aam("doctor", "--device", "cpu", "--output", tmp_path / "doctor.json") == 0
    assert strict_json(tmp_path / "provenance.json") == {"x": None}
    assert strict_json(tmp_path / "golden.json")["rows"] == [{"max_abs": "inf", "x": "nan"}]
    assert strict_json(tmp_path / "profile" / "memory.json") == {"peak": None}
    assert strict_json(tmp_path / "profile" / "throughput.json")["rows"][0]["samples_per_s"] is None
    summary = strict_json(tmp_path / "run" / "summary.json")
    assert summary == {
        "best_epoch": 1,
        "best_metric": None,  # the result written has no validation: the last epoch
        "val_r2": None,
        "mean_baseline": {"val_r2": None},
    }
    assert strict_json(tmp_path / "doctor.json")["backends"][0]["masked"] is None


# --------------------------------------------------------------------------- output locations


def refuse_work(*args, **kwargs):
    raise AssertionError("the work started before the output location was checked")


@pytest.mark.parametrize(
    "command", ["pretrain", "finetune", "predict", "plot-history", "profile", "validate", "doctor"]
)
def test_output_under_a_regular_file_fails_before_any_work(
    command, trained_micro, tmp_path, capsys, monkeypatch
):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = blocker / "out"
    table, metadata, model = trained_micro.table, trained_micro.metadata, trained_micro.out
    work = {
        "pretrain": (training_run, "load_study"),
        "finetune": (training_run, "load_study"),
        "predict": (predict, "load_study"),
        "plot-history": (plot_history, "read_history"),
        "profile": (probe, "profile_training"),
        "validate": (golden, "generate_golden"),
        "doctor": (doctor, "diagnose"),
    }
    monkeypatch.setattr(*work[command], refuse_work)
    argv = {
        "pretrain": ["--table", table, "--unifrac", metadata, "--output-dir", out, *MICRO],
        "finetune": [
            "--table",
            table,
            "--metadata",
            metadata,
            "--target-column",
            "age",
            "--output-dir",
            out,
            *MICRO,
        ],
        "predict": ["--model", model / "model.pt", "--table", table, "--output-dir", out],
        "plot-history": ["--history", model / "history.tsv", "--output", out / "plot.png"],
        "profile": ["--table", table, "--unifrac", metadata, "--output-dir", out],
        "validate": ["generate", "--output-dir", out],
        "doctor": ["--device", "cpu", "--output", out / "doctor.json"],
    }
    rc = aam(command, *argv[command])
    line = error_line(capsys, command)
    assert rc == 2 and str(out) in line, line
