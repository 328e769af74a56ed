"""A classifier's test score and what it rests on (issue 73): per-class precision, recall and
F1, the class balance of each split, each test person's samples and how every model did on
them; the names of the page and the figures for classes."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import precision_recall_fscore_support

from aam.analysis import class_report
from aam.analysis.prediction_metrics import metrics_lines, score_predictions
from aam.runtime.atomic import write_json

CLASSES = ["CD", "Control"]


def log_probs(p_cd: list[float]) -> np.ndarray:
    p = np.array(p_cd)
    return np.log(np.stack([p, 1 - p], axis=1))


def test_class_scores_are_sklearns_and_undefined_where_a_class_is_never_called():
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 3, 40)
    scores = rng.normal(size=(40, 3)) + 1.5 * np.eye(3)[truth]
    mine = class_report.class_scores(scores, truth, 3)
    theirs = precision_recall_fscore_support(truth, scores.argmax(1), labels=[0, 1, 2])
    for m, values in zip(class_report.CLASS_METRICS, theirs[:3], strict=True):
        np.testing.assert_allclose([mine[f"{m}.{k}"] for k in range(3)], values)
    always_cd = np.log(np.tile([0.9, 0.1], (4, 1)))
    never = class_report.class_scores(always_cd, np.array([0, 0, 1, 1]), 2)
    assert never["precision.0"] == 0.5 and never["recall.0"] == 1.0
    assert math.isnan(never["precision.1"]) and never["recall.1"] == 0.0 and never["f1.1"] == 0.0


def test_class_balance_counts_each_split_and_warns_of_a_one_class_split():
    split = pd.Series(["train"] * 4 + ["val"] * 2 + ["test"] * 3, index=[f"s{k}" for k in range(9)])
    truth = pd.Series(["CD", "Control", "CD", None, "CD", "CD", "CD", "Control", "UC"])
    truth.index = split.index
    balance = class_report.class_balance(split, truth, CLASSES)
    assert balance == {
        "train": {"CD": 2, "Control": 1, "UC": 0},  # s3 has no class: not counted
        "val": {"CD": 2, "Control": 0, "UC": 0},
        "test": {"CD": 1, "Control": 1, "UC": 1},
    }
    assert list(balance) == ["train", "val", "test"]
    assert class_report.one_class_splits(balance) == ["val"]


def grouped_test() -> tuple[dict, pd.Series, pd.Series]:
    """Three test people: p1 (CD, 4 samples) called right, p2 (CD, 2) half right, p3
    (Control, 3) called CD every time; the majority-class baseline calls CD always."""
    truth = pd.Series(["CD"] * 6 + ["Control"] * 3)
    people = pd.Series(["p1"] * 4 + ["p2"] * 2 + ["p3"] * 3, name="host_subject_id")
    model = log_probs([0.9, 0.8, 0.7, 0.6, 0.6, 0.2, 0.7, 0.6, 0.9])
    constant = log_probs([0.6] * 9)
    return {"model": model, "mean_baseline": constant}, truth, people


def test_a_grouped_classifier_test_is_scored_per_class_and_per_person(tmp_path):
    models, truth, people = grouped_test()
    target = {"column": "ibd", "classes": CLASSES}
    ids = [f"s{k}" for k in range(9)]
    metrics = score_predictions(models, truth, target, tmp_path / "m.tsv", ids, None, people)
    write_json(tmp_path / "metrics.json", metrics)  # strict JSON: undefined is null
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["per_class"][1]["mean_baseline"]["precision"] is None
    assert metrics["interval_groups"] == {"column": "host_subject_id", "n": 3}
    assert (
        "the 3 host_subject_id groups of the 9 samples, each drawn whole"
        in (metrics["interval_note"])
    )
    cd, control = metrics["per_class"]
    assert (cd["class"], cd["n"], control["class"], control["n"]) == ("CD", 6, "Control", 3)
    assert cd["model"] == pytest.approx({"precision": 5 / 8, "recall": 5 / 6, "f1": 10 / 14})
    assert control["model"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert math.isnan(control["mean_baseline"]["precision"])  # never called Control
    low, high = cd["intervals"]["model"]["recall"]
    assert 0 <= low <= 5 / 6 <= high <= 1
    assert metrics["by_test_group"] == [
        {
            "group": "p1",
            "n": 4,
            "true": {"CD": 4},
            "model": {"accuracy": 1.0, "true_class_probability": pytest.approx(0.75)},
            "mean_baseline": {"accuracy": 1.0, "true_class_probability": pytest.approx(0.6)},
        },
        {
            "group": "p2",
            "n": 2,
            "true": {"CD": 2},
            "model": {"accuracy": 0.5, "true_class_probability": pytest.approx(0.4)},
            "mean_baseline": {"accuracy": 1.0, "true_class_probability": pytest.approx(0.6)},
        },
        {
            "group": "p3",
            "n": 3,
            "true": {"Control": 3},
            "model": {"accuracy": 0.0, "true_class_probability": pytest.approx(0.8 / 3)},
            "mean_baseline": {"accuracy": 0.0, "true_class_probability": pytest.approx(0.4)},
        },
    ]
    assert "majority class" in metrics["baseline_note"]
    lines = metrics_lines(metrics)
    assert any(line.strip().startswith("majority class  accuracy") for line in lines), lines
    assert any(line.strip().startswith("AAM - majority class: accuracy") for line in lines)


def test_a_classifier_scored_by_sample_has_no_per_person_rows(tmp_path):
    models, truth, _ = grouped_test()
    target = {"column": "ibd", "classes": CLASSES}
    ids = [f"s{k}" for k in range(9)]
    metrics = score_predictions(models, truth, target, tmp_path / "m.tsv", ids)
    assert "by_test_group" not in metrics and "interval_groups" not in metrics
    assert "over the 9 samples (" in metrics["interval_note"] and len(metrics["per_class"]) == 2


def test_predict_reads_the_balance_from_the_split_and_the_metadata(tmp_path, caplog):
    from types import SimpleNamespace

    from aam.analysis.predict import _class_balance

    ids = [f"s{k}" for k in range(6)]
    metadata = tmp_path / "metadata.tsv"
    pd.DataFrame({"sample_id": ids, "ibd": ["CD", "Control", "CD", "CD", "CD", "Control"]}).to_csv(
        metadata, sep="\t", index=False
    )
    split = pd.Series(["train", "train", "val", "val", "test", "test"], index=ids)
    study = SimpleNamespace(samples=SimpleNamespace(sample_ids=ids), split=split)
    balance = _class_balance(metadata, study, {"column": "ibd", "classes": CLASSES})
    assert balance["val"] == {"CD": 2, "Control": 0} and balance["test"]["Control"] == 1
    assert "the val split holds one class only (CD 2, Control 0)" in caplog.text
    assert "the test split" not in caplog.text


def classifier_page(tmp_path) -> tuple[dict, str]:
    """The landing page of a classifier scored on 3 test people, a one-class validation
    split."""
    from aam.analysis.overview import Page, RunMetrics, overview_html

    models, truth, people = grouped_test()
    target = {"column": "ibd", "classes": CLASSES}
    metrics = score_predictions(
        models, truth, target, tmp_path / "m.tsv", [f"s{k}" for k in range(9)], None, people
    )
    metrics["class_balance"] = {
        "train": {"CD": 30, "Control": 20},
        "val": {"CD": 8, "Control": 0},
        "test": {"CD": 6, "Control": 3},
    }
    page = overview_html(Page(runs=[(RunMetrics("ibd", "ibd", metrics), [])]))
    return metrics, page


def test_the_page_of_a_classifier_names_its_baseline_intervals_classes_and_people(tmp_path):
    import re

    from test_overview import cells

    metrics, page = classifier_page(tmp_path)
    assert "training mean" not in page and cells(page, "majority class")[0].startswith("0.667")
    assert "AAM - majority class" in page and "<th>macro F1, higher is better</th>" in page
    over = "over the 3 host_subject_id groups of the 9 samples, each drawn whole"
    assert f"9 test samples; [95% bootstrap interval {over}]" in page
    assert f"<td class=l>the {over.removeprefix('over the ')}</td>" in page  # at a glance
    # the class balance, and a warning for the one-class validation split only
    assert cells(page, "validation") == ["8", "0", "8"] and cells(page, "test") == ["6", "3", "9"]
    assert "<p class=warn>The validation split holds one class only (CD 8, Control 0)" in page
    assert "The test split holds one class" not in page
    # per class: each model's precision, recall, F1 with intervals
    per_class = page.split("<h3>Per class: precision, recall, F1</h3>")[1].split("</table>")[0]
    assert "<th>precision</th><th>recall</th><th>F1</th>" in per_class  # each class's, not macro
    assert "CD<br><small>6 test samples</small>" in per_class
    aam_cd = re.search(r"<th class=l>AAM</th>(.*?)</tr>", per_class).group(1)
    values = [
        re.sub("<[^>]+>", "", c).split(" [")[0] for c in re.findall(r"<td>(.*?)</td>", aam_cd)
    ]
    assert values == ["0.625", "0.833", "0.714"]
    assert "<th class=l>majority class</th><td>undefined</td>" in per_class  # never called Control
    # per person: samples, true class, AAM's mean probability of it, each model's accuracy
    assert "<h3>Accuracy by test host_subject_id</h3>" in page
    assert "<tr><th>p2</th><td>2</td><td class=l>CD</td>" in page
    assert cells(page, "p2") == ["2", "0.40", "0.50", "1.00"]
    assert "<tr><th>p3</th><td>3</td><td class=l>Control</td>" in page
    assert cells(page, "p3") == ["3", "0.27", "0.00", "0.00"]


def test_the_page_of_a_regression_keeps_its_names_and_has_no_class_tables():
    from test_overview import regression

    from aam.analysis.overview import Page, RunMetrics, overview_html

    page = overview_html(Page(runs=[(RunMetrics("r", "d", regression([0, -1, 1])), [])]))
    assert "<tr><th>training mean</th>" in page and "majority class" not in page
    assert "Per class" not in page and "Samples of each class" not in page
    assert "[95% bootstrap interval over the 80 samples]" in page


def test_the_page_says_how_to_follow_training_in_tensorboard():
    from aam.analysis.overview import Page, overview_html

    files = {"runs": ["runs/ibd/finetune/events/train/events.out.tfevents.1"]}
    page = overview_html(Page(runs=[], files=files, workdir="results/ibd", docs="../../docs/t.md"))
    assert "<code>.venv/bin/tensorboard --logdir results/ibd/runs</code>" in page
    assert "<a href='../../docs/t.md#following-a-run'>docs/training.md, Following a run</a>" in page
    assert "tensorboard" not in overview_html(Page(runs=[]))  # no runs: no line
    spaced = overview_html(Page(runs=[], files=files, workdir="my results"))
    assert (
        "--logdir &#x27;my results/runs&#x27;</code>" in spaced
        and "<a href" not in spaced.split("Files")[0]
    )


def test_a_classifiers_history_has_its_accuracy_and_auc_panel(tmp_path, monkeypatch):
    """Issue 73: the regression history had its target panel, the classifier's none."""
    from test_cli_training import aam

    from aam.commands import plot_history

    history = pd.DataFrame(
        {"epoch": [1, 2, 3], "train_loss": [0.7, 0.6, 0.5], "val_loss": [0.7, 0.65, 0.66]}
        | {"val_accuracy": [0.5, 0.75, 0.7], "val_f1": [0.3, 0.7, 0.6], "val_auc": [0.6, 0.8, 0.9]}
    )
    path, out = tmp_path / "history.tsv", tmp_path / "history.png"
    history.to_csv(path, sep="\t", index=False)
    drawn = []
    draw = plot_history.history_figure
    monkeypatch.setattr(
        plot_history, "history_figure", lambda *a: drawn.append(draw(*a)) or drawn[-1]
    )
    assert aam("plot-history", "--history", path, "--output", out, "--target-column", "ibd") == 0
    assert out.read_bytes()[:4] == b"\x89PNG"
    loss, target = drawn[0].axes
    assert target.get_title() == "target" and target.get_ylabel() == "accuracy and AUC of ibd"
    lines = {line.get_label(): list(line.get_ydata()) for line in target.lines}
    assert lines == {
        "val accuracy": [0.5, 0.75, 0.7],
        "val AUC": [0.6, 0.8, 0.9],
        "AUC of chance": [0.5, 0.5],
    }
    assert target.get_ylim() == (-0.02, 1.02)
    assert [line.get_label() for line in loss.lines] == ["train", "val"]  # as before


def test_the_importance_heatmap_of_a_classifier_groups_its_samples_by_class(monkeypatch):
    """Issue 73: a category's axis read "ranked by the target (1 = lowest)"."""
    from types import SimpleNamespace

    import scipy.sparse as sp

    from aam.analysis import importance_plot

    abundance = np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    monkeypatch.setattr(
        importance_plot, "relative_abundances", lambda _, rows: sp.csr_matrix(abundance[rows])
    )
    saved = []
    monkeypatch.setattr(importance_plot, "save_figure", lambda fig, path: saved.append(fig))
    study = SimpleNamespace(
        samples=SimpleNamespace(asv_ids=["AC", "GT"]),
        targets=np.array([1, 0, 1, 0]),
        classes=CLASSES,
    )
    table = pd.DataFrame(
        {"asv": ["AC", "GT"], "asv_id": ["a1", "g2"], "taxon": [None, None]}
        | {"aam_rank": [1, 2], "forest_scored": [False, False]}
    )
    importance_plot.plot_importance(None, study, np.arange(4), table, 2, 0.5, "ibd")
    strip, heat = saved[0].axes[:2]
    assert heat.get_xlabel() == "the 4 test samples grouped by their true ibd: CD, Control"
    assert strip.images[0].get_array().tolist() == [[0, 0, 1, 1]]  # CD first, then Control
    regression = importance_plot.samples_axis([], 4, "age")
    assert regression == "test samples ranked by the target above (1 = lowest, of 4)"
