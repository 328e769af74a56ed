"""workflow/scripts/summary.py: the cross-run summary table of the report (imported by path)."""

import csv
import importlib.util
import json
import sys

import pytest
from checkout import REPO


@pytest.fixture(scope="module")
def summary():
    path = REPO / "workflow/scripts/summary.py"
    spec = importlib.util.spec_from_file_location("workflow_summary", path)
    module = importlib.util.module_from_spec(spec)
    dont_write, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ there
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont_write
    return module


REGRESSION = {
    "n": 12,
    "target": "age",
    "model": {"mae": 3.25, "rmse": 4.5, "r2": 0.123456789},
    "mean_baseline": {"mae": 5.0, "rmse": 6.0, "r2": None},
    "baseline_note": "predicts the training-set mean for every sample",
}
CLASSIFIER = {"n": 7, "model": {"accuracy": 0.75, "f1": 0.5}}


def test_model_metrics_stand_beside_the_mean_baseline(summary):
    runs = [{"run": "tiny", "dataset": "demo", "target": "age", "metrics": REGRESSION}]
    header, rows = summary.summary_table(runs)
    assert header[:5] == ["run", "dataset", "target", "target_unit", "n"]
    assert header[5:] == [
        "AAM_mae",
        "mean_baseline_mae",
        "AAM_rmse",
        "mean_baseline_rmse",
        "AAM_r2",
        "mean_baseline_r2",
    ]
    assert rows == [["tiny", "demo", "age", "NA", "12", "3.25", "5", "4.5", "6", "0.123457", "NA"]]


def test_the_median_baseline_stands_beside_the_mean(summary):
    """A regression's training median (metrics.json ``median_baseline``) gets its columns
    after the mean's; a run without it (a classifier, an older run) NA."""
    median = {**REGRESSION, "median_baseline": {"mae": 4.5, "rmse": 6.5, "r2": -0.1}}
    runs = [
        {"run": "a", "dataset": "demo", "target": "age", "metrics": median},
        {"run": "b", "dataset": "demo", "target": "age", "metrics": REGRESSION},
    ]
    header, rows = summary.summary_table(runs)
    assert header[5:8] == ["AAM_mae", "mean_baseline_mae", "median_baseline_mae"]
    assert [row[5:8] for row in rows] == [["3.25", "5", "4.5"], ["3.25", "5", "NA"]]


def test_each_value_is_followed_by_its_interval_where_a_run_has_one(summary):
    """metrics.json ``intervals`` become ``_low``/``_high`` columns (issue 41: point estimates
    only); a run without them gets NA there."""
    with_intervals = {
        **REGRESSION,
        "intervals": {"model": {"mae": [2.5, 4.0]}, "mean_baseline": {"mae": [4.5, 5.5]}},
    }
    runs = [
        {"run": "a", "dataset": "demo", "target": "age", "metrics": with_intervals},
        {"run": "b", "dataset": "demo", "target": "age", "metrics": REGRESSION},
    ]
    header, rows = summary.summary_table(runs)
    assert header[5:11] == [
        "AAM_mae",
        "AAM_mae_low",
        "AAM_mae_high",
        "mean_baseline_mae",
        "mean_baseline_mae_low",
        "mean_baseline_mae_high",
    ]
    assert header[11:] == ["AAM_rmse", "mean_baseline_rmse", "AAM_r2", "mean_baseline_r2"]
    assert rows[0][5:11] == ["3.25", "2.5", "4", "5", "4.5", "5.5"]
    assert rows[1][5:11] == ["3.25", "NA", "NA", "5", "NA", "NA"]


def test_runs_of_different_kinds_share_one_table(summary):
    runs = [
        {"run": "a", "dataset": "demo", "target": "age", "metrics": REGRESSION},
        {"run": "b", "dataset": "demo", "target": "sex", "metrics": CLASSIFIER},
    ]
    header, rows = summary.summary_table(runs)
    assert header[5:] == [
        "AAM_mae",
        "mean_baseline_mae",
        "AAM_rmse",
        "mean_baseline_rmse",
        "AAM_r2",
        "mean_baseline_r2",
        "AAM_accuracy",
        "AAM_f1",
    ]
    assert rows[0][-2:] == ["NA", "NA"]
    assert rows[1] == ["b", "demo", "sex", "NA", "7", *["NA"] * 6, "0.75", "0.5"]


def test_write_summary_reads_metrics_files_into_one_tsv(summary, tmp_path):
    hostile = "host age $(touch x) `touch x`; 'q\"\t"
    paths = []
    for name, metrics in (("a", REGRESSION), ("b", CLASSIFIER)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(metrics))
    runs = [
        {"run": "a", "dataset": "demo", "target": hostile},
        {"run": "b", "dataset": "d2", "target": "sex"},
    ]
    output = tmp_path / "summary.tsv"
    assert summary.write_summary(runs, paths, output) == 2
    with output.open(newline="") as handle:
        table = list(csv.DictReader(handle, delimiter="\t"))
    assert [row["run"] for row in table] == ["a", "b"]
    assert table[0]["target"] == hostile and table[0]["mean_baseline_mae"] == "5"
    assert table[1]["AAM_accuracy"] == "0.75" and table[1]["dataset"] == "d2"
    with pytest.raises(ValueError, match="2 runs but 1 metrics files"):
        summary.write_summary(runs, paths[:1], output)


def test_headers_are_names_without_spaces_and_each_row_gives_its_unit(summary):
    """Issue 62: every header a plain name (no space, no unit: tools read them as column
    names); the unit of MAE and RMSE is each row's target_unit."""
    years = {"run": "a", "dataset": "demo", "target": "age", "target_unit": "years"}
    sex = {"run": "c", "dataset": "d2", "target": "sex", "metrics": CLASSIFIER}
    months = {**years, "run": "b", "target_unit": "months", "metrics": REGRESSION}
    header, rows = summary.summary_table([{**years, "metrics": REGRESSION}, sex, months])
    assert header[5:9] == ["AAM_mae", "mean_baseline_mae", "AAM_rmse", "mean_baseline_rmse"]
    assert all(" " not in name and "(" not in name for name in header)
    assert "AAM_r2" in header and "AAM_accuracy" in header
    assert [row[3] for row in rows] == ["years", "NA", "months"]
