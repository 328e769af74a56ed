"""Predicting another study: the forest's features aligned by ASV, the domain-shift report, and
`aam predict` / `aam baselines` on a table that has new ASVs, other depths, unseen categories and
classes, samples without a target and samples below the rarefaction depth."""

import json
from pathlib import Path

import biom
import numpy as np
import pandas as pd
import pytest
from test_cli_training import (
    aam,
    assert_failed,
    micro_metadata,
    micro_table,
    micro_train,
    write_metadata,
    write_table,
)

from aam.analysis.baselines import aligned_abundances
from aam.analysis.domain_shift import (
    asv_overlap,
    depth_comparison,
    not_predicted,
    token_limit_cut,
    unseen_categories,
)
from aam.data.samples import SampleSet
from aam.errors import InputError

NEW = ["GGGGCCCCAAAATTTTGGGGCCCC", "CATCATCATCATCATCATCATCAT", "TGCATGCATGCATGCATGCATGCA"]


def test_aligned_abundances_put_shared_asvs_in_the_fitted_columns():
    table = biom.Table(
        np.array([[2.0, 0.0], [6.0, 1.0], [2.0, 3.0]]), ["b", "new", "a"], ["x", "y"]
    )
    matrix = aligned_abundances(table, ["a", "b", "c"], "other.biom").toarray()
    # columns a, b, c; the reads of "new" count in each sample's total but get no column
    np.testing.assert_allclose(matrix, [[0.2, 0.2, 0.0], [0.75, 0.0, 0.0]])
    empty = biom.Table(np.array([[1.0, 0.0]]), ["a"], ["x", "y"])
    with pytest.raises(InputError, match=r"other.biom: 1 sample\(s\) have no reads \(e.g. y\)"):
        aligned_abundances(empty, ["a"], "other.biom")


def test_asv_overlap_counts_unseen_asvs_and_their_read_share():
    table = biom.Table(
        np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 4.0]]), ["a", "n1", "n2"], ["x", "y"]
    )
    overlap = asv_overlap(table, {"a", "b"})
    assert overlap["asvs"] == 3 and overlap["unseen_in_training"] == 2
    assert overlap["unseen_read_share"] == pytest.approx({"mean": (0.25 + 0.5) / 2, "max": 0.5})
    assert overlap["samples_with_unseen_asvs"] == 2


def test_depth_comparison_against_the_training_range_and_the_rarefaction_depth():
    depths = pd.Series([5.0, 50.0, 500.0], index=["x", "y", "z"])
    training = pd.Series([40.0, 60.0, 80.0])
    report = depth_comparison(depths, training, rarefy_depth=45)
    assert report["below_training_min"] == 1 and report["above_training_max"] == 1
    assert report["below_rarefy_depth"] == 1 and report["rarefy_depth"] == 45
    assert report["reads"][0] == 5.0 and report["reads"][-1] == 500.0
    assert report["training_reads"][3] == 60.0  # the median
    assert depth_comparison(depths, training, None)["below_rarefy_depth"] == 0


def test_token_limit_cut_is_the_share_of_reads_past_the_first_asvs():
    samples = SampleSet(
        sample_ids=["x", "y"],
        asv_ids=["a", "b", "c"],
        tokens=np.zeros((3, 2), dtype=np.uint8),
        asv_ptr=np.array([0, 3, 4]),
        asv_idx=np.array([0, 1, 2, 0]),
        counts=np.array([1.0, 1.0, 2.0, 5.0], dtype=np.float32),
    )
    cut = token_limit_cut(samples, token_limit=2)
    assert cut["samples_over"] == 1 and cut["max_asvs"] == 3
    assert cut["left_out_read_share"] == {"mean": 0.5, "max": 0.5}
    assert token_limit_cut(samples, 3)["samples_over"] == 0


def test_unseen_categories_and_empty_cells_map_to_unknown():
    metadata = pd.DataFrame(
        {"site": ["gut", "skin", None, "skin", "lung"]}, index=["a", "b", "c", "d", "e"]
    )
    report = unseen_categories(metadata, ["a", "b", "c", "d"], {"site": ["gut", "oral"]})
    assert report == {"site": {"unknown": 3, "unseen_values": {"skin": 2}, "empty": 1}}


def test_not_predicted_gives_each_missing_sample_a_reason():
    depths = pd.Series([3.0, 90.0, 90.0], index=["shallow", "ok", "no_metadata"])
    reasons = not_predicted(
        ["shallow", "ok", "no_metadata"], ["shallow", "ok", "no_table"], {"ok"}, depths, 10
    )
    assert reasons == {
        "shallow": "3 reads, fewer than rarefy_depth 10",
        "no_metadata": "in the table, not in the metadata",
        "no_table": "in the metadata, not in the table",
    }
    with pytest.raises(RuntimeError, match="ok was dropped for no known reason"):
        not_predicted(["ok"], None, set(), depths, None)


def other_study(root: Path) -> tuple[Path, Path]:
    """Six samples o0..o5 of another study: the training ASVs but the last, three new ASVs,
    ten times the training depth (o5: 3 reads); site "skin" unseen in training, o2's site
    empty; o3 has no age."""
    training = micro_table()
    known = [str(a) for a in training.ids("observation")][:-1]
    rng = np.random.default_rng(11)
    counts = rng.integers(20, 200, size=(len(known) + len(NEW), 6)).astype(float)
    counts[:, 5] = 0
    counts[[0, len(known)], 5] = [2, 1]
    table = write_table(
        root / "other.biom", biom.Table(counts, known + NEW, [f"o{k}" for k in range(6)])
    )
    metadata = pd.DataFrame(
        {
            "age": [25.0, 35.0, 45.0, np.nan, 55.0, 65.0],
            "site": ["gut", "skin", None, "oral", "skin", "gut"],
        },
        index=pd.Index([f"o{k}" for k in range(6)], name="sample_id"),
    )
    return table, write_metadata(root / "other.tsv", metadata)


@pytest.fixture(scope="module")
def studies(tmp_path_factory) -> dict[str, Path]:
    """The micro study with a model fine-tuned on age with the site covariate, and the other
    study."""
    root = tmp_path_factory.mktemp("predict_on")
    paths = {
        "table": write_table(root / "table.biom", micro_table()),
        "metadata": write_metadata(root / "metadata.tsv", micro_metadata()),
        "model_dir": root / "model",
    }
    paths["other"], paths["other_metadata"] = other_study(root)
    rc = micro_train(
        paths["table"], paths["metadata"], paths["model_dir"], "--categorical-columns", "site"
    )
    assert rc == 0
    paths["split"] = paths["model_dir"] / "split.tsv"
    return paths


def predict_other(studies: dict[str, Path], out: Path, *extra: str | Path) -> int:
    inputs = ["--model", studies["model_dir"] / "model.pt", "--table", studies["other"]]
    inputs += ["--metadata", studies["other_metadata"], "--output-dir", out]
    inputs += ["--training-table", studies["table"], "--training-split", studies["split"]]
    return aam("predict", *inputs, *extra)


@pytest.mark.slow
def test_the_other_study_gets_predictions_baselines_metrics_and_a_shift_report(studies, tmp_path):
    baselines = tmp_path / "baselines.tsv"
    fit = ["--table", studies["table"], "--metadata", studies["metadata"], "--target-column", "age"]
    fit += ["--split", studies["split"], "--trees", "10", "--predict-table", studies["other"]]
    assert aam("baselines", *fit, "--output", baselines) == 0
    forest = pd.read_csv(baselines, sep="\t", dtype={"sample_id": str}, keep_default_na=False)
    assert sorted(forest["sample_id"].unique()) == [f"o{k}" for k in range(6)]
    assert set(forest["split"]) == {""}

    out = tmp_path / "predict"
    assert predict_other(studies, out, "--baselines", baselines) == 0
    table = pd.read_csv(out / "predictions.tsv", sep="\t", dtype={"sample_id": str})
    assert list(table["sample_id"]) == [f"o{k}" for k in range(6)]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 5 and metrics["excluded"] == {"no_target_value": ["o3"]}
    sections = {"model", "mean_baseline", "median_baseline", "random_forest_baseline"}
    assert sections <= set(metrics) and set(metrics["intervals"]) == sections
    rows = forest[forest["model"] == "random_forest"].set_index("sample_id")
    known = table.dropna(subset=["true"])
    mae = (rows.loc[known["sample_id"], "prediction"].to_numpy() - known["true"]).abs().mean()
    assert metrics["random_forest_baseline"]["mae"] == pytest.approx(mae, rel=1e-4)
    # which model read what (issue 41): AAM was fine-tuned with the site covariate
    assert metrics["inputs"] == {
        "model": ["microbiome", "site"],
        "mean_baseline": [],
        "median_baseline": [],
        "random_forest_baseline": ["microbiome"],
    }

    shift = json.loads((out / "domain_shift.json").read_text())
    assert shift["samples"] == {
        "table": 6,
        "predicted": 6,
        "not_predicted": {},
        "also_training_samples": 0,
    }
    assert shift["asvs"]["unseen_in_training"] == 3 and shift["asvs"]["asvs"] == 10
    assert shift["depth"]["below_training_min"] == 1  # o5, 3 reads
    assert shift["depth"]["above_training_max"] == 5
    assert shift["token_limit"] == {
        "token_limit": 8,
        "samples_over": 5,  # 10 ASVs each; o5 has 2
        "max_asvs": 10,
        "left_out_read_share": shift["token_limit"]["left_out_read_share"],
    }
    assert shift["categories"] == {"site": {"unknown": 3, "unseen_values": {"skin": 2}, "empty": 1}}


def test_samples_below_the_rarefaction_depth_are_reported_not_predicted(studies, tmp_path):
    out = tmp_path / "predict"
    assert predict_other(studies, out, "--rarefy-depth", "20") == 0
    table = pd.read_csv(out / "predictions.tsv", sep="\t", dtype={"sample_id": str})
    assert list(table["sample_id"]) == [f"o{k}" for k in range(5)]
    shift = json.loads((out / "domain_shift.json").read_text())
    assert shift["samples"]["not_predicted"] == {"o5": "3 reads, fewer than rarefy_depth 20"}
    assert shift["depth"]["below_rarefy_depth"] == 1
    assert json.loads((out / "metrics.json").read_text())["n"] == 4


@pytest.mark.slow
def test_classes_unseen_in_training_are_excluded_from_the_metrics(studies, tmp_path):
    model = tmp_path / "classifier"
    rc = micro_train(studies["table"], studies["metadata"], model, "--classifier", target="site")
    assert rc == 0
    out = tmp_path / "predict"
    inputs = ["--model", model / "model.pt", "--table", studies["other"]]
    assert (
        aam("predict", *inputs, "--metadata", studies["other_metadata"], "--output-dir", out) == 0
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["excluded"] == {
        "no_target_value": ["o2"],
        "class_not_in_training": {"skin": ["o1", "o4"]},
    }
    assert metrics["n"] == 3 and "accuracy" in metrics["model"]


@pytest.mark.slow
def test_the_truth_column_may_have_another_name_or_no_values(studies, tmp_path):
    metadata = pd.read_csv(studies["other_metadata"], sep="\t", index_col="sample_id")
    renamed = write_metadata(tmp_path / "renamed.tsv", metadata.rename(columns={"age": "years"}))
    inputs = ["--model", studies["model_dir"] / "model.pt", "--table", studies["other"]]
    out = tmp_path / "renamed"
    rc = aam(
        "predict", *inputs, "--metadata", renamed, "--target-column", "years", "--output-dir", out
    )
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 5 and metrics["target"] == "years"

    metadata["age"] = np.nan
    empty = write_metadata(tmp_path / "empty.tsv", metadata)
    out = tmp_path / "empty"
    assert aam("predict", *inputs, "--metadata", empty, "--output-dir", out) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 0 and "no predicted sample has a 'age' value" in metrics["no_metrics"]
    assert len(metrics["excluded"]["no_target_value"]) == 6
    assert (out / "predicted_vs_true.png").read_bytes()[:4] == b"\x89PNG"  # says why: no metrics


@pytest.mark.slow
def test_a_target_column_asked_for_and_missing_is_one_line(studies, tmp_path, capsys):
    """--target-column names the truth: a metadata file without that column is an error (exit
    2, nothing written), not predictions without metrics (issue 41)."""
    out = tmp_path / "predict"
    inputs = ["--model", studies["model_dir"] / "model.pt", "--table", studies["other"]]
    inputs += ["--metadata", studies["other_metadata"], "--target-column", "Age"]
    rc = aam("predict", *inputs, "--output-dir", out)
    assert_failed(rc, capsys, "predict", out, "no column 'Age' for --target-column")


def test_training_table_without_its_split_is_one_line(studies, tmp_path, capsys):
    out = tmp_path / "predict"
    inputs = ["--model", studies["model_dir"] / "model.pt", "--table", studies["other"]]
    inputs += ["--metadata", studies["other_metadata"], "--training-table", studies["table"]]
    rc = aam("predict", *inputs, "--output-dir", out)
    assert_failed(rc, capsys, "predict", out, "--training-table and --training-split")
