"""Baselines fitted on the training samples (`aam baselines`), the AUC and bootstrap intervals
that metrics.json reports for every model."""

import re

import numpy as np
import pandas as pd
import pytest
import torch
from checkout import REPO
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score
from test_cli_training import aam, assert_failed, demo  # noqa: F401  (module fixture)

from aam.analysis.baselines import fit_predict, relative_abundances
from aam.analysis.prediction_tables import read_model_predictions
from aam.data.samples import SampleSet
from aam.data.split import read_split
from aam.training.bootstrap import (
    BOOTSTRAP_RESAMPLES,
    bootstrap_draws,
    bootstrap_intervals,
    paired_differences,
)
from aam.training.inputs.study import Study
from aam.training.metrics import classification_metrics, macro_auc


def synthetic_study(n: int = 120, n_asvs: int = 6, classes: bool = False, seed: int = 0) -> Study:
    """Every sample has every ASV; the target grows with ASV 0's relative abundance."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 100, size=(n, n_asvs)).astype(np.float32)
    share = counts[:, 0] / counts.sum(1)
    samples = SampleSet(
        sample_ids=[f"s{i}" for i in range(n)],
        asv_ids=[f"asv{k}" for k in range(n_asvs)],
        tokens=np.zeros((n_asvs, 2), dtype=np.uint8),
        asv_ptr=np.arange(0, n * n_asvs + 1, n_asvs, dtype=np.int64),
        asv_idx=np.tile(np.arange(n_asvs, dtype=np.int64), n),
        counts=counts.ravel(),
    )
    labels = ["train"] * (n // 2) + ["test"] * (n - n // 2)
    split = pd.Series(labels, index=pd.Index(samples.sample_ids, name="sample_id"), name="split")
    if classes:
        targets = (share > np.median(share)).astype(np.int64)
        return Study(samples, split, targets=targets, classes=["low", "high"])
    return Study(samples, split, targets=100 * share.astype(np.float64))


def test_relative_abundances_are_each_samples_shares():
    study = synthetic_study(n=5)
    matrix = relative_abundances(study.samples, np.array([3, 1]))
    assert matrix.shape == (2, 6)
    np.testing.assert_allclose(np.asarray(matrix.sum(1)).ravel(), 1.0)
    first = study.samples.sample_asvs(3)[1]
    np.testing.assert_allclose(matrix[0].toarray().ravel(), first / first.sum())


def test_regression_baselines_fit_on_train_only_and_the_forest_finds_the_signal():
    study = synthetic_study()
    train, test = study.subset("train"), study.subset("test")
    features = relative_abundances(study.samples, test)
    predicted = fit_predict(study, train, features, trees=50)
    np.testing.assert_allclose(predicted["mean"], study.targets[train].mean())
    error = {k: np.abs(v - study.targets[test]).mean() for k, v in predicted.items()}
    assert error["random_forest"] < 0.5 * error["mean"], error


def test_the_median_baseline_is_the_training_median_the_best_constant_under_mae():
    """A skewed target (a few old people among young ones): the training median lies below the
    mean and scores a lower MAE on test samples drawn alike; classifiers get no median (their
    constant is the class frequencies, ``mean``)."""
    study = synthetic_study(n=10)
    train, test = study.subset("train"), study.subset("test")  # s0-s4, s5-s9
    y = np.array([20.0, 21, 22, 30, 80, 20, 21, 22, 30, 80])
    study = Study(study.samples, study.split, targets=y)
    predicted = fit_predict(study, train, relative_abundances(study.samples, test), trees=5)
    assert list(predicted)[:2] == ["mean", "median"]  # the constants first, mean then median
    np.testing.assert_array_equal(predicted["median"], np.full(5, 22.0))
    np.testing.assert_array_equal(predicted["mean"], np.full(5, 34.6))
    mae = {k: float(np.abs(predicted[k] - y[test]).mean()) for k in ("mean", "median")}
    assert mae == pytest.approx({"mean": 18.16, "median": 13.8})
    even = fit_predict(study, train[:4], relative_abundances(study.samples, test), trees=5)
    np.testing.assert_array_equal(even["median"], np.full(5, 21.5))  # the middle two's mean
    classes = synthetic_study(classes=True)
    features = relative_abundances(classes.samples, classes.subset("test"))
    assert "median" not in fit_predict(classes, classes.subset("train"), features, trees=5)


def test_classifier_baselines_give_log_probabilities():
    study = synthetic_study(classes=True)
    train, test = study.subset("train"), study.subset("test")
    features = relative_abundances(study.samples, test)
    predicted = fit_predict(study, train, features, trees=50)
    prior = np.bincount(study.targets[train], minlength=2) / len(train)
    np.testing.assert_allclose(np.exp(predicted["mean"]), np.tile(prior, (len(test), 1)))
    for values in predicted.values():
        np.testing.assert_allclose(np.exp(values).sum(1), 1.0, atol=1e-9)
    forest = classification_metrics(
        torch.from_numpy(predicted["random_forest"]), study.targets[test]
    )
    assert forest["accuracy"] > 0.8 and forest["auc"] > 0.9, forest


def test_group_mean_is_each_groups_training_mean_and_the_mean_for_an_unseen_group():
    study = synthetic_study(n=8)
    train = study.subset("train")  # s0-s3
    groups = np.array([1, 1, 2, 0, 1, 2, 3, 0])  # 3: no train sample; 0: no group
    y = study.targets

    def group_mean(of: Study) -> np.ndarray:
        every = relative_abundances(of.samples, np.arange(8))
        fitted = fit_predict(of, train, every, trees=5, groups=groups, predict_groups=groups)
        return fitted["group_mean"]

    one, two, overall = y[[0, 1]].mean(), y[2], y[train].mean()
    expected = [one, one, two, overall, one, two, overall, overall]
    np.testing.assert_allclose(group_mean(study), expected)
    classes = synthetic_study(n=8, classes=True)
    log_probs = group_mean(classes)
    onehot = np.eye(2)[classes.targets]
    np.testing.assert_allclose(np.exp(log_probs[4]), onehot[[0, 1]].mean(0), atol=1e-9)
    np.testing.assert_allclose(np.exp(log_probs[6]), onehot[train].mean(0), atol=1e-9)
    assert "group_mean" not in fit_predict(study, train, relative_abundances(study.samples, train))


def test_macro_auc_is_the_rank_statistic():
    truth = np.array([0, 0, 1, 1, 2])
    scores = np.array([[0.9, 0.1, 0], [0.2, 0.8, 0], [0.3, 0.7, 0], [0.1, 0.9, 0], [0, 0, 1.0]])
    # Pairs (positive, negative) ranked right: class 0 {0.9, 0.2} vs {0.3, 0.1, 0}: 5 of 6;
    # class 1 {0.7, 0.9} vs {0.1, 0.8, 0}: 5 of 6; class 2: 1 of 1.
    assert macro_auc(scores, truth) == pytest.approx((5 / 6 + 5 / 6 + 1) / 3)
    assert np.isnan(macro_auc(scores, np.zeros(5, dtype=int)))  # one class: undefined


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 4).flatmap(
        lambda k: st.tuples(
            st.just(k),
            st.lists(
                st.tuples(
                    st.integers(0, k - 1), st.lists(st.integers(0, 3), min_size=k, max_size=k)
                ),
                min_size=2,
                max_size=30,
            ),
        )
    )
)
def test_macro_auc_equals_scikit_learns_one_vs_rest_auc_with_ties(case):
    """Coarse scores (many ties): the midrank statistic is scikit-learn's ROC AUC per class."""
    k, rows = case
    truth = np.array([label for label, _ in rows])
    scores = np.array([values for _, values in rows], dtype=np.float64)
    expected = [
        roc_auc_score(truth == c, scores[:, c])
        for c in range(k)
        if 0 < (truth == c).sum() < len(truth)
    ]
    got = macro_auc(scores, truth)
    if expected:
        assert got == pytest.approx(np.mean(expected), abs=1e-12)
    else:
        assert np.isnan(got)


def test_bootstrap_interval_holds_the_estimate_and_narrows_with_more_samples():
    rng = np.random.default_rng(1)

    def width(n: int) -> tuple[float, list[float]]:
        errors = rng.normal(size=n)
        interval = bootstrap_intervals(lambda idx: {"mae": float(np.abs(errors[idx]).mean())}, n)
        return float(np.abs(errors).mean()), interval["mae"]

    estimate, (low, high) = width(50)
    assert low < estimate < high
    _, (low_big, high_big) = width(2000)
    assert high_big - low_big < 0.5 * (high - low)
    assert bootstrap_intervals(lambda idx: {"r2": float("nan")}, 5) == {"r2": [None, None]}


def test_a_cluster_bootstrap_draws_whole_clusters_and_is_wider_for_correlated_samples():
    """A grouped split's unit is the group: each draw holds as many whole groups as there are
    (drawn with replacement), and where a group's samples share their error the interval over
    groups is far wider than the one over samples, which treats them as independent."""
    clusters = np.repeat(np.arange(6), [10, 20, 5, 30, 15, 20])
    sizes = np.bincount(clusters)
    for idx in bootstrap_draws(len(clusters), clusters, resamples=50):
        drawn = np.bincount(clusters[idx], minlength=6)
        assert (drawn % sizes == 0).all() and (drawn // sizes).sum() == 6
    errors = np.repeat(np.random.default_rng(3).normal(size=6), [10, 20, 5, 30, 15, 20])

    def mean(idx: np.ndarray) -> dict[str, float]:
        return {"error": float(errors[idx].mean())}

    low, high = bootstrap_intervals(mean, len(errors))["error"]
    low_c, high_c = bootstrap_intervals(mean, len(errors), clusters)["error"]
    assert high_c - low_c > 2 * (high - low)


def test_the_docs_state_the_bootstrap_draws_metrics_json_makes():
    """Every count of draws or resamples the docs give for an interval (``1,000 draws``,
    ``1000 resamples``) is BOOTSTRAP_RESAMPLES: the docs once said 2,000."""
    count = re.compile(r"\b(\d{1,3}(?:,\d{3})+|\d{3,})\s+(?:bootstrap\s+)?(?:draws|resamples)\b")
    pages = [*(REPO / "docs").glob("*.md"), *(REPO / "workflow/report").glob("*.rst")]
    stated = {
        f"{page.relative_to(REPO)}: {found.group(0)}": int(found.group(1).replace(",", ""))
        for page in pages
        for found in count.finditer(page.read_text(encoding="utf-8"))
    }
    assert len(stated) >= 3, stated  # results.md, training.md, the report's metrics.rst
    assert {k: v for k, v in stated.items() if v != BOOTSTRAP_RESAMPLES} == {}


def test_paired_differences_are_model_minus_other_over_the_same_draws():
    rng = np.random.default_rng(2)
    truth = rng.normal(size=200)
    close, far = truth + rng.normal(scale=0.1, size=200), truth + rng.normal(size=200)

    def score(values: np.ndarray, idx: np.ndarray) -> dict[str, float]:
        return {"mae": float(np.abs(values[idx] - truth[idx]).mean())}

    out = paired_differences(score, close, {"far": far, "same": close}, 200)
    far_mae = out["far"]["mae"]
    assert far_mae["value"] == pytest.approx(
        score(close, np.arange(200))["mae"] - score(far, np.arange(200))["mae"]
    )
    low, high = far_mae["interval"]
    assert low <= far_mae["value"] <= high < 0  # clearly better: the interval excludes 0
    # the same draws for both: a model against itself differs by exactly 0 in every draw
    assert out["same"]["mae"] == {"value": 0.0, "interval": [0.0, 0.0]}


def test_cli_writes_every_baseline_for_every_sample(demo, tmp_path):  # noqa: F811
    out = tmp_path / "baselines.tsv"
    args = ["--table", demo["table"], "--metadata", demo["metadata"], "--target-column", "age"]
    assert aam("baselines", *args, "--split", demo["split"], "--output", out, "--trees", "20") == 0
    table = pd.read_csv(out, sep="\t", dtype={"sample_id": str})
    split = read_split(demo["split"])
    assert list(table["model"].unique()) == ["mean", "median", "random_forest"]
    for _, rows in table.groupby("model"):
        assert sorted(rows["sample_id"]) == sorted(split.index)
        assert (rows.set_index("sample_id")["split"] == split.reindex(rows["sample_id"])).all()
    ids = list(split.index[split == "test"])
    read = read_model_predictions(out, ids, [])
    assert set(read) == {"mean", "median", "random_forest"} and len(read["mean"]) == len(ids)
    metadata = pd.read_csv(demo["metadata"], sep="\t", dtype={"sample_id": str})
    ages = metadata.set_index("sample_id")["age"].reindex(split.index[split == "train"])
    assert read["median"] == pytest.approx(np.full(len(ids), ages.median()))
    assert set(table.loc[table["model"] == "median", "inputs"]) == {"none"}  # it reads nothing
    assert read_model_predictions(out, ids[:3], [])["mean"].shape == (3,)


def test_cli_group_column_adds_the_group_mean(demo, tmp_path):  # noqa: F811
    out = tmp_path / "baselines.tsv"
    args = ["--table", demo["table"], "--metadata", demo["metadata"], "--target-column", "age"]
    args += ["--split", demo["split"], "--output", out, "--trees", "5"]
    assert aam("baselines", *args, "--group-column", "qiita_study_id") == 0
    table = pd.read_csv(out, sep="\t", dtype={"sample_id": str})
    assert sorted(table["model"].unique()) == ["group_mean", "mean", "median", "random_forest"]
    metadata = pd.read_csv(demo["metadata"], sep="\t", dtype=str).set_index("sample_id")
    split = read_split(demo["split"])
    group = table[table["model"] == "group_mean"].set_index("sample_id")
    study = metadata.reindex(group.index)["qiita_study_id"]
    age = pd.to_numeric(metadata["age"], errors="coerce").reindex(group.index)
    train = group.index[split.reindex(group.index) == "train"]
    means = age[train].groupby(study[train]).mean()
    expected = study.map(means).fillna(age[train].mean())
    np.testing.assert_allclose(group["prediction"], expected, rtol=1e-6)


def test_cli_covariates_add_a_forest_that_reads_them_and_every_row_names_its_inputs(
    demo,  # noqa: F811
    tmp_path,
):
    """--covariates: a second forest on the abundances + the study one-hot; the target here
    depends on the study alone, so that forest beats the microbiome-only one by far. Each
    model's inputs are written beside it and read back as metrics.json will name them."""
    from aam.analysis.prediction_tables import read_model_inputs

    metadata = pd.read_csv(demo["metadata"], sep="\t", dtype=str)
    largest = metadata["qiita_study_id"].value_counts().index[0]
    by_study = np.where(metadata["qiita_study_id"] == largest, 10.0, 0.0)
    metadata["by_study"] = by_study.astype(str)  # a target the study alone sets
    meta = tmp_path / "metadata.tsv"
    metadata.to_csv(meta, sep="\t", index=False)
    out = tmp_path / "baselines.tsv"
    args = ["--table", demo["table"], "--metadata", meta, "--target-column", "by_study"]
    args += ["--split", demo["split"], "--output", out, "--trees", "20"]
    assert aam("baselines", *args, "--covariates", "qiita_study_id") == 0
    table = pd.read_csv(out, sep="\t", dtype={"sample_id": str})
    models = ["mean", "median", "random_forest", "random_forest_covariates"]
    assert list(table["model"].unique()) == models
    assert read_model_inputs(out) == {
        "mean": [],
        "median": [],
        "random_forest": ["microbiome"],
        "random_forest_covariates": ["microbiome", "qiita_study_id"],
    }
    split = read_split(demo["split"])
    truth = metadata.set_index("sample_id")["by_study"].astype(float)
    test = table[table["sample_id"].map(split) == "test"]
    error = {
        model: float((rows.set_index("sample_id")["prediction"] - truth).abs().mean())
        for model, rows in test.groupby("model")
    }
    assert error["random_forest_covariates"] < 0.25 * error["random_forest"], error


def test_cli_rejects_zero_trees_and_a_wrong_file_name(demo, tmp_path, capsys):  # noqa: F811
    args = ["--table", demo["table"], "--metadata", demo["metadata"], "--target-column", "age"]
    args += ["--split", demo["split"]]
    rc = aam("baselines", *args, "--output", tmp_path / "b.tsv", "--trees", "0")
    assert_failed(rc, capsys, "baselines", tmp_path, "--trees 0")
    rc = aam("baselines", *args, "--output", tmp_path / "b.csv")
    assert_failed(rc, capsys, "baselines", tmp_path, "b.csv", "*.tsv")
