"""The extended whole-DAG run (tier `extended`, `make test-extended`, run by .ci/run beside
`make test`): one more `snakemake all profiling_report` on a copy of the shared DAG run
(``dag_run.completed``) with every feature the test config leaves out, and what each one wrote.

The demo's target column has a hostile name (spaces, quotes, `$(...)`, backticks, `;`) here too:
the runs below inherit it."""

import html
import json
import shutil
import statistics
from pathlib import Path

import biom
import numpy as np
import pandas as pd
import pytest
import yaml
from biom.util import biom_open
from config_edits import rerun_plans
from dag_run import run_snakemake, scheduled

from aam.analysis.overview import verdict
from aam.cli import main
from aam.unifrac.io import read_distance_matrix

# the shared DAG run and this one on one worker; deselected by `make test` (its 8-minute budget)
pytestmark = [pytest.mark.workflow, pytest.mark.extended, pytest.mark.xdist_group("workflow")]

# What the tests below check in one more Snakemake invocation on a copy of the completed run
# (CI time: they share the DAG run): a two-point sweep, a 2-fold cross-validation, a learning
# curve of two points and its from-scratch twin, the UniFrac matrix in two shards, predictions
# on another dataset, a classifier run with an ensemble and the profiling report.
EXTENDED_TARGETS = ("all", "profiling_report")


def _extend(config: dict, root: Path) -> dict:
    """The test config with the runs of `extended` (``root``: the copy, for dataset `other`)."""
    tiny, demo = config["runs"]["tiny"], config["datasets"]["demo"]
    config["datasets"]["other"] = _other_dataset(root, demo["target"])
    config["datasets"]["classes"] = {
        **demo,
        "target": "qiita_study_id",
        "classifier": True,
        "categorical": [],
        "group_column": None,  # its target: a group mean would be the answer
        "rarefy": {"depth": 500, "seed": 1},  # its jobs read the table rarefied once
    }
    config["runs"]["sweep"] = {**tiny, "sweep": {"finetune.lr": [0.001, 0.0003]}}
    config["runs"]["tinycv"] = {**tiny, "cv": {"folds": 2}}
    config["runs"]["classes"] = {**tiny, "dataset": "classes", "ensemble": {"seeds": [1]}}
    # from scratch, with the twin of tiny's learning curve (drawn beside it)
    config["runs"]["scratch"] = {**tiny, "pretrain": "none", "learning_curve": {"fractions": [0.5]}}
    tiny["predict_on"] = ["other"]
    tiny["learning_curve"] = {"fractions": [0.5], "pretrain": "shared"}  # a point: tiny_lc1
    config["unifrac"] = {"matrix": True, "shards": 2}
    demo["split_group_column"] = "qiita_study_id"  # no study on two sides of a split or fold
    config["profiling"]["run"] = "tiny"  # not the first run of the config (safe_dump sorts)
    return config


@pytest.fixture(scope="session")
def extended(completed, tmp_path_factory) -> Path:
    """A copy of the completed run after `snakemake all profiling_report` with ``_extend``'s
    config."""
    root = tmp_path_factory.mktemp("extended") / "repo"
    shutil.copytree(completed, root, symlinks=True)
    path = root / "config/test.yaml"
    path.write_text(yaml.safe_dump(_extend(yaml.safe_load(path.read_text()), root)))
    run = run_snakemake(root, "--cores", "2", targets=EXTENDED_TARGETS)
    assert run.returncode == 0, run.stderr[-3000:]
    return root


def test_report_is_produced(extended, tmp_path):
    report = str(tmp_path / "report.html")
    run = run_snakemake(extended, "--report", report, targets=EXTENDED_TARGETS)
    assert run.returncode == 0, run.stderr[-3000:]
    report = (tmp_path / "report.html").read_text()
    for category in ("1. Results", "2. Predictions", "3. Training"):  # listed sorted by name
        assert f'"{category}"' in report, category
    assert "4. Numerical self-check of the kernels" in report and '"Validation"' not in report
    assert "overview.html" in report
    assert "learning curve of tiny" in report


def test_validate_and_profiling_report_targets(extended):
    golden = (extended / "results/test/validation/golden.json").read_text()
    assert '"status": "pass"' in golden or '"pass"' in golden
    html = (extended / "results/test/profiling/report.html").read_text()
    assert html.count("<img") >= 2 and "Top 10 kernels" in html
    assert "Recommended batch size" in html and "pretrain/tiny" in html


def test_a_sweep_and_a_cross_validation_run_in_one_dag(extended, tmp_path):
    """A two-point sweep (run `sweep`) and a 2-fold cross-validation (`tinycv`), the UniFrac
    matrix in two shards."""
    work = extended / "results/test"
    # UniFrac: two shard jobs and a gather (partial files removed) wrote the matrix that one
    # `aam unifrac` writes, bit for bit
    for k in (1, 2):
        assert (work / f"logs/unifrac_shard/demo.unweighted.{k}of2.log").is_file()
    assert not list((work / "unifrac/shards").glob("*.h5"))
    single = tmp_path / "single.h5"
    staged = ["--table", work / "data/demo/table.biom", "--tree", work / "data/demo/tree.nwk"]
    args = ["unifrac", *staged, "--metric", "unweighted", "--output", single, "--no-progress"]
    assert main([str(arg) for arg in args]) == 0
    gathered = read_distance_matrix(work / "unifrac/demo.unweighted.h5")
    assert gathered[0] == read_distance_matrix(single)[0]
    assert gathered[1].tobytes() == read_distance_matrix(single)[1].tobytes()
    # the sweep: ranked on validation
    board = pd.read_csv(work / "leaderboard.tsv", sep="\t")
    assert sorted(board["run"]) == ["sweep_s1", "sweep_s2"] and list(board["rank"]) == [1, 2]
    assert list(board["best"].fillna("")) == ["yes", ""]
    val = {
        r: json.loads((work / f"runs/{r}/finetune/summary.json").read_text()) for r in board["run"]
    }
    assert board["val_value"].tolist() == pytest.approx(
        [val[r]["val_mae"] for r in board["run"]], rel=1e-5
    )
    assert board["val_value"].is_monotonic_increasing
    # one pretrained encoder for the two learning rates
    assert not (work / "runs/sweep_s2/pretrain").exists()
    # the cross-validation: folds partition the samples; no training step of a fold (its own
    # pretraining, fine-tuning, baselines) sees that fold's test samples
    splits = [
        pd.read_csv(work / f"data/demo/cv/2x42/fold{k}.split.tsv", sep="\t", dtype=str)
        for k in (1, 2)
    ]
    tests = [set(split.loc[split["split"] == "test", "sample_id"]) for split in splits]
    assert not tests[0] & tests[1] and len(tests[0] | tests[1]) == len(splits[0]) == 400
    table = pd.read_csv(work / "cv/tinycv.tsv", sep="\t", dtype={"fold": str})
    assert list(table["fold"]) == ["1", "2", "mean", "sd"]
    parts = ("model", "mean_baseline", "median_baseline", "random_forest_baseline")
    maes = {part: [] for part in parts}
    for k, test in enumerate(tests, start=1):
        for stage in ("pretrain", "finetune"):
            seen = pd.read_csv(work / f"runs/tinycv_f{k}/{stage}/split.tsv", sep="\t", dtype=str)
            assert test.isdisjoint(seen.loc[seen["split"] != "test", "sample_id"]), (k, stage)
        predicted = pd.read_csv(
            work / f"runs/tinycv_f{k}/predict/predictions.tsv", sep="\t", dtype={"sample_id": str}
        )
        assert set(predicted["sample_id"]) == test
        metrics = json.loads((work / f"runs/tinycv_f{k}/predict/metrics.json").read_text())
        for part, values in maes.items():
            values.append(metrics[part]["mae"])
            assert table.loc[k - 1, f"{part}_mae"] == pytest.approx(values[-1], rel=1e-5)
    for part, values in maes.items():
        assert table.loc[2, f"{part}_mae"] == pytest.approx(statistics.fmean(values), rel=1e-5)
        assert table.loc[3, f"{part}_mae"] == pytest.approx(statistics.stdev(values), rel=1e-5)


def test_a_learning_curve_point_trains_on_half_and_is_tested_on_the_same_samples(extended):
    """Run `tiny`'s learning curve: a point on half of its training and validation samples
    (`tiny_lc1`, fine-tuned from tiny's encoder: pretrain shared) beside tiny itself."""
    work = extended / "results/test"
    whole = pd.read_csv(work / "data/demo/split.tsv", sep="\t", dtype=str).set_index("sample_id")
    half = pd.read_csv(work / "data/demo/lc/42/0.5.split.tsv", sep="\t", dtype=str)
    half = half.set_index("sample_id")["split"]
    whole = whole["split"]
    for label in ("train", "val"):
        kept = set(half.index[half == label])
        assert kept <= set(whole.index[whole == label])
        assert len(kept) == round(0.5 * (whole == label).sum())
    assert set(half.index[half == "test"]) == set(whole.index[whole == "test"])
    seen = pd.read_csv(work / "runs/tiny_lc1/finetune/split.tsv", sep="\t", dtype=str)
    assert set(seen.loc[seen["split"] == "train", "sample_id"]) == set(half.index[half == "train"])
    command = json.loads((work / "runs/tiny_lc1/finetune/provenance.json").read_text())["command"]
    encoder = command[command.index("--pretrained-encoder") + 1]
    assert encoder == "results/test/runs/tiny/pretrain/encoder.pt"
    assert not (work / "runs/tiny_lc1/pretrain").exists()
    # the point's baselines, fitted on its half, predict every sample of its split
    baselines = pd.read_csv(work / "baselines/demo/lc/42/0.5.tsv", sep="\t", dtype=str)
    forest = baselines[baselines["model"] == "random_forest"].set_index("sample_id")["split"]
    assert forest.sort_index().equals(half.sort_index().rename("split"))
    curve = pd.read_csv(work / "learning_curve/tiny.tsv", sep="\t")
    assert list(curve["fraction"]) == [0.5, 1.0]
    assert list(curve["n_train"]) == [(half == "train").sum(), (whole == "train").sum()]
    for row, run in enumerate(("tiny_lc1", "tiny")):
        metrics = json.loads((work / f"runs/{run}/predict/metrics.json").read_text())
        for part in ("model", "mean_baseline", "median_baseline", "random_forest_baseline"):
            assert curve.loc[row, f"{part}_mae"] == pytest.approx(metrics[part]["mae"], rel=1e-5)
            low, high = metrics["intervals"][part]["mae"]
            assert curve.loc[row, f"{part}_mae_low"] == pytest.approx(low, rel=1e-5)
            assert curve.loc[row, f"{part}_mae_high"] == pytest.approx(high, rel=1e-5)
    assert curve.loc[0, "random_forest_baseline_mae"] != curve.loc[1, "random_forest_baseline_mae"]
    assert (work / "learning_curve/tiny.png").read_bytes()[:4] == b"\x89PNG"


def test_a_run_from_scratch_draws_its_curve_beside_the_pretrained_one(extended):
    """Run `scratch` (pretrain: none) and its learning curve, the twin of tiny's."""
    work = extended / "results/test"
    for run in ("scratch", "scratch_lc1"):
        command = json.loads((work / f"runs/{run}/finetune/provenance.json").read_text())
        assert "--pretrained-encoder" not in command["command"]
        assert not (work / f"runs/{run}/pretrain").exists()
    curve = pd.read_csv(work / "learning_curve/tiny.tsv", sep="\t")
    for row, run in enumerate(("scratch_lc1", "scratch")):
        metrics = json.loads((work / f"runs/{run}/predict/metrics.json").read_text())
        assert curve.loc[row, "scratch_mae"] == pytest.approx(metrics["model"]["mae"], rel=1e-5)
    assert "scratch_mae" not in pd.read_csv(work / "learning_curve/scratch.tsv", sep="\t")


def test_an_ensemble_averages_its_members_class_probabilities(extended):
    """Run `classes` with one more seed (`classes_e1`): rule ensemble averages the two."""
    work = extended / "results/test"
    read = lambda path: pd.read_csv(path, sep="\t", dtype={"sample_id": str})  # noqa: E731
    members = [
        read(work / f"runs/{run}/predict/predictions.tsv") for run in ("classes", "classes_e1")
    ]
    ensemble = read(work / "runs/classes/ensemble/predictions.tsv")
    probs = [c for c in ensemble if c.startswith("prob_")]
    assert len(probs) > 1 and list(ensemble["sample_id"]) == list(members[0]["sample_id"])
    mean = (members[0][probs] + members[1][probs]) / 2
    assert np.allclose(ensemble[probs], mean, atol=2e-6)  # the files keep 6 digits
    assert not np.allclose(members[0][probs], members[1][probs], atol=1e-4)
    metrics = json.loads((work / "runs/classes/ensemble/metrics.json").read_text())
    assert [Path(p).parent.parent.name for p in metrics["ensemble"]] == ["classes", "classes_e1"]
    summary = pd.read_csv(work / "summary.tsv", sep="\t")
    assert "classes_ensemble" in set(summary["run"])
    assert "run classes_ensemble" in (work / "overview.html").read_text()


def test_classifier_run_writes_every_declared_output(extended):
    """Run `classes`: a categorical target (``classifier: true``, the demo's study IDs), on its
    dataset's table rarefied once to 500 reads (``rarefy:``)."""
    work = extended / "results/test"
    rarefied = biom.load_table(str(work / "data/classes/rarefied.biom"))
    assert set(rarefied.sum(axis="sample")) == {500.0} and rarefied.shape[1] == 400
    staged = biom.load_table(str(work / "data/classes/table.biom"))
    assert staged.sum() == 400 * 1000  # the staged copy stays as given
    for stage in ("pretrain", "finetune", "predict"):
        command = json.loads((work / f"runs/classes/{stage}/provenance.json").read_text())
        table = command["command"][command["command"].index("--table") + 1]
        assert table == "results/test/data/classes/rarefied.biom", (stage, table)
    out = work / "runs/classes/predict"
    predictions = pd.read_csv(out / "predictions.tsv", sep="\t", dtype=str)
    split = pd.read_csv(work / "data/classes/split.tsv", sep="\t", dtype=str)
    assert set(predictions["sample_id"]) == set(split.loc[split["split"] == "test", "sample_id"])
    classes = [c.removeprefix("prob_") for c in predictions if c.startswith("prob_")]
    assert len(classes) > 2 and set(predictions["prediction"]) <= set(classes)
    metrics = json.loads((out / "metrics.json").read_text())
    for model in ("model", "mean_baseline", "random_forest_baseline"):
        assert 0.0 <= metrics[model]["accuracy"] <= 1.0, model
    # a classifier's constant is the class frequencies (mean_baseline): no median, no spread
    assert "median_baseline" not in metrics and "spread" not in metrics
    assert (out / "predicted_vs_true.png").read_bytes()[:4] == b"\x89PNG"  # confusion matrices
    summary = pd.read_csv(work / "summary.tsv", sep="\t").set_index("run")
    assert summary.loc["classes", "target"] == "qiita_study_id"
    assert {"AAM_accuracy", "random_forest_baseline_accuracy"} <= set(summary)
    # the front page's table of the run, judged on accuracy, and the ASVs of the classifier
    page = (work / "overview.html").read_text()
    assert "<h2>run classes <small>dataset classes, target qiita_study_id</small></h2>" in page
    assert html.escape(verdict(metrics)) in page and "accuracy" in verdict(metrics)
    importance = pd.read_csv(work / "runs/classes/importance/importance.tsv", sep="\t", comment="#")
    assert importance["aam_score"].iloc[0] > 0 and (importance["forest_score"] != 0).any()


def _other_dataset(root: Path, target: str) -> dict:
    """Dataset `other` in ``root/data/other``: 20 samples of study 1841 under new IDs, three
    times the reads, two ASVs the demo lacks, 5 samples of a study ID unseen in training, 3
    without a target value."""
    demo = biom.load_table(str(root / "data/demo/table.biom"))
    ids = [s for s in demo.ids() if s.startswith("1841.")][:20]
    part = demo.filter(ids, inplace=False).remove_empty(axis="observation")
    counts = 3 * part.matrix_data.toarray()
    new = np.zeros((2, len(ids)))
    new[:, :10] = 40
    asvs = [*part.ids("observation"), "ACGT" * 25, "TTGCA" * 20]
    names = [f"other.{s}" for s in ids]
    (root / "data/other").mkdir()
    with biom_open(str(root / "data/other/table.biom"), "w") as handle:
        biom.Table(np.vstack([counts, new]), asvs, names).to_hdf5(handle, "test")
    metadata = pd.read_csv(
        root / "data/demo/metadata.tsv", sep="\t", dtype=str, keep_default_na=False
    )
    metadata = metadata.set_index("sample_id").loc[ids]
    metadata.index = pd.Index(names, name="sample_id")
    metadata.iloc[:5, metadata.columns.get_loc("qiita_study_id")] = "99999"
    metadata.iloc[-3:, metadata.columns.get_loc(target)] = ""
    rows = [["sample_id", *metadata.columns], *([k, *v] for k, v in metadata.iterrows())]
    text = "".join("\t".join(map(str, row)) + "\n" for row in rows)  # the header unquoted
    (root / "data/other/metadata.tsv").write_text(text)
    return {
        "table": "data/other/table.biom",
        "tree": "data/demo/tree.nwk",
        "metadata": "data/other/metadata.tsv",
        "target": target,
        "categorical": ["qiita_study_id"],
    }


def test_predict_on_another_dataset_adds_only_its_jobs(copy, extended):
    config = yaml.safe_load((copy / "config/test.yaml").read_text())
    config["datasets"]["other"] = _other_dataset(copy, config["datasets"]["demo"]["target"])
    config["runs"]["tiny"]["predict_on"] = ["other"]
    (copy / "config/test.yaml").write_text(yaml.safe_dump(config))
    # check_data: the new dataset's, and the run's own (it checks the covariates of `other`);
    # the landing page, which links the new files
    expected = {"check_data", "stage", "baselines_on", "predict_on", "overview", "all"}
    assert scheduled(copy) == expected
    out = extended / "results/test/runs/tiny/predict_on/other"
    predictions = pd.read_csv(out / "predictions.tsv", sep="\t", dtype={"sample_id": str})
    assert len(predictions) == 20 and predictions["sample_id"].str.startswith("other.").all()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 17 and len(metrics["excluded"]["no_target_value"]) == 3
    sections = {"model", "mean_baseline", "median_baseline", "random_forest_baseline"}
    assert sections <= set(metrics) and set(metrics["intervals"]) == sections
    shift = json.loads((out / "domain_shift.json").read_text())
    assert (
        shift["samples"]["not_predicted"] == {} and shift["samples"]["also_training_samples"] == 0
    )
    split = pd.read_csv(extended / "results/test/data/demo/split.tsv", sep="\t", dtype=str)
    demo = biom.load_table(str(extended / "data/demo/table.biom"))
    train = demo.filter(split.loc[split["split"] == "train", "sample_id"], inplace=False)
    other = biom.load_table(str(extended / "data/other/table.biom"))
    trained = set(train.remove_empty(axis="observation").ids("observation"))
    unseen = [a for a in other.ids("observation") if a not in trained]
    assert shift["asvs"]["unseen_in_training"] == len(unseen) >= 2  # the two new ASVs and more
    assert shift["asvs"]["samples_with_unseen_asvs"] == 10
    assert shift["depth"]["above_training_max"] == 20  # 3000 reads; the demo's are 1000
    unknown = shift["categories"]["qiita_study_id"]
    assert unknown["unseen_values"] == {"99999": 5} and unknown["unknown"] == 5


def run_section_of(root: Path, run: str) -> str:
    """Run ``run``'s section of the landing page (up to the next run's)."""
    page = (root / "results/test/overview.html").read_text()
    return page.split(f"<h2>run {run} ")[1].split("<h2>")[0]


def test_grouped_splits_keep_every_study_on_one_side_of_the_split_and_of_each_fold(extended):
    work = extended / "results/test/data/demo"
    studies = pd.read_csv(
        extended / "data/demo/metadata.tsv", sep="\t", dtype=str, index_col="sample_id"
    )["qiita_study_id"]
    splits = [work / "split.tsv", *sorted(work.glob("cv/*/fold*.split.tsv"))]
    assert len(splits) == 3  # the run's split and tinycv's 2 folds
    for path in splits:
        split = pd.read_csv(path, sep="\t", dtype=str, index_col="sample_id")["split"]
        sides = studies.loc[split.index].groupby(split.to_numpy()).unique()
        seen = [study for side in sides for study in side]
        assert len(seen) == len(set(seen)), (path, sides.to_dict())
    metrics = json.loads((extended / "results/test/runs/tiny/predict/metrics.json").read_text())
    assert metrics["split_groups"]["in_training"] == []  # the page: scores on new studies
    assert "<p class=warn>Split" not in run_section_of(extended, "tiny")  # no split warning


def test_every_key_of_every_feature_reruns_what_it_changes(extended, tmp_path):
    """tests/test_config_reruns.py on the extended run: with every feature on, the keys of
    folds, ensembles, learning curves, sweeps, shards, other datasets and the profiling target
    too; a dry run schedules exactly the jobs an edit changes and what reads their outputs.
    Each key of the schema once, in the last dataset or run that takes an edit of it (the
    features' runs; test_config_reruns.py edits each key of `tiny` and `demo`)."""
    root = tmp_path / "repo"
    shutil.copytree(extended, root, symlinks=True)
    reruns = rerun_plans(root, "config/test.yaml", EXTENDED_TARGETS, tmp_path, once=True)
    assert reruns["base"] == []
    edits = reruns["edits"]
    refused = {key: edit["refused"] for key, edit in edits.items() if "refused" in edit}
    # 2 UniFrac shards take the builtin engine on the cpu only (test_config_reruns.py edits
    # them); demo, the one grouped dataset, is cross-validated, and folds leave no group out
    # (test_grouped_split.py checks the flag); so no dataset leaves a study out for a new study
    # (test_new_study.py plans one)
    expected = {"unifrac.engine", "unifrac.device", "datasets.*.split_test_group"}
    expected |= {"runs.*.new_study"}
    # every run here has a feature a search excludes (a sweep, cv, an ensemble, a learning
    # curve): the search's reruns are test_search_workflow.py's (a changed space, a raised
    # budget)
    expected |= {"runs.*.search"}
    assert set(refused) == expected, refused
    wrong = {
        key: sorted(set(edit["scheduled"]) ^ set(edit["downstream"]))
        for key, edit in edits.items()
        if key not in refused and set(edit["scheduled"]) != set(edit["downstream"])
    }
    assert not wrong, wrong
    for key in ("runs.*.cv.folds", "runs.*.ensemble.seeds", "runs.*.sweep", "profiling.steps"):
        assert edits[key]["changed"], key  # keys of features the test config leaves off
