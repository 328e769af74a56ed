"""Figures for a paper (issue 41): one format option (PNG at 300 dpi by default, SVG or PDF),
the target's unit in axis labels, titles that name the dataset and the run, never a file."""

import shlex

import numpy as np
import pandas as pd
import pytest
import yaml
from checkout import REPO
from PIL import Image
from planning import planned
from test_cli_training import aam
from test_pcoa import points_matrix

from aam.analysis import learning_curve, prediction_plots
from aam.analysis.figures import metric_label, target_label, title
from aam.commands.plot_history import SERIES, history_figure
from aam.errors import InputError
from aam.runtime.figures import DEFAULT_FORMAT, DPI, FORMATS, figure_name, save_figure
from aam.workflow.flags import Flags
from aam.workflow.snakefile import final_outputs, report_entry


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [1, 0])
    ax.set_title("a line")
    return fig


def test_a_png_is_written_at_300_dpi_svg_and_pdf_on_request(tmp_path):
    assert (FORMATS, DEFAULT_FORMAT, DPI) == (("png", "svg", "pdf"), "png", 300)
    save_figure(_figure(), tmp_path / "f.png")
    with Image.open(tmp_path / "f.png") as image:
        assert [round(d) for d in image.info["dpi"]] == [300, 300]
        assert image.width > 2 * 250  # 2 inches at 300 dpi, trimmed to the content
    save_figure(_figure(), tmp_path / "f.svg")
    svg = (tmp_path / "f.svg").read_text()
    assert svg.startswith("<?xml") and "<svg" in svg and "a line" in svg
    save_figure(_figure(), tmp_path / "again.svg")  # no date, fixed ids: the same bytes
    assert (tmp_path / "again.svg").read_text() == svg
    save_figure(_figure(), tmp_path / "f.pdf")
    assert (tmp_path / "f.pdf").read_bytes()[:5] == b"%PDF-"
    with pytest.raises(InputError, match=r"f\.jpg: not a figure's name; end it in \.png, \.svg"):
        save_figure(_figure(), tmp_path / "f.jpg")
    assert not (tmp_path / "f.jpg").exists()
    assert figure_name("pcoa", "svg") == "pcoa.svg" and figure_name("pcoa") == "pcoa.png"


def test_the_config_key_takes_the_formats_and_every_dataset_a_unit():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    key = schema["properties"]["figure_format"]
    assert key["enum"] == list(FORMATS) and key["default"] == DEFAULT_FORMAT
    dataset = schema["properties"]["datasets"]["additionalProperties"]["properties"]
    assert dataset["target_unit"]["default"] is None
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    assert config["datasets"]["demo"]["target_unit"] == "years"


def test_labels_give_the_unit_and_titles_the_dataset_and_run():
    assert target_label("age", "years") == "age (years)" and target_label("age") == "age"
    assert metric_label("mae", "age", "years") == "MAE of age (years)"
    assert metric_label("r2", "age", "years") == "R² of age"  # no unit
    assert title("PCoA", "demo", "tiny") == "demo, run tiny: PCoA"
    assert title("PCoA", "demo", "demo") == "demo: PCoA" and title("PCoA") == "PCoA"


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plotting functions save, kept open instead of written."""
    figures = []

    def keep(fig, path):
        figures.append((fig, path))

    monkeypatch.setattr(prediction_plots, "save_figure", keep)
    return figures


def _texts(fig) -> list[str]:
    texts = [fig._suptitle.get_text()] if fig._suptitle else []
    for ax in fig.axes:
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
    return [t for t in texts if t]


def test_predicted_vs_true_names_the_unit_dataset_and_run(drawn, tmp_path):
    rng = np.random.default_rng(0)
    truth = pd.Series(rng.uniform(20, 60, 30), name="age")
    models = {"model": truth.to_numpy() + 1, "mean_baseline": np.full(30, 40.0)}
    target = {"column": "age", "classes": None}
    path = tmp_path / "deep/folder/predicted_vs_true.svg"
    prediction_plots.plot_predictions(
        path, models, truth, target, unit="years", dataset="demo", run="tiny"
    )
    ((fig, saved),) = drawn
    texts = _texts(fig)
    assert saved == path and fig._suptitle.get_text().startswith("demo, run tiny: ")
    assert "true age (years)" in texts and "predicted age (years)" in texts
    assert "AAM\nn=30, MAE 1.00 years" in texts
    assert not any("/" in t or "predicted_vs_true" in t for t in texts)  # never a file
    prediction_plots.plot_predictions(path, models, truth, target)  # no unit: the name alone
    assert "true age" in _texts(drawn[-1][0])


def test_history_and_learning_curve_label_every_axis_with_the_unit():
    history = pd.DataFrame({"epoch": [1, 2], "train_loss": [2.0, 1.0], "val_mae": [9.0, 7.0]})
    fig = history_figure(history, [SERIES[0], SERIES[2]], {}, "age", "years", "demo: curves")
    assert fig._suptitle.get_text() == "demo: curves"
    assert [ax.get_ylabel() for ax in fig.axes] == [
        "weighted sum of the losses",
        "MAE of age (years)",
    ]
    table = pd.DataFrame(
        {"fraction": [0.5, 1.0], "n_train": [35, 70], "n_val": [5, 10], "n_test": [20, 20]}
        | {"model_mae": [7.0, 5.0], "model_mae_low": [6.0, 4.0], "model_mae_high": [8.0, 6.0]}
    )
    (ax,) = learning_curve.curve_figure(table, "age", None, "years", "demo", "tiny").axes
    assert ax.get_ylabel() == "test MAE of age (years)"
    assert ax.get_title().startswith("demo, run tiny: learning curve")


def test_pcoa_in_svg_is_titled_by_its_dataset_not_its_file(tmp_path):
    path, metadata, _, _ = points_matrix(tmp_path)
    out = tmp_path / "out"
    args = ["--matrix", path, "--output-dir", out, "--figure-format", "svg"]
    assert aam("pcoa", *args, "--dataset", "demo", "--metric", "unweighted") == 0
    svg = (out / "pcoa.svg").read_text()
    assert "demo: PCoA of the unweighted UniFrac distances (12 samples)" in svg
    assert "m.h5" not in svg and not (out / "pcoa.png").exists()


def test_the_workflow_names_its_figures_in_the_configs_format(tmp_path):
    """The rules' outputs, the targets of rule all, the report's entries and the commands'
    flags follow config figure_format; a dataset's target_unit reaches the commands."""
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["figure_format"] = "pdf"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    plan = planned(path)
    figures = [p for p in final_outputs(plan) if p.suffix in {".png", ".svg", ".pdf"}]
    assert figures and all(p.suffix == ".pdf" for p in figures)
    assert plan.work / "runs/demo/finetune/history.pdf" in figures
    entry = report_entry(plan.work / "runs/{run}/predict/predicted_vs_true.pdf", plan.work)
    assert entry.labels["file"] == "predicted vs true"

    class Wildcards:
        run, stage, dataset, metric = "demo", "finetune", "demo", "unweighted"

    flags = Flags(plan)
    predict = flags.predict(Wildcards)
    assert "--figure-format pdf" in predict and "--target-unit years" in predict
    words = shlex.split(predict)
    assert (
        words[words.index("--dataset") + 1] == "demo" and words[words.index("--run") + 1] == "demo"
    )
    assert "--target-unit years" in flags.plot_history(Wildcards)
    assert "--stage finetune" in flags.plot_history(Wildcards)


def test_dollars_and_markup_in_a_unit_or_name_are_drawn_literally(tmp_path):
    """Issue 61, item 3: a `$` (matplotlib's math delimiter) in a config value is text, not a
    parse error after training: the figure is written and shows the value as given."""
    unit, run = "US$ ^{x}_$", "run_$\\frac{a}{"
    history = pd.DataFrame({"epoch": [1, 2], "train_loss": [2.0, 1.0], "val_mae": [9.0, 7.0]})
    fig = history_figure(history, [SERIES[0], SERIES[2]], {}, "age", unit, f"demo, {run}")
    assert fig.axes[1].get_ylabel() == f"MAE of age ({unit})"
    save_figure(fig, tmp_path / "history.png")
    rng = np.random.default_rng(0)
    truth = pd.Series(rng.uniform(20, 60, 30), name="age")
    models = {"model": truth.to_numpy() + 1, "mean_baseline": np.full(30, 40.0)}
    path = tmp_path / "predicted_vs_true.png"
    target = {"column": "age", "classes": None}
    prediction_plots.plot_predictions(path, models, truth, target, unit=unit, run=run)
    assert Image.open(path).size[0] > 100
