"""k-fold cross-validation: fold splits (`aam split --folds`), fold runs expanded from `cv:`
before any job, bad `cv:` settings stopped in one line, and the per-fold / mean +- sd table
(`aam cross-validation`). The real 2-fold DAG run is in test_workflow_extended.py (beside the
sweep's)."""

import json
import math
import statistics

import biom
import pandas as pd
import pytest
import yaml
from biom.util import biom_open
from checkout import REPO, dry_run, job_counts
from planning import check_data_error, plan_error
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from aam.analysis.cross_validation import fold_table
from aam.cli import main
from aam.data.split import make_fold_split, read_split
from aam.errors import InputError
from aam.workflow.config import config_error_line, expand_cv

IDS = [f"s{i:02d}" for i in range(53)]


def _folds(ids, folds, **options):
    options = {"val_fraction": 0.1, "seed": 7, **options}
    return [make_fold_split(ids, folds=folds, fold=k, **options) for k in range(1, folds + 1)]


# --- fold splits ------------------------------------------------------------------------------


def test_test_parts_partition_the_samples_and_no_fold_trains_on_its_test_samples():
    splits = _folds(IDS, 5)
    tests = [set(split.index[split == "test"]) for split in splits]
    assert set().union(*tests) == set(IDS) and sum(map(len, tests)) == len(IDS)
    assert sorted(map(len, tests)) == [10, 10, 11, 11, 11]
    for split, test in zip(splits, tests, strict=True):
        assert list(split.index) == IDS and set(split) == {"train", "val", "test"}
        rest = len(IDS) - len(test)
        assert (split == "val").sum() == round(0.1 * rest)
        assert test.isdisjoint(split.index[split != "test"])


def test_class_targets_are_stratified():
    classes = ["a"] * 20 + ["b"] * 10 + ["c"] * 5
    ids = IDS[: len(classes)]
    for split in _folds(ids, 5, classes=classes):
        tested = pd.Series(classes, index=ids)[split == "test"]
        assert tested.value_counts().to_dict() == {"a": 4, "b": 2, "c": 1}


def test_folds_are_seeded():
    first, again, other = _folds(IDS, 3), _folds(IDS, 3), _folds(IDS, 3, seed=8)
    assert all(a.equals(b) for a, b in zip(first, again, strict=True))
    assert not all(a.equals(b) for a, b in zip(first, other, strict=True))


@pytest.mark.parametrize(
    ("ids", "options", "message"),
    [
        (IDS[:3], {"folds": 4, "fold": 1}, "--folds: 4 folds but only 3 samples; use at most 3"),
        (IDS, {"folds": 1, "fold": 1}, "--folds: 1 folds; cross-validation needs at least 2"),
        (IDS, {"folds": 3, "fold": 4}, "--fold 4: must be in 1..3"),
        (IDS[:6], {"folds": 3, "fold": 1, "classes": list("aaaabb")}, "class 'b' has only 2"),
        (IDS[:4], {"folds": 2, "fold": 1, "val_fraction": 0.5}, "1 training samples"),
    ],
    ids=["more-folds-than-samples", "one-fold", "fold-out-of-range", "small-class", "no-train"],
)
def test_impossible_folds_are_one_line(ids, options, message):
    with pytest.raises(InputError) as err:
        make_fold_split(ids, **{"val_fraction": 0.1, "seed": 1, **options})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_aam_split_writes_each_fold_of_the_labelled_samples(tmp_path, demo_dir):
    paths = [tmp_path / f"fold{k}.split.tsv" for k in (1, 2)]
    for k, path in enumerate(paths, start=1):
        argv = ["split", "--table", str(demo_dir / "table.biom"), "--output", str(path)]
        argv += ["--metadata", str(demo_dir / "metadata.tsv"), "--target-column", "age"]
        assert main([*argv, "--folds", "2", "--fold", str(k), "--seed", "3"]) == 0
    splits = [read_split(path) for path in paths]
    tests = [set(split.index[split == "test"]) for split in splits]
    assert tests[0].isdisjoint(tests[1]) and len(tests[0] | tests[1]) == len(splits[0]) == 400


def test_aam_split_folds_needs_fold(tmp_path, demo_dir, capsys):
    argv = ["split", "--table", str(demo_dir / "table.biom"), "--output", str(tmp_path / "s.tsv")]
    assert main([*argv, "--folds", "2"]) == 2
    assert "--folds and --fold go together" in capsys.readouterr().err
    assert not (tmp_path / "s.tsv").exists()


# --- fold runs --------------------------------------------------------------------------------

BASE = {"dataset": "demo", "model": {"embedding_dim": 16}, "finetune": {"epochs": 1}}


def test_each_fold_is_a_run_and_shared_pretraining_pretrains_once():
    runs = {
        "a": {**BASE, "cv": {"folds": 3}},
        "b": {**BASE, "cv": {"folds": 2, "seed": 5, "pretrain": "shared"}},
        "c": BASE,
    }
    expanded, cv = expand_cv(runs, default_seed=42)
    assert list(expanded) == ["a_f1", "a_f2", "a_f3", "b_f1", "b_f2", "c"]
    assert cv["a"] == {
        "dataset": "demo",
        "folds": 3,
        "seed": 42,
        "pretrain": "per_fold",
        "members": {"a_f1": 1, "a_f2": 2, "a_f3": 3},
    }
    assert cv["b"]["seed"] == 5 and cv["b"]["pretrain"] == "shared"
    # per_fold: every fold pretrains its own encoder; shared: the first fold's serves all
    assert [expanded[f"a_f{k}"].get("encoder_from") for k in (1, 2, 3)] == [None] * 3
    assert [expanded[f"b_f{k}"].get("encoder_from") for k in (1, 2)] == [None, "b_f1"]
    assert "cv" not in expanded["a_f1"] and expanded["c"] == BASE


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        (
            {"a": {**BASE, "cv": {"folds": 2}, "sweep": {"finetune.lr": [0.1]}}},
            "config runs.a.sweep: not with cv",
        ),
        (
            {"a": {**BASE, "cv": {"folds": 2}, "encoder_from": "b"}, "b": BASE},
            "config runs.a.encoder_from: not with cv",
        ),
        (
            {"a": {**BASE, "cv": {"folds": 2}, "predict_on": ["other"]}},
            "config runs.a.predict_on: not with cv",
        ),
        ({"a": {**BASE, "cv": {"folds": 2}}, "a_f2": BASE}, "member a_f2 is already a run"),
    ],
    ids=["sweep", "encoder-from", "predict-on", "member-name-taken"],
)
def test_a_cv_run_that_cannot_be_expanded_is_one_line(runs, message):
    with pytest.raises(ValueError) as err:
        expand_cv(runs, default_seed=42)
    assert message in str(err.value) and "\n" not in str(err.value)


def _config(tmp_path, cv, **dataset):
    if dataset.get("table") == "{ten}":  # the demo's first 10 samples (a DAG of 11 folds)
        table = biom.load_table(str(REPO / "data/demo/table.biom"))
        ten = table.filter(table.ids()[:10], inplace=False).remove_empty(axis="observation")
        dataset["table"] = str(tmp_path / "ten.biom")
        with biom_open(dataset["table"], "w") as handle:
            ten.to_hdf5(handle, "ten samples")
    if dataset.get("split_file") == "{split}":  # a valid split of every demo sample
        ids = pd.read_csv(REPO / "data/demo/metadata.tsv", sep="\t", dtype=str)["sample_id"]
        dataset["split_file"] = str(tmp_path / "given.tsv")
        pd.DataFrame({"sample_id": ids, "split": "train"}).to_csv(
            dataset["split_file"], sep="\t", index=False
        )
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config["runs"]["tiny"]["cv"] = cv
    config["datasets"]["demo"].update(dataset)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.workflow
def test_per_fold_pretrains_each_fold_and_shared_once_on_every_sample(tmp_path, checkout_copy):
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    tiny = config["runs"].pop("tiny")
    config["runs"]["strict"] = {**tiny, "cv": {"folds": 3}}
    config["runs"]["shared"] = {**tiny, "cv": {"folds": 3, "pretrain": "shared"}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    run = dry_run(checkout_copy, path, "--printshellcmds")
    assert run.returncode == 0, run.stderr[-2000:]
    counts = job_counts(run.stdout)
    # the two runs share the 3 folds and their baselines (same folds and seed)
    assert counts["cv_split"] == counts["subset_baselines"] == 3 and "split" not in counts
    assert counts["pretrain"] == 4 and counts["finetune"] == 6
    assert counts["cross_validation"] == 2
    pretrain = [line for line in run.stdout.splitlines() if " pretrain --table" in line]
    splits = {line.split("/runs/")[1].split("/")[0]: line for line in pretrain}
    assert sorted(splits) == ["shared_f1", "strict_f1", "strict_f2", "strict_f3"]
    assert "--split" not in splits["shared_f1"]
    for k in (1, 2, 3):
        assert (
            f"--split {tmp_path}/work/data/demo/cv/3x42/fold{k}.split.tsv" in splits[f"strict_f{k}"]
        )


@pytest.mark.parametrize(
    ("cv", "dataset", "message"),
    [
        (
            {"folds": 11},
            {"table": "{ten}"},
            "config runs.tiny.cv.folds (dataset demo, samples with a target): 11 folds but "
            "only 10 samples; use at most 10 folds",
        ),
        (
            {"folds": 2},
            {"target": "qiita_study_id", "classifier": True, "categorical": []}
            | {"group_column": None},
            "config runs.tiny.cv.folds (dataset demo, samples with a target): 2 folds but class "
            "'10052' has only 1 sample(s)",
        ),
        (
            {"folds": 2},
            {"split_file": "{split}"},
            "config runs.tiny.cv: dataset demo has its own split (split_file)",
        ),
    ],
    ids=["more-folds-than-samples", "smallest-class", "given-split"],
)
def test_a_bad_cv_stops_before_any_job(tmp_path, cv, dataset, message):
    """The config's own split stops at parse time; folds that do not fit the labelled samples
    stop the staging check of the dataset, before any training job."""
    config = _config(tmp_path, cv, **dataset)
    if "split_file" not in dataset:
        line = check_data_error(config, "demo")
        assert line.removeprefix("aam check-data: error: ").startswith(message), line
        return
    assert plan_error(config).startswith(message)


@pytest.mark.parametrize(
    ("cv", "message"),
    [
        ({"folds": 1}, "config runs.tiny.cv.folds: 1 is less than the minimum of 2"),
        ({"folds": 2, "pretrain": "all"}, "config runs.tiny.cv.pretrain: 'all' is not one of"),
        ({"seed": 2}, "config runs.tiny.cv: 'folds' is a required property"),
        ({"folds": 2, "fold": 1}, "config runs.tiny.cv.fold: unknown key (did you mean folds?)"),
    ],
    ids=["one-fold", "pretrain", "no-folds", "typo"],
)
def test_the_schema_names_a_bad_cv_key(cv, message):
    """The schema check the Snakefile runs first (in-process: no DAG needed)."""
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["runs"]["tiny"]["cv"] = cv
    with pytest.raises(WorkflowError) as err:
        validate(config, str(REPO / "workflow/schemas/config.schema.yaml"))
    assert config_error_line(err.value).startswith(message)


# --- the table --------------------------------------------------------------------------------


def _metrics(n, model, mean, forest):
    parts = {"model": model, "mean_baseline": mean, "random_forest_baseline": forest}
    intervals = {name: {metric: [0.0, 1.0] for metric in part} for name, part in parts.items()}
    return {"n": n, "target": "age", **parts, "intervals": intervals}


FOLD_1 = _metrics(
    40, {"mae": 4.0, "rmse": 5.0, "r2": 0.25}, {"mae": 6.0, "rmse": 8.0, "r2": -0.01},
    {"mae": 3.5, "rmse": 6.0, "r2": 0.4},
)  # fmt: skip
FOLD_2 = _metrics(
    41, {"mae": 5.0, "rmse": 7.0, "r2": None}, {"mae": 6.5, "rmse": 9.0, "r2": -0.03},
    {"mae": 4.5, "rmse": 6.5, "r2": 0.3},
)  # fmt: skip


def test_the_table_has_a_row_per_fold_then_mean_and_sd():
    header, rows = fold_table([FOLD_1, FOLD_2])
    assert header[:5] == ["fold", "n", "model_mae", "model_rmse", "model_r2"]
    assert header[5:8] == ["mean_baseline_mae", "mean_baseline_rmse", "mean_baseline_r2"]
    assert header[8:] == [f"random_forest_baseline_{m}" for m in ("mae", "rmse", "r2")]
    table = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    assert [row[0] for row in rows] == ["1", "2", "mean", "sd"]
    assert table["1"]["model_mae"] == "4" and table["2"]["n"] == "41"
    assert float(table["mean"]["model_mae"]) == 4.5
    assert float(table["sd"]["model_mae"]) == pytest.approx(statistics.stdev([4.0, 5.0]))
    assert float(table["sd"]["model_mae"]) == pytest.approx(math.sqrt(0.5))  # n - 1
    assert float(table["mean"]["random_forest_baseline_r2"]) == pytest.approx(0.35)
    # R^2 undefined in fold 2: NA there and in its mean and sd, not a mean of one fold
    assert table["2"]["model_r2"] == table["mean"]["model_r2"] == table["sd"]["model_r2"] == "NA"
    assert float(table["mean"]["n"]) == 40.5


@pytest.mark.parametrize(
    ("folds", "message"),
    [
        ([FOLD_1], "1 fold(s): cross-validation needs at least 2"),
        ([FOLD_1, {**FOLD_2, "model": {**FOLD_2["model"], "mae": "x"}}], "model mae is 'x'"),
        (
            [FOLD_1, {**FOLD_2, "intervals": {"model": {}}}],
            "fold 2: metrics [('model', 'mae'), ('model', 'rmse'), ('model', 'r2')] differ",
        ),
    ],
    ids=["one-fold", "not-a-number", "different-models"],
)
def test_a_bad_fold_is_one_line(folds, message):
    with pytest.raises(InputError) as err:
        fold_table(folds)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_aam_cross_validation_writes_the_table(tmp_path, capsys):
    files = []
    for k, fold in enumerate([FOLD_1, FOLD_2], start=1):
        files.append(tmp_path / f"f{k}.json")
        files[-1].write_text(json.dumps(fold))
    out = tmp_path / "cv/run.tsv"
    assert main(["cross-validation", "--metrics", *map(str, files), "--output", str(out)]) == 0
    table = pd.read_csv(out, sep="\t", dtype=str)
    assert list(table["fold"]) == ["1", "2", "mean", "sd"] and table.loc[2, "model_mae"] == "4.5"
    files[1].write_text("null")  # what predict writes without a known target
    assert main(["cross-validation", "--metrics", *map(str, files), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "f2.json: no metrics" in err and len(err.strip().splitlines()) == 1
    assert pd.read_csv(out, sep="\t", dtype=str).loc[2, "model_mae"] == "4.5"  # kept


def test_aam_split_stratifies_a_class_target_given_by_name(tmp_path, demo_dir):
    metadata = pd.read_csv(demo_dir / "metadata.tsv", sep="\t", dtype=str)
    metadata["site"] = ["gum" if i % 4 else "tongue" for i in range(len(metadata))]
    metadata.to_csv(tmp_path / "m.tsv", sep="\t", index=False)
    argv = ["split", "--table", str(demo_dir / "table.biom"), "--metadata", str(tmp_path / "m.tsv")]
    argv += ["--target-column", "site", "--output", str(tmp_path / "s.tsv")]
    assert main([*argv, "--classifier", "--folds", "4", "--fold", "2"]) == 0
    split = read_split(tmp_path / "s.tsv")
    tested = metadata.set_index("sample_id").loc[split.index[split == "test"], "site"]
    assert tested.value_counts().to_dict() == {"gum": 75, "tongue": 25}
    # the seeded split of a class target (rule `split` passes --classifier for classifiers)
    assert main(argv) == 2
    assert main([*argv, "--classifier"]) == 0
