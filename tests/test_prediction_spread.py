"""How much each model's predictions vary beside the target (issue 72, item 0): metrics.json
``spread`` for a regression, ``near_constant`` below NEAR_CONSTANT of the target's SD, a warning
line on the landing page; the training median scored beside the mean."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_overview import cells, regression

from aam.analysis.overview import Page, RunMetrics, overview_html
from aam.analysis.prediction_metrics import score_predictions
from aam.analysis.spread import NEAR_CONSTANT, near_constant_notes, prediction_spread


def test_each_models_spread_stands_beside_the_targets_and_a_near_constant_one_is_marked():
    truth = np.array([10.0, 20, 30, 40, 50])
    target_sd = float(np.std(truth, ddof=1))  # 15.81: the sample SD
    models = {
        "model": 30 + 0.05 * (truth - 30),  # 5% of the target's spread
        "random_forest_baseline": 30 + 0.5 * (truth - 30),
        "edge_baseline": 30 + NEAR_CONSTANT * (truth - 30),  # exactly at the bound: not below
    }
    spread = prediction_spread(models, truth)
    assert spread["target_sd"] == pytest.approx(target_sd)
    assert spread["near_constant_below"] == NEAR_CONSTANT == 0.1
    model, forest, edge = (spread["models"][name] for name in models)
    assert model["prediction_sd"] == pytest.approx(0.05 * target_sd)
    assert model["sd_ratio"] == pytest.approx(0.05) and model["near_constant"] is True
    assert forest["sd_ratio"] == pytest.approx(0.5) and forest["near_constant"] is False
    assert edge["sd_ratio"] == pytest.approx(NEAR_CONSTANT)
    assert edge["near_constant"] is (edge["sd_ratio"] < NEAR_CONSTANT)
    json.dumps(spread, allow_nan=False)  # plain JSON: numbers, booleans, null


def test_what_is_undefined_is_null_never_nan():
    one = prediction_spread({"model": np.array([3.0])}, np.array([5.0]))
    assert one == {
        "target_sd": None,
        "near_constant_below": NEAR_CONSTANT,
        "models": {"model": {"prediction_sd": None, "sd_ratio": None, "near_constant": None}},
    }
    flat = prediction_spread({"model": np.array([1.0, 2.0])}, np.array([7.0, 7.0]))
    assert flat["target_sd"] == 0.0 and flat["models"]["model"]["prediction_sd"] > 0
    assert flat["models"]["model"]["sd_ratio"] is None  # a target without spread: no ratio
    assert flat["models"]["model"]["near_constant"] is None
    json.dumps([one, flat], allow_nan=False)


def _scored(models: dict, truth: list, classes: list | None = None) -> dict:
    """``aam predict``'s metrics.json content of ``models`` against ``truth``."""
    target = {"column": "age", "classes": classes or [], "mean": 0.0, "std": 1.0}
    ids = [f"s{k}" for k in range(len(truth))]
    return score_predictions(models, pd.Series(truth), target, Path("metadata.tsv"), ids)


def test_predict_scores_the_median_like_the_mean_and_spreads_only_the_models_that_vary():
    rng = np.random.default_rng(0)
    truth = rng.normal(40, 10, size=60)
    models = {
        "model": 40 + 0.02 * (truth - 40),  # near-constant
        "mean_baseline": np.full(60, 41.0),
        "median_baseline": np.full(60, 39.5),
        "random_forest_baseline": truth + rng.normal(0, 3, size=60),
    }
    metrics = _scored(models, list(truth))
    baselines = ["mean_baseline", "median_baseline", "random_forest_baseline"]
    assert set(metrics["intervals"]) == {"model", *baselines}
    assert set(metrics["differences"]) == set(baselines)  # paired, as the mean's
    mae = float(np.abs(truth - 39.5).mean())
    assert metrics["median_baseline"]["mae"] == pytest.approx(mae)
    low, high = metrics["intervals"]["median_baseline"]["mae"]
    assert low <= mae <= high
    difference = metrics["differences"]["median_baseline"]["mae"]["value"]
    assert difference == pytest.approx(metrics["model"]["mae"] - mae)
    # the constants are constant by design: only AAM and the forest have a spread
    spread = metrics["spread"]
    assert list(spread["models"]) == ["model", "random_forest_baseline"]
    assert spread["target_sd"] == pytest.approx(np.std(truth, ddof=1))
    assert spread["models"]["model"]["near_constant"] is True
    assert spread["models"]["random_forest_baseline"]["near_constant"] is False
    json.dumps(metrics, allow_nan=False)
    notes = near_constant_notes(metrics)
    assert len(notes) == 1 and notes[0].startswith("AAM is near-constant: its predictions' SD")
    assert "is 2.0% of the target's" in notes[0] and "on the 60 scored samples" in notes[0]


def test_a_classifier_has_no_spread_and_no_median_but_its_one_class_models_are_flagged():
    """A classifier's constant: a model whose most probable class is the same for every
    sample (however its probabilities vary); the majority class is one by design."""
    one = np.log(np.array([[0.3, 0.7], [0.4, 0.6], [0.1, 0.9]] * 2))
    both = np.log(np.array([[0.6, 0.4], [0.4, 0.6], [0.1, 0.9]] * 2))
    truth = ["a", "b"] * 3
    models = {"model": one, "mean_baseline": one, "random_forest_baseline": both}
    metrics = _scored(models, truth, classes=["a", "b"])
    assert "spread" not in metrics and "median_baseline" not in metrics
    assert metrics["one_class"] == {"model": "b"}
    (note,) = near_constant_notes(metrics)
    assert note.startswith("AAM predicts one class (b) for every one of the 6 scored samples")
    metrics = _scored({**models, "model": both}, truth, classes=["a", "b"])
    assert metrics["one_class"] == {} and near_constant_notes(metrics) == []


def test_the_landing_page_warns_beside_a_run_whose_model_is_near_constant():
    metrics = regression([-0.5, -0.9, -0.1])
    metrics["median_baseline"] = {"mae": 5.5, "rmse": 9.2, "r2": -0.05}
    metrics["intervals"]["median_baseline"] = {"mae": [4.5, 6.5]}
    metrics["differences"]["median_baseline"] = {"mae": {"value": -1.5, "interval": [-2, -1]}}
    quiet = overview_html(Page(runs=[(RunMetrics("steady", "demo", metrics), [])]))
    assert cells(quiet, "training median")[0] == "5.5 [4.5, 6.5]"
    assert cells(quiet, "AAM - training median")[0] == "-1.5 [-2, -1]"
    assert "near-constant" not in quiet  # a metrics.json without spread: nothing to say
    models = {
        "model": np.array([30.0, 30.1, 29.9]),
        "random_forest_baseline": np.array([12.0, 28, 52]),
    }
    metrics["spread"] = prediction_spread(models, np.array([10.0, 30.0, 50.0]))
    page = overview_html(Page(runs=[(RunMetrics("flat", "demo", metrics), [])]))
    run = page[page.index("<h2>run flat") :]
    warning = "<p class=warn>AAM is near-constant: its predictions&#x27; SD (0.1) is 0.5%"
    assert warning in run and "random forest is near-constant" not in run
    assert run.index(warning) < run.index("<table>")  # beside the run's verdict, above its table
