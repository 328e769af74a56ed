"""predicted_vs_true.png's panels: confusion matrices over one-vs-rest ROC curves for classes,
scatter over residuals coloured by group for a regression."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from aam.analysis import prediction_plots  # noqa: E402


def test_classifier_panels_have_a_roc_curve_per_class_with_its_auc():
    rng = np.random.default_rng(0)
    classes = ["a", "b", "c"]
    y = rng.integers(0, 3, 60)
    logits = rng.normal(size=(60, 3)) + 2.0 * np.eye(3)[y]
    log_probs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    truth = pd.Series([classes[k] for k in y])
    models = {"model": log_probs, "mean_baseline": np.log(np.full((60, 3), 1 / 3))}
    fig = prediction_plots._confusion_panels(plt, models, truth, classes, "site")
    confusion, roc = fig.axes[0], fig.axes[2]  # row 1: the matrices; row 2: the curves
    assert confusion.get_title().startswith("AAM: n=60, accuracy")
    assert confusion.images[0].get_array().sum() == 60
    legend = [text.get_text() for text in roc.get_legend().get_texts()]
    for c, label in enumerate(classes):
        auc = roc_auc_score(y == c, log_probs[:, c])
        assert f"{label} (AUC {auc:.2f})" in legend
    assert len(roc.lines) == 3 + 1  # a curve per class and the chance diagonal
    plt.close(fig)


def test_regression_panels_colour_each_group_and_show_residuals():
    truth = pd.Series([20.0, 30.0, 40.0, 50.0])
    models = {"model": np.array([22.0, 28.0, 45.0, 50.0])}
    groups = pd.Series(["x", "x", "y", "z"], name="study")
    fig = prediction_plots._scatter_panels(plt, models, truth, "age", groups)
    top, bottom = fig.axes
    assert len(top.collections) == 3  # one scatter per group
    residuals = np.concatenate([c.get_offsets()[:, 1] for c in bottom.collections])
    assert sorted(residuals) == [-2.0, 0.0, 2.0, 5.0]
    assert [t.get_text() for t in top.get_legend().get_texts()] == ["x", "y", "z"]
    plt.close(fig)
