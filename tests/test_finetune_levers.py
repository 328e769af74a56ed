"""The levers of a stable fine-tune and of the pretraining ablation.

- `--ema-decay`: the moving average of the weights is what validation scores and what the run
  keeps; training itself is unchanged; latest.pt holds the average for an exact resume.
- Ensembles: `aam predict --model A B` averages the models; `ensemble: {seeds}` makes members.
- `pretrain: none`: fine-tuning from a random initialisation, and its learning-curve twin.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from checkout import REPO, dry_run, job_counts
from planning import plan_error, planned
from test_cli_training import MICRO, aam, micro_metadata, micro_table, write_metadata, write_table
from test_learning_curve import _metrics, _points

from aam.analysis.learning_curve import curve_table
from aam.analysis.predict import ensemble_mean
from aam.training.checkpointing.checkpoint import load_checkpoint
from aam.training.ema import WeightAverage
from aam.workflow.config import expand_ensembles

# One xdist worker: every worker that ran one of these tests would build the module fixtures.
pytestmark = pytest.mark.xdist_group("test_finetune_levers")


def test_the_average_warms_up_then_follows_the_decay_and_swaps_back():
    model = torch.nn.Linear(2, 1, bias=False)
    torch.nn.init.zeros_(model.weight)
    average = WeightAverage(model, decay=0.5)
    expected = torch.zeros(1, 2)
    for t, value in enumerate([1.0, 2.0, 4.0, 8.0]):
        with torch.no_grad():
            model.weight.fill_(value)
        decay = min(0.5, (1 + t) / (10 + t))  # 0.1, 0.18..., 0.25, 0.31 (warm-up) -> below 0.5
        expected = decay * expected + (1 - decay) * value
        average.update()
    with average.applied():
        assert torch.allclose(model.weight, expected)
    assert torch.equal(model.weight, torch.full((1, 2), 8.0))  # its own weights back


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same fine-tuning without and with --ema-decay (12 samples, 3 epochs)."""
    root = tmp_path_factory.mktemp("ema")
    table = write_table(root / "table.biom", micro_table())
    metadata = write_metadata(root / "metadata.tsv", micro_metadata())
    common = ["--table", table, "--metadata", metadata, "--target-column", "age", *MICRO]
    common += ["--epochs", "3", "--val-fraction", "0.34", "--best-metric", "val_mae"]
    assert aam("finetune", *common, "--output-dir", root / "raw") == 0
    assert aam("finetune", *common, "--output-dir", root / "ema", "--ema-decay", "0.6") == 0
    return root, table, metadata


def history(out):
    return pd.read_csv(out / "history.tsv", sep="\t")


def test_the_average_changes_what_is_scored_not_how_it_trains(runs):
    root, _, _ = runs
    raw, ema = history(root / "raw"), history(root / "ema")
    assert raw["train_loss"].tolist() == ema["train_loss"].tolist()
    assert raw["val_mae"].tolist() != ema["val_mae"].tolist()
    latest = load_checkpoint(root / "ema" / "checkpoints" / "latest.pt")
    assert latest["ema"]["updates"] == latest["step"] > 0
    assert "ema" not in load_checkpoint(root / "raw" / "checkpoints" / "latest.pt")
    model = torch.load(root / "ema" / "model.pt", weights_only=True)
    assert model["train_config"]["ema_decay"] == 0.6


def test_the_kept_model_is_the_average_that_validation_scored(runs):
    root, table, metadata = runs
    out = root / "ema"
    best = history(out)["val_mae"].min()
    predicted = root / "predict_val"
    flags = ["--table", table, "--metadata", metadata, "--split", out / "split.tsv"]
    assert aam("predict", "--model", out / "model.pt", *flags, "--subset", "val",
               "--output-dir", predicted, "--threads", "2") == 0  # fmt: skip
    scored = json.loads((predicted / "metrics.json").read_text())["model"]["mae"]
    assert scored == pytest.approx(best, rel=1e-5)  # history.tsv keeps 6 digits
    assert scored != pytest.approx(history(root / "raw")["val_mae"].min(), rel=1e-3)


def test_a_decay_of_one_is_refused_before_training(tmp_path, capsys):
    inputs = ["--table", tmp_path / "t.biom", "--metadata", tmp_path / "m.tsv"]
    rc = aam("finetune", *inputs, "--target-column", "age", "--output-dir", tmp_path / "o",
             "--ema-decay", "1")  # fmt: skip
    assert rc == 2
    assert "--ema-decay" in capsys.readouterr().err


# --- ensembles ------------------------------------------------------------------------------


def test_an_ensemble_predicts_the_mean_of_its_models(runs):
    root, table, metadata = runs
    flags = ["--table", table, "--metadata", metadata, "--split", root / "ema" / "split.tsv"]
    flags += ["--subset", "val"]
    predictions = {}
    for name, models in {
        "raw": ["raw"],
        "ema": ["ema"],
        "both": ["raw", "ema"],
    }.items():
        models = [root / m / "model.pt" for m in models]
        out = root / f"predict_{name}"
        assert aam("predict", "--model", *models, *flags, "--output-dir", out) == 0
        predictions[name] = pd.read_csv(out / "predictions.tsv", sep="\t")["prediction"]
    mean = (predictions["raw"] + predictions["ema"]) / 2
    assert np.allclose(predictions["both"], mean, rtol=1e-5)  # predictions.tsv: 6 digits
    assert not np.allclose(predictions["raw"], predictions["ema"], rtol=1e-3)
    metrics = json.loads((root / "predict_both" / "metrics.json").read_text())
    assert metrics["ensemble"] == [str(root / "raw/model.pt"), str(root / "ema/model.pt")]


def test_the_ensemble_of_classes_averages_probabilities():
    first = np.log(np.array([[0.9, 0.1], [0.5, 0.5]]))
    second = np.log(np.array([[0.1, 0.9], [0.3, 0.7]]))
    mean = np.exp(ensemble_mean([first, second], classes=True))
    assert np.allclose(mean, [[0.5, 0.5], [0.4, 0.6]])
    assert np.allclose(
        ensemble_mean([first[:, 0], second[:, 0]], classes=False),
        first[:, 0] / 2 + second[:, 0] / 2,
    )


def test_models_of_other_targets_are_not_an_ensemble(runs, tmp_path, capsys):
    root, table, metadata = runs
    other = tmp_path / "other"
    common = ["--table", table, "--metadata", metadata, *MICRO, "--output-dir", other]
    metadata_frame = micro_metadata().assign(years=np.linspace(1, 9, 12))
    write_metadata(metadata, metadata_frame)
    assert aam("finetune", *common, "--target-column", "years") == 0
    models = [root / "raw" / "model.pt", other / "model.pt"]
    rc = aam("predict", "--model", *models, "--table", table, "--metadata", metadata,
             "--output-dir", tmp_path / "p")  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and f"{other / 'model.pt'}: its target (years) differ" in err
    assert not (tmp_path / "p" / "predictions.tsv").exists()


BASE = {"dataset": "demo", "predict_on": ["other"], "finetune": {"lr": 0.001}}


def test_each_seed_is_a_member_from_the_run_s_encoder():
    runs, ensembles = expand_ensembles({"a": {**BASE, "ensemble": {"seeds": [7, 8]}}})
    assert ensembles == {"a": ["a", "a_e1", "a_e2"]}
    assert (
        runs["a_e1"]["finetune"] == {"lr": 0.001, "seed": 7}
        and runs["a_e2"]["finetune"]["seed"] == 8
    )
    assert runs["a_e1"]["encoder_from"] == "a" and runs["a_e1"]["predict_on"] == []
    assert "ensemble" not in runs["a"] and runs["a"]["predict_on"] == ["other"]
    scratch, _ = expand_ensembles({"a": {**BASE, "pretrain": "none", "ensemble": {"seeds": [7]}}})
    assert "encoder_from" not in scratch["a_e1"] and scratch["a_e1"]["pretrain"] == "none"


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        ({"a": {**BASE, "ensemble": {"seeds": [42]}}}, "42 is the run's own fine-tuning seed"),
        (
            {"a": {**BASE, "ensemble": {"seeds": [1]}, "cv": {"folds": 2}}},
            "runs.a.cv: not with ensemble",
        ),
        ({"a": {**BASE, "ensemble": {"seeds": [1]}}, "a_e1": BASE}, "member a_e1 is already a run"),
    ],
    ids=["own-seed", "cv", "member-name-taken"],
)
def test_an_ensemble_that_cannot_be_expanded_is_one_line(runs, message):
    with pytest.raises(ValueError, match=message) as err:
        expand_ensembles(runs)
    assert "\n" not in str(err.value)


# --- pretrain: none ---------------------------------------------------------------------------


def _config(tmp_path, runs: dict) -> object:
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    tiny = config["runs"]["tiny"]
    config["runs"] = {name: {**tiny, **spec} for name, spec in runs.items()}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


LEVERS = {
    "tiny": {"ensemble": {"seeds": [1, 2]}},
    "scratch": {"pretrain": "none", "learning_curve": {"fractions": [0.5]}},
    "curved": {"learning_curve": {"fractions": [0.5]}},
}


def test_the_plan_pretrains_no_scratch_run_and_pairs_the_curves(tmp_path):
    scheme = planned(_config(tmp_path, LEVERS))
    assert scheme.pretraining_runs == ["curved", "curved_lc1", "tiny"]
    assert scheme.encoder("scratch") is None and scheme.encoder("scratch_lc1") is None
    assert scheme.encoder("tiny_e2") == tmp_path / "work/runs/tiny/pretrain/encoder.pt"
    assert scheme.scratch_curve("curved") == "scratch" and scheme.scratch_curve("scratch") is None
    assert sorted(scheme.importance_runs) == ["curved", "scratch", "tiny"]
    assert scheme.scored[-1] == ("tiny_ensemble", "demo", scheme.ensemble_metrics("tiny"))


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        (
            {"a": {"pretrain": "none", "encoder_from": "b"}, "b": {}},
            "runs.a.encoder_from: 'b' with pretrain: none",
        ),
        (
            {"a": {"encoder_from": "b"}, "b": {"pretrain": "none"}},
            "runs.a.encoder_from: 'b' has pretrain: none",
        ),
        (
            {
                "a": {
                    "pretrain": "none",
                    "learning_curve": {"fractions": [0.5], "pretrain": "shared"},
                }
            },
            "learning_curve.pretrain: shared with the run's pretrain none",
        ),
        (
            {"a": {"learning_curve": {"fractions": [0.5], "pretrain": "none"}}},
            "learning_curve.pretrain: none with the run's pretrain section",
        ),
        (
            {"a": {"pretrain": "none", "sweep": {"pretrain.lr": [0.1]}}},
            "sweep.pretrain.lr: the run has pretrain: none",
        ),
    ],
    ids=["encoder-from", "from-a-scratch-run", "shared-curve", "scratch-curve", "sweep"],
)
def test_a_scratch_run_that_contradicts_itself_is_one_line(tmp_path, runs, message):
    assert message in plan_error(_config(tmp_path, runs))


@pytest.mark.workflow
def test_the_dag_of_the_levers(tmp_path, checkout_copy):
    run = dry_run(checkout_copy, _config(tmp_path, LEVERS), "--printshellcmds")
    assert run.returncode == 0, run.stderr[-2000:]
    counts = job_counts(run.stdout)
    assert counts["pretrain"] == 3 and counts["finetune"] == counts["predict"] == 7
    assert counts["ensemble"] == 1 and counts["learning_curve"] == 2
    lines = run.stdout.splitlines()
    finetune = {
        r: ln for ln in lines for r in ("scratch", "tiny_e1") if f"runs/{r}/finetune/prov" in ln
    }
    assert "--pretrained-encoder" not in finetune["scratch"]
    assert (
        f"--pretrained-encoder {tmp_path}/work/runs/tiny/pretrain/encoder.pt" in finetune["tiny_e1"]
    )
    assert " --seed 1" in finetune["tiny_e1"]
    work = tmp_path / "work"
    ensemble = next(ln for ln in lines if "ensemble/provenance.json predict" in ln)
    models = " ".join(
        str(work / f"runs/{r}/finetune/model.pt") for r in ("tiny", "tiny_e1", "tiny_e2")
    )
    assert f"--model {models} --table" in ensemble
    curve = next(ln for ln in lines if " learning-curve " in ln and "curved.tsv" in ln)
    scratch = (
        f"{work}/runs/scratch_lc1/predict/metrics.json {work}/runs/scratch/predict/metrics.json"
    )
    assert f"--scratch-metrics {scratch}" in curve


def test_the_curve_has_a_from_scratch_series(tmp_path):
    pretrained = [_metrics(20, 7.0, 6.0), _metrics(20, 5.0, 5.5)]
    fractions, splits, files = _points(tmp_path, pretrained)
    scratch = []
    for k, mae in enumerate((8.0, 5.5)):
        scratch.append(tmp_path / f"scratch{k}.json")
        scratch[-1].write_text(json.dumps(_metrics(20, mae, 6.0)))
    table = curve_table(fractions, splits, files, scratch)
    assert list(table["scratch_mae"]) == [8.0, 5.5] and list(table["model_mae"]) == [7.0, 5.0]
    assert list(table.columns).index("scratch_mae") < list(table.columns).index(
        "random_forest_baseline_mae"
    )
    scratch[0].write_text(json.dumps(_metrics(19, 8.0, 6.0)))
    with pytest.raises(Exception, match="the from-scratch curve must be scored on the same"):
        curve_table(fractions, splits, files, scratch)


def test_two_runs_compare_paired_on_their_shared_samples(tmp_path):
    import sys

    sys.path.insert(0, str(REPO / "tools"))
    from paired_runs import paired_runs

    truth = np.linspace(20, 60, 30)
    ids = [f"s{k}" for k in range(30)]
    first, second = tmp_path / "a.tsv", tmp_path / "b.tsv"
    pd.DataFrame({"sample_id": ids, "prediction": truth + 1, "true": truth}).to_csv(
        first, sep="\t", index=False
    )
    frame = pd.DataFrame(
        {"sample_id": ids[::-1], "prediction": truth[::-1] + 3, "true": truth[::-1]}
    )
    frame.to_csv(second, sep="\t", index=False)  # another order: matched by sample
    mae = paired_runs(first, second)["mae"]
    assert mae["value"] == pytest.approx(-2.0) and mae["interval"] == pytest.approx([-2.0, -2.0])
    frame.assign(true=frame["true"] + 1).to_csv(second, sep="\t", index=False)
    with pytest.raises(SystemExit, match="no shared samples with the same truth"):
        paired_runs(first, second)


def test_two_classifier_runs_compare_paired_over_whole_groups(tmp_path):
    """A classifier's runs (prob_<class> columns): accuracy and AUC differences, the interval
    drawn over whole groups: one run right on every sample, the other wrong on one person's."""
    import sys

    sys.path.insert(0, str(REPO / "tools"))
    from paired_runs import paired_runs

    ids = [f"s{k}" for k in range(40)]
    truth = np.array(["CD", "Control"] * 20)
    person = pd.Series([f"p{k // 4}" for k in range(40)], index=ids)  # 10 people of 4 samples
    right = np.where(truth == "CD", 0.9, 0.1)
    wrong = right.copy()
    wrong[:4] = 1 - wrong[:4]  # person p0 misclassified
    for name, p_cd in (("a", right), ("b", wrong)):
        frame = {"sample_id": ids, "prediction": "x", "prob_CD": p_cd, "prob_Control": 1 - p_cd}
        pd.DataFrame({**frame, "true": truth}).to_csv(
            tmp_path / f"{name}.tsv", sep="\t", index=False
        )
    difference = paired_runs(tmp_path / "a.tsv", tmp_path / "b.tsv", person)
    assert difference["accuracy"]["value"] == pytest.approx(0.1)
    low, high = difference["accuracy"]["interval"]
    assert low == pytest.approx(0.0) and high > 0.1  # draws without p0, or with it twice
    assert difference["auc"]["value"] > 0


def test_grouped_cv_intervals_resample_whole_groups():
    """tools/grouped_cv.py: a model right on every sample of half the groups and wrong on the
    rest scores 0.5, and its interval spans what group draws can give (a sample-level bootstrap
    of 40 samples would stay within about +-0.16 of 0.5); a model right everywhere: [1, 1]."""
    import sys

    sys.path.insert(0, str(REPO / "tools"))
    from grouped_cv import group_draws, interval, scores

    groups = pd.Series(np.repeat([f"g{k}" for k in range(4)], 10))
    truth = np.where(np.arange(40) % 2 == 0, "Crohns", "Control")
    wrong = np.where(truth == "Crohns", "Control", "Crohns")
    half = np.where(groups.isin(["g0", "g1"]), truth, wrong)
    columns = {("true", "class"): truth}
    for name, predicted in (("half", half), ("right", truth)):
        columns[(name, "prediction")] = predicted
        columns[(name, "prob_Crohns")] = (predicted == "Crohns").astype(float)
    frame = pd.DataFrame(columns)
    assert scores(frame, ["half"], "Crohns")["half"][0] == 0.5
    draws = group_draws(frame, groups, ["half", "right"], "Crohns", draws=400)
    low, high = interval([d["half"] for d in draws])
    assert low[0] == 0.0 and high[0] == 1.0  # all four groups of one kind: a whole-group draw
    low, high = interval([d["right"] for d in draws])
    assert low[0] == high[0] == 1.0
