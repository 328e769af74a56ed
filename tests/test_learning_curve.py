"""Learning curves: nested learning-curve splits (`aam split --train-fraction`), the points
expanded from a run's `learning_curve:` before any job, bad settings stopped in one line, and
the table and plot (`aam learning-curve`). The real DAG run of a learning curve is in
test_workflow_extended.py (fixture `extended`)."""

import json
import logging
import re

import numpy as np
import pandas as pd
import pytest
import yaml
from checkout import REPO, dry_run, job_counts
from hypothesis import given, settings
from hypothesis import strategies as st
from planning import planned
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from aam.analysis.learning_curve import curve_table, per_doubling
from aam.cli import main
from aam.data.split import UNUSED, make_split, nested_split, read_split, write_split
from aam.errors import InputError
from aam.workflow.config import config_error_line, expand_learning_curves
from aam.workflow.plan import SPLIT_PART

BASE = {"dataset": "demo", "predict_on": ["other"]}


def _split(n: int, seed: int = 0) -> pd.Series:
    return make_split(
        [f"s{i:03d}" for i in range(n)], val_fraction=0.1, test_fraction=0.2, seed=seed
    )


# --- nested splits ----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(60, 300),
    fractions=st.lists(st.floats(0.1, 1.0), min_size=2, max_size=2, unique=True).map(sorted),
    seed=st.integers(0, 2**32 - 1),
)
def test_smaller_fractions_keep_subsets_and_the_test_samples_stay(n, fractions, seed):
    split = _split(n, seed % 1000)
    small, large = (nested_split(split, fraction=f, seed=seed) for f in fractions)
    for label in ("train", "val"):
        whole = set(split.index[split == label])
        kept_small, kept_large = (set(s.index[s == label]) for s in (small, large))
        assert kept_small <= kept_large <= whole
        assert len(kept_small) == round(fractions[0] * len(whole))
    for nested in (small, large):
        assert (nested[split == "test"] == "test").all()
        assert set(nested[split != "test"]) <= {"train", "val", UNUSED}
        assert list(nested.index) == list(split.index)


def test_nested_splits_are_seeded():
    split = _split(200)
    first, again = (nested_split(split, fraction=0.3, seed=5) for _ in range(2))
    assert first.equals(again)
    assert not first.equals(nested_split(split, fraction=0.3, seed=6))


@pytest.mark.parametrize(
    ("fraction", "message"),
    [
        (0.0, "--train-fraction 0.0: must be in (0, 1]"),
        (1.5, "--train-fraction 1.5: must be in (0, 1]"),
        (0.01, "--train-fraction 0.01: keeps 0 of the 14 train samples; training needs at least 2"),
    ],
    ids=["zero", "above-one", "too-few"],
)
def test_an_impossible_fraction_is_one_line(fraction, message):
    with pytest.raises(InputError) as err:
        nested_split(_split(20), fraction=fraction, seed=1)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_aam_split_writes_a_point_that_every_command_reads(tmp_path, demo_dir):
    inputs = ["--table", str(demo_dir / "table.biom"), "--metadata", str(demo_dir / "metadata.tsv")]
    inputs += ["--target-column", "age"]
    assert main(["split", *inputs, "--output", str(tmp_path / "split.tsv")]) == 0
    point = tmp_path / "lc/0.25.split.tsv"
    argv = ["split", *inputs, "--from-file", str(tmp_path / "split.tsv"), "--train-fraction"]
    assert main([*argv, "0.25", "--seed", "3", "--output", str(point)]) == 0
    whole, nested = read_split(tmp_path / "split.tsv"), read_split(point)
    assert nested.equals(nested_split(whole, fraction=0.25, seed=3))
    assert (nested == UNUSED).sum() == round(0.75 * (whole == "train").sum()) + round(
        0.75 * (whole == "val").sum()
    )


def test_a_fraction_without_a_split_file_is_one_line(tmp_path, demo_dir, capsys):
    argv = ["split", "--table", str(demo_dir / "table.biom"), "--output", str(tmp_path / "s.tsv")]
    assert main([*argv, "--train-fraction", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "aam split: error: --train-fraction: needs --from-file, the split whose samples it keeps"
    )
    assert not (tmp_path / "s.tsv").exists()


# --- the points of a run ----------------------------------------------------------------------


def test_each_fraction_is_a_run_beside_the_run_itself():
    runs = {
        "a": {**BASE, "learning_curve": {"fractions": [0.5, 0.1]}},
        "b": {**BASE, "learning_curve": {"fractions": [0.2], "seed": 3, "pretrain": "shared"}},
        "c": BASE,
    }
    expanded, curves = expand_learning_curves(runs, default_seed=42)
    assert list(expanded) == ["a", "a_lc1", "a_lc2", "b", "b_lc1", "c"]
    assert curves["a"] == {
        "dataset": "demo",
        "seed": 42,
        "pretrain": "per_point",
        "fractions": [0.1, 0.5],
        "points": {"a_lc1": 0.1, "a_lc2": 0.5},
    }
    assert curves["b"]["seed"] == 3 and curves["b"]["points"] == {"b_lc1": 0.2}
    # per_point: each point pretrains its own encoder; shared: the run's serves its points
    assert [expanded[r].get("encoder_from") for r in ("a_lc1", "a_lc2", "b_lc1")] == [
        None,
        None,
        "b",
    ]
    # the run keeps its other datasets to predict; its points predict none
    assert expanded["a"]["predict_on"] == ["other"] and expanded["a_lc1"]["predict_on"] == []
    assert "learning_curve" not in expanded["a"] and expanded["c"] == BASE


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        (
            {"a": {**BASE, "learning_curve": {"fractions": [0.5]}, "cv": {"folds": 2}}},
            "config runs.a.cv: not with learning_curve",
        ),
        (
            {"a": {**BASE, "learning_curve": {"fractions": [0.5]}, "sweep": {"finetune.lr": [1]}}},
            "config runs.a.sweep: not with learning_curve",
        ),
        (
            {"a": {**BASE, "learning_curve": {"fractions": [0.5]}, "encoder_from": "b"}, "b": BASE},
            "config runs.a.encoder_from: not with learning_curve",
        ),
        (
            {"a": {**BASE, "learning_curve": {"fractions": [0.5]}}, "a_lc1": BASE},
            "member a_lc1 is already a run",
        ),
    ],
    ids=["cv", "sweep", "encoder-from", "member-name-taken"],
)
def test_a_curve_that_cannot_be_expanded_is_one_line(runs, message):
    with pytest.raises(ValueError) as err:
        expand_learning_curves(runs, default_seed=42)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("curve", "message"),
    [
        ({"fractions": [1.0]}, "config runs.tiny.learning_curve.fractions[0]: 1.0 is greater than"),
        ({"fractions": [0]}, "config runs.tiny.learning_curve.fractions[0]: 0 is less than"),
        ({"fractions": []}, "config runs.tiny.learning_curve.fractions: [] should be non-empty"),
        ({"fractions": [0.5], "pretrain": "all"}, "config runs.tiny.learning_curve.pretrain"),
        ({"seed": 2}, "config runs.tiny.learning_curve: 'fractions' is a required property"),
    ],
    ids=["one", "zero", "empty", "pretrain", "no-fractions"],
)
def test_the_schema_names_a_bad_learning_curve_key(curve, message):
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["runs"]["tiny"]["learning_curve"] = curve
    with pytest.raises(WorkflowError) as err:
        validate(config, str(REPO / "workflow/schemas/config.schema.yaml"))
    assert config_error_line(err.value).startswith(message), config_error_line(err.value)


def _curve_config(tmp_path, **curve) -> object:
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config["runs"]["tiny"]["learning_curve"] = {"fractions": [0.5, 0.25], **curve}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_plan_gives_each_point_its_split_and_no_importance(tmp_path):
    scheme = planned(_curve_config(tmp_path, seed=7))
    assert scheme.curves["tiny"]["points"] == {"tiny_lc1": 0.25, "tiny_lc2": 0.5}
    assert scheme.split_part("tiny_lc1") == "lc/7/0.25" and scheme.split_part("tiny") is None
    assert re.fullmatch(SPLIT_PART, scheme.split_part("tiny_lc1"))  # the {part} wildcard's form
    assert scheme.importance_runs == ["tiny"]
    assert scheme.pretraining_runs == ["tiny", "tiny_lc1", "tiny_lc2"]


@pytest.mark.workflow
@pytest.mark.parametrize("pretrain", ["per_point", "shared"])
def test_a_curve_adds_a_split_baselines_and_training_per_point(tmp_path, checkout_copy, pretrain):
    run = dry_run(checkout_copy, _curve_config(tmp_path, pretrain=pretrain), "--printshellcmds")
    assert run.returncode == 0, run.stderr[-2000:]
    counts = job_counts(run.stdout)
    assert counts["learning_curve_split"] == counts["subset_baselines"] == 2
    assert counts["finetune"] == counts["predict"] == 3 and counts["learning_curve"] == 1
    assert counts["pretrain"] == (3 if pretrain == "per_point" else 1)
    work = tmp_path / "work"
    for k, fraction in ((1, "0.25"), (2, "0.5")):
        point = f"--split {work}/data/demo/lc/42/{fraction}.split.tsv"
        finetune = [ln for ln in run.stdout.splitlines() if f"runs/tiny_lc{k}/finetune" in ln]
        assert any(point in line and " finetune --table" in line for line in finetune)
    curve = next(ln for ln in run.stdout.splitlines() if " learning-curve " in ln)
    assert "--fractions 0.25 0.5 1 " in curve
    assert (
        f"lc/42/0.25.split.tsv {work}/data/demo/lc/42/0.5.split.tsv {work}/data/demo/split.tsv"
        in curve
    )


# --- the table --------------------------------------------------------------------------------


def _metrics(n: int, model: float, forest: float) -> dict:
    parts = {
        "model": {"mae": model, "r2": 0.1},
        "random_forest_baseline": {"mae": forest, "r2": 0.2},
    }
    intervals = {
        name: {metric: [value - 1, value + 1] for metric, value in part.items()}
        for name, part in parts.items()
    }
    return {"n": n, "target": "age", **parts, "intervals": intervals}


def _points(tmp_path, contents, fractions=(0.5, 1.0)):
    whole = _split(100)
    splits, files = [], []
    for fraction, content in zip(fractions, contents, strict=True):
        path = tmp_path / f"{fraction}.split.tsv"
        write_split(
            path, whole if fraction == 1.0 else nested_split(whole, fraction=fraction, seed=1)
        )
        splits.append(path)
        files.append(tmp_path / f"{fraction}.json")
        files[-1].write_text(json.dumps(content))
    return list(fractions), splits, files


def test_the_table_has_a_row_per_point_with_intervals(tmp_path):
    fractions, splits, files = _points(tmp_path, [_metrics(20, 7.0, 6.0), _metrics(20, 5.0, 5.5)])
    table = curve_table(fractions[::-1], splits[::-1], files[::-1])  # sorted by fraction
    assert list(table.columns[:4]) == ["fraction", "n_train", "n_val", "n_test"]
    assert list(table["fraction"]) == [0.5, 1.0] and list(table["n_train"]) == [35, 70]
    assert list(table["n_val"]) == [5, 10] and list(table["n_test"]) == [20, 20]
    assert list(table["model_mae"]) == [7.0, 5.0] and list(table["model_mae_low"]) == [6.0, 4.0]
    assert list(table["random_forest_baseline_mae_high"]) == [7.0, 6.5]


def test_aam_learning_curve_writes_the_table_and_the_plot(tmp_path, capsys, caplog):
    fractions, splits, files = _points(tmp_path, [_metrics(20, 7.0, 6.0), _metrics(20, 5.0, 5.5)])
    out, plot = tmp_path / "lc/run.tsv", tmp_path / "lc/run.png"
    argv = ["learning-curve", "--fractions", *map(str, fractions), "--splits", *map(str, splits)]
    argv += ["--metrics", *map(str, files), "--output", str(out), "--plot", str(plot)]
    with caplog.at_level(logging.INFO):
        assert main([*argv, "--target-column", "age"]) == 0
    table = pd.read_csv(out, sep="\t")
    assert list(table["model_mae"]) == [7.0, 5.0]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "70 training samples (1): AAM MAE 5 [4, 6]" in caplog.text
    # 35 -> 70 training samples: one doubling, MAE 7 -> 5 (AAM), 6 -> 5.5 (forest)
    assert "per doubling of the training samples" in caplog.text
    assert "AAM -2, random forest -0.5" in caplog.text
    files[0].write_text(json.dumps(_metrics(20, float("nan"), 6.0)))  # JSON's NaN token
    out.unlink()
    plot.unlink()
    assert main([*argv, "--target-column", "age"]) == 2
    err = capsys.readouterr().err.strip()
    assert "model mae is nan, not a finite number" in err and len(err.splitlines()) == 1
    assert not out.exists() and not plot.exists()


def test_points_tested_on_other_samples_are_one_line(tmp_path):
    fractions, splits, files = _points(tmp_path, [_metrics(20, 7.0, 6.0), _metrics(20, 5.0, 5.5)])
    write_split(splits[0], _split(100, seed=9))  # another split's test samples
    with pytest.raises(InputError, match="the points' test samples differ"):
        curve_table(fractions, splits, files)


def test_points_with_other_models_are_one_line(tmp_path):
    other = _metrics(20, 5.0, 5.5)
    del other["random_forest_baseline"], other["intervals"]["random_forest_baseline"]
    fractions, splits, files = _points(tmp_path, [_metrics(20, 7.0, 6.0), other])
    with pytest.raises(InputError, match="the points' models or metrics differ"):
        curve_table(fractions, splits, files)
    with pytest.raises(InputError, match="at least 2"):
        curve_table(fractions[:1], splits[:1], files[:1])
    assert np.isfinite(curve_table(fractions, splits, [files[0]] * 2)["model_mae"]).all()


def test_the_slope_per_doubling_is_a_least_squares_fit_on_log2_of_the_size():
    table = pd.DataFrame(
        {
            "fraction": [0.25, 0.5, 1.0],
            "n_train": [100, 200, 400],
            "n_val": [10, 20, 40],
            "n_test": [50, 50, 50],
            "model_mae": [9.0, 8.0, 6.0],
            "random_forest_baseline_mae": [5.0, 5.0, 5.0],
            "mean_baseline_mae": [7.0, np.nan, 7.2],
        }
    )
    slopes = per_doubling(table, "mae")
    assert slopes["model"] == pytest.approx(-1.5)  # through (0, 9), (1, 8), (2, 6)
    assert slopes["random_forest_baseline"] == pytest.approx(0.0)
    assert slopes["mean_baseline"] == pytest.approx(0.1)  # the undefined point left out
