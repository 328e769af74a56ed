"""Forests on AAM's pretrained sample embeddings (issue 59, item 5): `aam embedding-forest`
fits the forest on each sample's embedding, and on it beside the abundances, on the train
samples; `aam predict --baselines A B` scores them beside the model like any baseline; the
workflow fits them for every run with an encoder (`baselines.embeddings`)."""

import json

import numpy as np
import pandas as pd
import pytest
from test_baselines import synthetic_study
from test_cli_training import aam, demo, predict, pretrained, trained  # noqa: F401

from aam.analysis.embedding_forest import EMBEDDING, embedding_forests

FORESTS = ("random_forest_embeddings", "random_forest_embeddings_abundances")


def test_a_forest_on_embeddings_that_carry_the_target_beats_one_on_abundances():
    study = synthetic_study(n=160, seed=3)
    rng = np.random.default_rng(0)
    signal = (study.targets - study.targets.mean()) / study.targets.std()
    embeddings = np.column_stack([signal, rng.normal(size=(len(signal), 3))])  # 1 of 4 informs
    study.targets[:] = np.where(rng.random(len(signal)) < 0.5, 1.0, 0.0) + signal
    train, test = study.subset("train"), study.subset("test")
    out = embedding_forests(study, train, embeddings, trees=40)
    assert set(out) == set(FORESTS) and all(len(v) == 160 for v in out.values())
    error = {k: np.abs(v[test] - study.targets[test]).mean() for k, v in out.items()}
    spread = np.abs(study.targets[test] - study.targets[train].mean()).mean()
    assert error["random_forest_embeddings"] < 0.8 * spread, (error, spread)


def test_classes_get_finite_log_probabilities_from_both_forests():
    study = synthetic_study(n=80, classes=True)
    embeddings = np.random.default_rng(1).normal(size=(80, 4))
    out = embedding_forests(study, study.subset("train"), embeddings, trees=10)
    for values in out.values():
        assert values.shape == (80, 2) and np.isfinite(values).all()
        np.testing.assert_allclose(np.exp(values).sum(1), 1.0, atol=1e-6)


@pytest.mark.slow
def test_predict_scores_the_embedding_forests_beside_the_baselines(
    demo,  # noqa: F811
    pretrained,  # noqa: F811
    trained,  # noqa: F811
    tmp_path,
):
    common = ["--table", demo["table"], "--metadata", demo["metadata"], "--target-column", "age"]
    common += ["--split", demo["split"], "--trees", "20"]
    forests, baselines = tmp_path / "forests.tsv", tmp_path / "baselines.tsv"
    encoder = ["--encoder", pretrained / "encoder.pt", "--device", "cpu"]
    assert aam("embedding-forest", *common, *encoder, "--output", forests) == 0
    assert aam("baselines", *common, "--output", baselines) == 0
    table = pd.read_csv(forests, sep="\t", dtype={"sample_id": str})
    assert tuple(table["model"].unique()) == FORESTS
    assert set(table["inputs"]) == {EMBEDDING, f"{EMBEDDING} + microbiome"}
    assert table["prediction"].notna().all() and len(table) == 2 * 60
    out = tmp_path / "predict"
    extra = ["--metadata", demo["metadata"], "--baselines", baselines, forests]
    assert predict(trained / "model.pt", demo, out, *extra) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    for name in FORESTS:
        assert metrics["inputs"][f"{name}_baseline"] == table.set_index("model").loc[
            name, "inputs"
        ].iloc[0].split(" + ")
        assert f"{name}_baseline" in metrics["differences"]
    assert "random_forest_baseline" in metrics["differences"]
    twice = ["--metadata", demo["metadata"], "--baselines", baselines, baselines]
    assert predict(trained / "model.pt", demo, tmp_path / "again", *twice) != 0
