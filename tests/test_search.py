"""The search (runs.<run>.search): its config checked at parse time in one line, the chosen
values as an options file the training commands read, the scoring folds drawn from the train
and val samples only, and the shared study's budget: exact with concurrent workers, a dead
worker's trial failed as killed and asked again (aam.analysis.search)."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import optuna
import pandas as pd
import pytest
import yaml
from checkout import REPO
from optuna.trial import TrialState

from aam.analysis import search
from aam.commands.common import add_common_arguments, apply_options_file
from aam.commands.run_options_schema import SCHEMA_FILE
from aam.commands.search_worker import check_folds, fold_score
from aam.errors import InputError
from aam.workflow.config import run_option_names
from aam.workflow.options_file import read_options_file, write_options_file
from aam.workflow.search_config import expand_searches, study_key, study_names

OPTIONS = run_option_names(SCHEMA_FILE)
DATASETS = {"demo": {"classifier": False}, "ibd": {"classifier": True}}
SPACE = {
    "finetune.lr": {"low": 1e-4, "high": 1e-2, "log": True},
    "model.layers": {"low": 1, "high": 3},
}
RUN = {
    "dataset": "demo",
    "model": {"embedding_dim": 16, "layers": 2},
    "pretrain": {"epochs": 1},
    "finetune": {"epochs": 2, "lr": 0.003},
    "search": {"space": SPACE, "trials": 4, "workers": 2},
}


def expand(run: dict) -> tuple[dict, dict]:
    return expand_searches({"r": run}, OPTIONS, SCHEMA_FILE, DATASETS, 42)


def test_a_search_takes_its_keys_out_of_the_run_and_plans_its_study():
    runs, searches = expand(RUN)
    assert runs["r"]["finetune"] == {"epochs": 2} and runs["r"]["model"] == {"embedding_dim": 16}
    plan = searches["r"]
    assert plan["base"]["finetune"] == {"epochs": 2, "lr": 0.003}  # trials start from the config
    assert plan["space"]["model.layers"] == {"low": 1, "high": 3, "log": False, "integer": True}
    assert plan["space"]["finetune.lr"]["integer"] is False
    assert (plan["metric"], plan["direction"], plan["folds"], plan["seed"]) == (
        "mae",
        "minimize",
        3,
        42,
    )
    assert RUN["finetune"] == {"epochs": 2, "lr": 0.003}  # the config itself is not changed


def test_the_study_is_new_when_the_space_changes_and_kept_when_the_budget_grows():
    _, one = expand(RUN)
    more = {**RUN, "search": {**RUN["search"], "trials": 40, "workers": 4}}
    wider = {
        **RUN,
        "search": {**RUN["search"], "space": {**SPACE, "finetune.epochs": {"low": 1, "high": 9}}},
    }
    assert expand(more)[1]["r"]["key"] == one["r"]["key"]
    assert expand(wider)[1]["r"]["key"] != one["r"]["key"]
    other_base = {**RUN, "finetune": {"epochs": 5}}
    assert expand(other_base)[1]["r"]["key"] != one["r"]["key"]
    assert study_key(one["r"]) == one["r"]["key"]


@pytest.mark.parametrize(
    ("search", "message"),
    [
        (
            {"space": {"finetune.lrr": {"low": 1, "high": 2}}},
            "space.finetune.lrr: not a run option (did you mean finetune.lr?)",
        ),
        ({"space": {"finetune.lr": {"low": 0.1, "high": 0.1}}}, "space.finetune.lr: empty range"),
        (
            {"space": {"finetune.lr": {"low": 0, "high": 0.1, "log": True}}},
            "log range needs low above 0",
        ),
        (
            {"space": {"finetune.lr": {"low": -1.0, "high": 0.1}}},
            "space.finetune.lr: -1.0 is less than or equal to",
        ),
        ({"space": {"finetune.batch_size": {"choices": []}}}, "choices: empty"),
        ({"space": {"finetune.batch_size": {"choices": [8, 8]}}}, "listed twice"),
        (
            {"space": {"pretrain": {"choices": ["none", "yes"]}}},
            "space.pretrain: choices are none and pretrained",
        ),
        ({"space": SPACE, "trials": 2, "workers": 3}, "trials: 2 is below workers (3)"),
        ({"space": SPACE, "metric": "auc"}, "metric: auc does not score a regression target"),
    ],
)
def test_a_bad_search_is_one_line_naming_the_key(search, message):
    run = {**RUN, "search": {"trials": 4, **search}}
    with pytest.raises(ValueError) as err:
        expand(run)
    line = str(err.value)
    assert message in line and line.startswith("config runs.r.search") and "\n" not in line


def test_each_search_names_its_studies_by_its_config_and_the_planned_code():
    _, searches = expand({**RUN, "search": {**RUN["search"], "forest": {"trials": 3}}})
    plan = searches["r"]
    names = study_names(plan, "a" * 16, "b" * 16)
    assert names == {"aam": f"aam-{plan['key']}-aaaaaaaaaaaa", "forest": names["forest"]}
    assert names["forest"].endswith("-bbbbbbbbbbbb")
    assert study_names(plan, "c" * 16, "b" * 16)["forest"] == names["forest"]
    other = {**plan, "forest": {**plan["forest"], "trials": 5}}
    assert study_names(other, "a" * 16, "b" * 16)["aam"] == names["aam"]
    assert study_names(other, "a" * 16, "b" * 16)["forest"] != names["forest"]


def test_a_search_refuses_designs_it_cannot_combine_with_and_pretraining_a_scratch_run():
    with pytest.raises(ValueError, match="runs.r.cv: not with search"):
        expand({**RUN, "cv": {"folds": 3}})
    scratch = {**RUN, "pretrain": "none"}
    with pytest.raises(ValueError, match="space.pretrain.epochs: the run has pretrain: none"):
        expand(
            {
                **scratch,
                "search": {"space": {"pretrain.epochs": {"low": 1, "high": 3}}, "trials": 2},
            }
        )
    with pytest.raises(ValueError, match="space.pretrain: the run has pretrain: none"):
        expand(
            {
                **scratch,
                "search": {"space": {"pretrain": {"choices": ["none", "pretrained"]}}, "trials": 2},
            }
        )


def test_a_classifier_is_scored_by_auc_by_default_and_its_forest_space_is_checked():
    run = {**RUN, "dataset": "ibd", "search": {**RUN["search"], "forest": {"trials": 3}}}
    _, searches = expand(run)
    assert (searches["r"]["metric"], searches["r"]["direction"]) == ("auc", "maximize")
    assert set(searches["r"]["forest"]["space"]) == {"trees", "max_features", "min_samples_leaf"}
    bad = {
        **run,
        "search": {
            **run["search"],
            "forest": {"trials": 3, "space": {"tres": {"low": 1, "high": 9}}},
        },
    }
    with pytest.raises(
        ValueError, match=r"forest.space.tres: not a forest option \(did you mean trees\?\)"
    ):
        expand(bad)


def test_a_typo_in_the_space_stops_the_workflow_before_any_job(tmp_path):
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["runs"]["tiny"]["search"] = {
        "space": {"finetune.l": {"low": 0.1, "high": 0.2}},
        "trials": 2,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    from planning import plan_error

    line = plan_error(path)
    assert line.startswith("config runs.tiny.search.space.finetune.l: not a run option"), line


def test_options_file_round_trip_and_bounds(tmp_path):
    path = tmp_path / "best.yaml"
    chosen = search.chosen_options(
        {"finetune.lr": 0.002, "model.layers": 2, "pretrain": "none", "pretrain.epochs": 3}
    )
    assert chosen == {"finetune": {"lr": 0.002}, "model": {"layers": 2}, "pretrain": "none"}
    write_options_file(path, chosen, "chosen by a test\nsecond line")
    assert path.read_text().startswith("# chosen by a test\n# second line\n")
    assert read_options_file(path) == chosen
    path.write_text("a: &x [1]\nfinetune: {lr: *x}\n")
    with pytest.raises(InputError, match="aliases are not allowed"):
        read_options_file(path)
    path.write_text("training: {lr: 1}\n")
    with pytest.raises(InputError, match="maps model, pretrain, finetune to options"):
        read_options_file(path)
    path.write_text("finetune: {lr: [1, 2]}\n")
    with pytest.raises(InputError, match="single values"):
        read_options_file(path)
    path.write_text("x" * (70 * 1024))
    with pytest.raises(InputError, match="over 64 KiB"):
        read_options_file(path)


def _parsed(command: str, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_common_arguments(parser, command)
    if command == "finetune":
        parser.add_argument("--pretrained-encoder", type=Path)
    return parser.parse_args(["--table", "t.biom", "--output-dir", "out", *argv])


def test_an_options_file_overrides_the_flags_it_names(tmp_path):
    path = tmp_path / "best.yaml"
    write_options_file(
        path,
        {"finetune": {"lr": 0.005, "epochs": 7}, "model": {"layers": 3}, "pretrain": "none"},
        "x",
    )
    args = _parsed(
        "finetune", ["--lr", "0.1", "--options-file", str(path), "--pretrained-encoder", "e.pt"]
    )
    apply_options_file(args, "finetune")
    assert (args.lr, args.epochs, args.layers, args.pretrained_encoder) == (0.005, 7, 3, None)
    args = _parsed("pretrain", ["--lr", "0.1", "--epochs", "2", "--options-file", str(path)])
    apply_options_file(args, "pretrain")  # fine-tuning's values are not pretraining's
    assert (args.lr, args.epochs, args.layers) == (0.1, 2, 3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("finetune: {lr: -1}\n", "--lr: -1"),
        ("finetune: {lrr: 0.1}\n", "lrr is not an option of aam finetune"),
    ],
)
def test_a_bad_options_file_is_one_line_naming_it(tmp_path, text, message):
    path = tmp_path / "best.yaml"
    path.write_text(text)
    args = _parsed("finetune", ["--options-file", str(path)])
    with pytest.raises(InputError) as err:
        apply_options_file(args, "finetune")
    assert str(path) in str(err.value) and message in str(err.value), err.value


def _split(tmp_path: Path, name: str, labels: dict[str, str]) -> Path:
    path = tmp_path / name
    pd.Series(labels, name="split").rename_axis("sample_id").to_frame().to_csv(path, sep="\t")
    return path


def test_no_scoring_fold_may_hold_a_test_sample(tmp_path):
    split = _split(tmp_path, "split.tsv", {"a": "train", "b": "val", "c": "test"})
    good = _split(tmp_path, "f1.tsv", {"a": "train", "b": "test", "c": "unused"})
    bad = _split(tmp_path, "f2.tsv", {"a": "train", "b": "val", "c": "test"})
    check_folds(split, [good])
    with pytest.raises(InputError, match="1 test sample.*in a scoring fold"):
        check_folds(split, [good, bad])


@pytest.mark.slow
def test_split_draws_search_folds_from_train_and_val_only(tmp_path):
    aam = [sys.executable, "-m", "aam", "split", "--table", str(REPO / "data/demo/table.biom")]
    meta = ["--metadata", str(REPO / "data/demo/metadata.tsv"), "--target-column", "age"]
    split = tmp_path / "split.tsv"
    subprocess.run([*aam, *meta, "--output", str(split)], check=True, capture_output=True)
    parts = []
    for k in (1, 2, 3):
        fold = tmp_path / f"fold{k}.tsv"
        grouped = ["--group-column", "qiita_study_id", "--from-file", str(split)]
        cmd = [*aam, *meta, *grouped, "--folds", "3", "--fold", str(k), "--output", str(fold)]
        subprocess.run(cmd, check=True, capture_output=True)
        parts.append(pd.read_csv(fold, sep="\t", index_col=0)["split"])
    given = pd.read_csv(split, sep="\t", index_col=0)["split"]
    for part in parts:
        assert set(part[given == "test"]) == {"unused"}
        assert set(part[given != "test"]) <= {"train", "val", "test"}
    tests = [set(part[part == "test"].index) for part in parts]
    assert set.union(*tests) == set(given[given != "test"].index)
    assert sum(map(len, tests)) == len(set.union(*tests))  # a partition
    studies = pd.read_csv(REPO / "data/demo/metadata.tsv", sep="\t", index_col=0, dtype=str)[
        "qiita_study_id"
    ]
    for part in parts:  # whole studies: none on both sides of a fold
        inside = set(studies[part[part == "test"].index])
        outside = set(studies[part[part.isin(["train", "val"])].index])
        assert not inside & outside


def test_a_near_constant_model_scores_no_better_than_the_training_median(tmp_path):
    metadata = tmp_path / "metadata.tsv"
    pd.DataFrame({"sample_id": list("abcdefgh"), "age": [10, 20, 30, 40, 12, 22, 35, 60]}).to_csv(
        metadata, sep="\t", index=False
    )
    fold = _split(
        tmp_path, "fold.tsv", dict(zip("abcdefgh", ["train"] * 4 + ["test"] * 4, strict=True))
    )
    predicted = tmp_path / "predict"
    predicted.mkdir()
    truth = [12, 22, 35, 60]
    spec = {"metric": "mae", "classifier": False, "target": "age"}
    for values, collapsed in (([25.0, 25.1, 25.2, 25.0], True), ([12.0, 20.0, 30.0, 50.0], False)):
        pd.DataFrame({"sample_id": list("efgh"), "prediction": values, "true": truth}).to_csv(
            predicted / "predictions.tsv", sep="\t", index=False
        )
        mae = sum(abs(p - t) for p, t in zip(values, truth, strict=True)) / 4
        (predicted / "metrics.json").write_text(f'{{"n": 4, "model": {{"mae": {mae}}}}}')
        record = fold_score(predicted, fold, metadata, spec)
        median_mae = sum(abs(25 - t) for t in truth) / 4  # the training median is 25
        assert record["median"] == pytest.approx(median_mae)
        assert record["near_constant"] is collapsed
        expected = max(mae, median_mae) if collapsed else mae
        assert record["score"] == pytest.approx(expected)


def _open(directory: Path, seed: int = 0) -> optuna.Study:
    return search.open_study(directory, "s", "minimize", seed)


def _work(directory: str, budget: int, label: str) -> list[int]:
    """A worker of a study whose objective is instant: the trials it ran."""
    directory = Path(directory)
    study = _open(directory, seed=hash(label) % 1000)
    worker, ran = search.Worker(directory, label), []
    with worker.alive():
        while (
            trial := search.ask_within_budget(study, budget, worker, directory, directory)
        ) is not None:
            x = trial.suggest_float("x", -1, 1)
            ran.append(trial.number)
            study.tell(trial, x * x)
    return ran


@pytest.mark.slow
def test_concurrent_workers_finish_the_budget_exactly_and_share_no_trial(tmp_path):
    _open(tmp_path)  # created once, as the first worker would
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        runs = pool.starmap(_work, [(str(tmp_path), 40, f"w{k}") for k in range(8)])
    numbers = [n for ran in runs for n in ran]
    assert sorted(numbers) == list(range(40))  # none lost, none run twice
    states = [t.state for t in _open(tmp_path).get_trials()]
    assert states.count(TrialState.COMPLETE) == 40 and len(states) == 40


def test_a_dead_workers_trial_is_failed_as_killed_and_asked_again(tmp_path):
    study = _open(tmp_path)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    trial = study.ask()
    trial.suggest_float("x", -1, 1)
    worker = search.Worker(tmp_path, "gone")
    worker.claim(trial)
    study._storage.set_trial_user_attr(trial._trial_id, "pid", int(dead.stdout))  # no such process
    (tmp_path / str(trial.number)).mkdir()
    alive = search.Worker(tmp_path, "alive")
    with alive.alive():
        retry = search.ask_within_budget(study, 1, alive, tmp_path, tmp_path)
    first = study.get_trials()[0]
    assert first.state == TrialState.FAIL and first.user_attrs["killed"]
    assert not search.counted(first) and not (tmp_path / "0").exists()
    assert retry is not None and retry.suggest_float("x", -1, 1) == first.params["x"]
    assert retry.user_attrs["retry_of"] == 0
    study.tell(retry, 0.5)
    with alive.alive():  # the budget (1) is now used: the killed trial did not count
        assert search.ask_within_budget(study, 1, alive, tmp_path, tmp_path) is None


def test_a_live_workers_running_trial_uses_the_budget(tmp_path):
    study = _open(tmp_path)
    worker = search.Worker(tmp_path, "me")
    with worker.alive():
        first = search.ask_within_budget(study, 2, worker, tmp_path, tmp_path)
        second = search.ask_within_budget(study, 2, worker, tmp_path, tmp_path)
        assert first is not None and second is not None
        assert search.ask_within_budget(study, 2, worker, tmp_path, tmp_path) is None
        assert [t.state for t in study.get_trials()] == [TrialState.RUNNING] * 2


def _summary(score: float, median: float | None, constant: int = 0) -> dict:
    return {
        "metric": "mae",
        "budget": 4,
        "trials": {"complete": 3, "killed": 1},
        "best": {
            "number": 2,
            "score": score,
            "folds": [score - 1, score + 1],
            "fold_sd": 1.41,
            "values": {"finetune.lr": 0.00123456, "finetune.ema_decay": "<b>"},
            "near_constant_folds": constant,
        },
        "median_baseline": median,
        "beats_median": None if median is None else score < median,
    }


def test_the_landing_page_shows_each_search_beside_the_median(tmp_path):
    from aam.analysis.search_section import search_html, search_summaries

    assert search_summaries(tmp_path, "r") is None and search_html(None) == ""
    folder = tmp_path / "runs/r/search"
    (folder / "forest").mkdir(parents=True)
    (folder / "search.json").write_text(json.dumps(_summary(5.2, 6.0, constant=1)))
    (folder / "forest/search.json").write_text(json.dumps(_summary(6.5, None)))
    page = search_html(search_summaries(tmp_path, "r"))
    assert "AAM: 3 complete, 1 killed trials (budget 4); best MAE over the folds 5.2" in page
    assert "(folds 4.2, 6.2; SD over folds 1.41), trial 2" in page
    assert "finetune.lr = 0.001235" in page and "&lt;b&gt;" in page and "<b>" not in page
    assert "beats the training median on the same folds (6)" in page
    assert "random forest: 3 complete, 1 killed trials" in page
    assert "near-constant on 1 of its folds" in page
    (folder / "search.json").write_text(json.dumps(_summary(6.4, 6.0)))
    page = search_html(search_summaries(tmp_path, "r"))
    assert "does not beat the training median on the same folds (6)" in page
    assert "near-constant" not in page


def test_the_demo_search_overlay_searches_the_headlines_model_beside_it(tmp_path):
    from test_oral_config import planned_overlay

    scheme = planned_overlay("config.yaml", "demo-search.yaml", tmp_path)
    search = scheme.searches["demo_searched"]
    assert set(scheme.runs) == {"demo", "demo_pretrained", "demo_study", "demo_searched"}
    headline = {k: v for k, v in scheme.runs["demo"]["model"].items() if k != "layers"}
    assert scheme.runs["demo_searched"]["model"] == headline  # layers: from best.yaml
    assert "lr" not in scheme.runs["demo_searched"]["finetune"]  # from best.yaml
    assert search["base"]["finetune"] == scheme.runs["demo"]["finetune"]  # trials start there
    assert (search["trials"], search["folds"], search["forest"]["trials"]) == (16, 3, 24)
    folds = [str(p.relative_to(scheme.work)) for p in scheme.search_folds("demo_searched")]
    assert folds == [f"data/demo/search/3x42/fold{k}.split.tsv" for k in (1, 2, 3)]
    assert (
        scheme.options_file("demo_searched") == scheme.work / "runs/demo_searched/search/best.yaml"
    )
    assert scheme.options_file("demo") == []


def test_the_ibd_search_overlay_searches_the_ibd_model_by_auc_beside_the_fixed_recipe(tmp_path):
    """config/ibd-search.yaml: ibd_fixed is run ibd's recipe on the one split (no cv), and
    ibd_searched the same model from scratch, searched by AUC on folds of whole people."""
    from test_oral_config import planned_overlay

    scheme = planned_overlay("ibd.yaml", "ibd-search.yaml", tmp_path)
    search = scheme.searches["ibd_searched"]
    assert (search["metric"], search["folds"], search["trials"]) == ("auc", 3, 16)
    fixed, base = scheme.runs["ibd_fixed"], yaml.safe_load((REPO / "config/ibd.yaml").read_text())
    recipe = base["runs"]["ibd"]
    assert fixed["model"] == recipe["model"] and fixed["pretrain"]["epochs"] == 8
    assert {k: fixed["finetune"][k] for k in recipe["finetune"]} == recipe["finetune"]
    assert "cv" not in scheme.runs["ibd_fixed"] or not scheme.runs["ibd_fixed"]["cv"]
    searched = {k: v for k, v in recipe["model"].items() if k != "layers"}
    assert scheme.runs["ibd_searched"]["model"] == searched  # layers: from best.yaml


def test_the_new_study_search_overlay_reads_the_points_split_of_the_same_study():
    """config/oral-new-study-search.yaml: its dataset is new_1841's but for the split, which is
    the seed-1, 50-label point's (so the searched run is tested on the point's test samples)."""
    overlay = yaml.safe_load((REPO / "config/oral-new-study-search.yaml").read_text())
    study = yaml.safe_load((REPO / "config/oral-new-study.yaml").read_text())
    point = overlay["datasets"]["new_1841_n50"]
    left_out = {**study["datasets"]["new_10317"], "split_test_group": 1841}
    assert {
        k: v for k, v in left_out.items() if k not in ("split_test_group", "split_group_column")
    } == {k: v for k, v in point.items() if k != "split_file"}
    assert point["split_file"] == "results/oral-new-study/data/new_1841/new_study/1/50.split.tsv"
    assert study["workdir"] == "results/oral-new-study"
    run = overlay["runs"]["1841_n50_searched"]
    assert run["model"] == study["runs"]["scratch_10317"]["model"] and run["pretrain"] == "none"
    assert run["finetune"] == study["runs"]["scratch_10317"]["finetune"]
