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
    assert confusion.get_title().startswith("AAM\nn=60, accuracy")
    assert confusion.images[0].get_array().sum() == 60
    legend = [text.get_text() for text in roc.get_legend().get_texts()]
    for c, label in enumerate(classes):
        auc = roc_auc_score(y == c, log_probs[:, c])
        assert f"{label} (AUC {auc:.2f})" in legend
    assert len(roc.lines) == 3 + 1  # a curve per class and the chance diagonal
    plt.close(fig)


def test_confusion_counts_are_readable_on_every_shade_and_empty_cells_show_0():
    """Issue 73: counts were black on dark navy and empty cells blank; the constant baseline
    of a classifier is named by what it predicts, the training majority class."""
    classes = ["CD", "Control"]
    truth = pd.Series(["CD"] * 9 + ["Control"])
    always_cd = np.log(np.tile([0.9, 0.1], (10, 1)))
    models = {"model": always_cd, "mean_baseline": always_cd}
    fig = prediction_plots._confusion_panels(plt, models, truth, classes, "ibd")
    confusion = fig.axes[0]
    cells = {(t.get_position(), t.get_text()): t.get_color() for t in confusion.texts}
    assert cells == {
        ((0, 0), "9"): "white",  # the darkest cell
        ((1, 0), "0"): "black",
        ((0, 1), "1"): "black",
        ((1, 1), "0"): "black",
    }
    assert fig.axes[1].get_title().startswith("majority class\nn=10, accuracy 0.90")
    plt.close(fig)
    assert prediction_plots.text_colour((0.03, 0.19, 0.42, 1.0)) == "white"  # navy
    assert prediction_plots.text_colour((0.97, 0.98, 1.0, 1.0)) == "black"


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


def _disjoint(boxes) -> bool:
    """No two of the (window extent) boxes overlap."""
    return all(
        a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0
        for k, a in enumerate(boxes)
        for b in boxes[k + 1 :]
    )


def test_panel_titles_do_not_run_into_each_other():
    """Every model of the demo's page side by side, the long names included: the panel titles'
    boxes (matplotlib's text extents) stay apart and within the figure."""
    from aam.analysis.prediction_tables import model_label

    truth = pd.Series([20.0, 30.0, 40.0, 50.0])
    names = ["model", "mean_baseline", "random_forest_baseline", "group_mean_baseline"]
    names += ["random_forest_embeddings_abundances_baseline", "random_forest_pooled_baseline"]
    models = {name: truth.to_numpy() + k for k, name in enumerate(names)}
    groups = pd.Series(["x", "x", "y", "z"], name="qiita_study_id")
    fig = prediction_plots._scatter_panels(plt, models, truth, "age", groups, "years")
    fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    titles = [ax.title for ax in fig.axes[: len(names)]]
    boxes = [t.get_window_extent(renderer) for t in titles]
    assert _disjoint(boxes)
    figure_box = fig.bbox
    assert all(figure_box.x0 <= b.x0 and b.x1 <= figure_box.x1 for b in boxes)
    assert "mean of each qiita_study_id" in titles[3].get_text()
    assert titles[0].get_text() == "AAM\nn=4, MAE 0.00 years"
    assert model_label(names[4]).split()[0] in titles[4].get_text()
    plt.close(fig)


def test_a_one_epoch_history_has_whole_epoch_ticks_that_do_not_overlap():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from aam.commands.plot_history import SERIES, history_figure

    for epochs in (1, 2, 12, 100):
        history = pd.DataFrame(
            {"epoch": range(1, epochs + 1), "train_loss": 0.96, "val_loss": 0.95, "val_mae": 6.0}
        )
        panels = [p for p in SERIES if f"val_{p[0]}" in history]
        fig = history_figure(history, panels, {"best_epoch": 1}, "age", "years")
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        for ax in fig.axes:
            low, high = ax.get_xlim()
            ticks = [t for t in ax.get_xticklabels() if low <= t.get_position()[0] <= high]
            assert ticks and all(t.get_text().isdigit() for t in ticks), epochs
            assert _disjoint([t.get_window_extent(canvas.get_renderer()) for t in ticks])
