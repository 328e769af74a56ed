"""`sweep:` grids: expanded into runs before any job, validated, and ranked on validation data
only (workflow/scripts/leaderboard.py, imported by path)."""

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml
from checkout import REPO, dry_run, job_counts
from planning import plan_error

from aam.commands.run_options_schema import SCHEMA_FILE
from aam.workflow.config import expand_sweeps, run_option_names

OPTIONS = run_option_names(SCHEMA_FILE)
BASE = {"dataset": "demo", "model": {"embedding_dim": 16}, "finetune": {"epochs": 1}}


def test_every_grid_point_is_a_run_and_finetune_grids_pretrain_once():
    grid = {"finetune.lr": [0.1, 0.2], "model.dropout": [0.0, 0.3], "finetune.epochs": [3]}
    runs, sweeps = expand_sweeps({"a": {**BASE, "sweep": grid}, "b": BASE}, OPTIONS)
    assert list(runs) == ["a_s1", "a_s2", "a_s3", "a_s4", "b"]
    assert sweeps["a"]["a_s2"] == {"finetune.lr": 0.1, "model.dropout": 0.3, "finetune.epochs": 3}
    assert runs["a_s3"]["finetune"] == {"epochs": 3, "lr": 0.2}
    assert runs["a_s3"]["model"] == {"embedding_dim": 16, "dropout": 0.0}
    assert "sweep" not in runs["a_s1"] and runs["b"] == BASE
    # The model differs between dropout 0.0 and 0.3: two encoders, each shared over lr.
    assert [runs[f"a_s{k}"]["encoder_from"] for k in range(1, 5)] == [None, None, "a_s1", "a_s2"]
    assert BASE["finetune"] == {"epochs": 1}  # the config itself is not changed


def test_a_sweep_member_keeps_a_given_encoder():
    spec = {**BASE, "encoder_from": "other", "sweep": {"finetune.lr": [0.1, 0.2]}}
    runs, _ = expand_sweeps({"a": spec}, OPTIONS)
    assert {run["encoder_from"] for run in runs.values()} == {"other"}


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (
            {"finetune.lrr": [0.1]},
            "runs.a.sweep.finetune.lrr: not a run option (did you mean finetune.lr?)",
        ),
        ({"lr": [0.1]}, "runs.a.sweep.lr: not a run option"),
        ({"model.epochs": [1]}, "runs.a.sweep.model.epochs: not a run option"),
    ],
)
def test_an_unknown_option_is_one_line(grid, message):
    with pytest.raises(ValueError) as err:
        expand_sweeps({"a": {**BASE, "sweep": grid}}, OPTIONS)
    assert str(err.value).startswith(f"config {message}") and "\n" not in str(err.value)


def test_a_member_name_that_is_a_run_is_refused():
    with pytest.raises(ValueError, match="a_s1 is already a run"):
        expand_sweeps({"a": {**BASE, "sweep": {"finetune.lr": [1.0]}}, "a_s1": BASE}, OPTIONS)


def _config(tmp_path, sweep) -> Path:
    """The test config with ``sweep`` on its run, writing under ``tmp_path/work``."""
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config["runs"]["tiny"]["sweep"] = sweep
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.workflow
def test_a_sweep_in_the_dag_pretrains_once_and_adds_the_leaderboard(tmp_path, checkout_copy):
    sweep = {"finetune.lr": [0.001, 0.0003], "finetune.epochs": [1, 2]}
    run = dry_run(checkout_copy, _config(tmp_path, sweep))
    assert run.returncode == 0, run.stderr[-2000:]
    counts = job_counts(run.stdout)
    assert counts["pretrain"] == 1 and counts["finetune"] == 4 and counts["leaderboard"] == 1


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ({"finetune.lr": []}, "config runs.tiny.sweep['finetune.lr']: [] should be non-empty"),
        (
            {"finetune.lr": ["fast"]},
            "config runs.tiny.sweep.finetune.lr: 'fast' is not of type 'number'",
        ),
        ({"finetune.bogus": [1]}, "config runs.tiny.sweep.finetune.bogus: not a run option"),
    ],
    ids=["empty-grid", "wrong-type", "unknown-option"],
)
def test_a_bad_sweep_stops_before_any_job(tmp_path, sweep, message):
    assert plan_error(_config(tmp_path, sweep)).startswith(message)


@pytest.fixture(scope="module")
def board():
    path = REPO / "workflow/scripts/leaderboard.py"
    spec = importlib.util.spec_from_file_location("workflow_leaderboard", path)
    module = importlib.util.module_from_spec(spec)
    dont_write, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont_write
    return module


def test_runs_are_ranked_on_validation_and_never_on_test(board):
    sweeps = {
        "a": {
            "a_s1": {"finetune.lr": 0.1},
            "a_s2": {"finetune.lr": 0.2},
            "a_s3": {"finetune.lr": 0.3},
        }
    }
    summaries = {"a_s1": {"val_mae": 5.0}, "a_s2": {"val_mae": 4.0}, "a_s3": {"val_mae": None}}
    # a_s1 has the best test MAE, but validation chooses a_s2.
    metrics = {"a_s1": {"model": {"mae": 1.0}}, "a_s2": {"model": {"mae": 9.0}}, "a_s3": {}}
    header, rows = board.leaderboard(sweeps, summaries, metrics)
    assert header == [
        "sweep",
        "rank",
        "best",
        "run",
        "finetune.lr",
        "val_metric",
        "val_value",
        "test_value",
    ]
    assert rows == [
        ["a", "1", "yes", "a_s2", "0.2", "val_mae", "4", "9"],
        ["a", "2", "", "a_s1", "0.1", "val_mae", "5", "1"],
        ["a", "3", "", "a_s3", "0.3", "val_mae", "NA", "NA"],
    ]


def test_classifier_sweeps_rank_by_higher_accuracy(board):
    sweeps = {"c": {"c_s1": {"model.dropout": 0.0}, "c_s2": {"model.dropout": 0.3}}}
    summaries = {"c_s1": {"val_accuracy": 0.6}, "c_s2": {"val_accuracy": 0.8}}
    _, rows = board.leaderboard(sweeps, summaries, {"c_s1": {}, "c_s2": {}})
    assert [row[3] for row in rows] == ["c_s2", "c_s1"] and rows[0][2] == "yes"
