"""A new study with few labels (issue 59, item 4): `aam split --new-study-size` draws a few
labelled samples of a left-out study, whole subjects, the same test samples for every size and
seed; `aam baselines --pooled-split` fits the forest on other studies' labels too; `aam
new-study` averages each size's errors over its seeds; the workflow's `new_study:` expands into
points that fine-tune the run's encoder (config/oral-new-study.yaml)."""

import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from checkout import REPO
from hypothesis import given
from hypothesis import strategies as st
from planning import plan_error
from test_baselines import synthetic_study
from test_cli_training import aam, demo  # noqa: F401  (module fixture)
from test_oral_config import planned_overlay

from aam.analysis.baselines import fit_predict, relative_abundances
from aam.analysis.new_study import FIRST_COLUMNS, new_study_table
from aam.data.split import MIN_TRAIN, UNUSED, new_study_split, read_split, write_split
from aam.errors import InputError
from aam.workflow.flags import Flags
from aam.workflow.plan import SPLIT_PART


def _left_out(sizes: list[int], others: int = 7) -> tuple[pd.Series, pd.Series]:
    """A leave-one-study-out split: ``others`` samples train, the study's subjects (of
    ``sizes`` samples each) test; and each sample's subject."""
    ids = [f"o{i}" for i in range(others)]
    subjects = list(ids)
    for k, size in enumerate(sizes):
        ids += [f"p{k}_{j}" for j in range(size)]
        subjects += [f"p{k}"] * size
    labels = ["train"] * others + ["test"] * (len(ids) - others)
    index = pd.Index(ids, name="sample_id")
    return pd.Series(labels, index=index, name="split"), pd.Series(subjects, index=index)


@given(
    sizes=st.lists(st.integers(1, 6), min_size=12, max_size=40),
    seed=st.integers(0, 2**32 - 1),
    pool_seed=st.integers(0, 2**32 - 1),
)
def test_points_draw_whole_subjects_nested_and_test_the_same_samples(sizes, seed, pool_seed):
    split, subjects = _left_out(sizes)
    drawn = {}
    for size in (8, 16):
        try:
            drawn[size] = new_study_split(
                split,
                size=size,
                pool_size=16,
                seed=seed,
                pool_seed=pool_seed,
                val_fraction=0.2,
                groups=subjects,
            )
        except InputError as err:  # subjects too large for the sides, or for a test side
            text = str(err)
            assert "\n" not in text and ("whole groups" in text or "none to test" in text)
            return
    for point in drawn.values():
        assert (point[split != "test"] == UNUSED).all()  # no other study's sample is used
        sides = pd.DataFrame({"subject": subjects, "side": point}).groupby("subject")["side"]
        assert (sides.nunique() == 1).all()  # no subject on two sides (unused is no side)
        assert (point == "train").sum() >= MIN_TRAIN and (point == "val").sum() >= 1
    small, large = drawn[8], drawn[16]
    assert small.index[small == "test"].equals(large.index[large == "test"])
    assert set(small.index[small.isin(["train", "val"])]) <= set(
        large.index[large.isin(["train", "val"])]
    )  # nested: one seed's smaller size labels a subset of the larger one's samples


def test_sizes_come_as_close_as_subjects_allow_and_the_pool_is_fixed_across_seeds():
    split, subjects = _left_out([1] * 60)  # one sample per subject: exact sizes
    tests = set()
    for seed in (1, 2, 3):
        point = new_study_split(
            split, size=25, pool_size=40, seed=seed, pool_seed=9, val_fraction=0.2, groups=subjects
        )
        assert (point.isin(["train", "val"])).sum() == 25 and (point == "val").sum() == 5
        assert (point == "test").sum() == 20
        tests.add(tuple(point.index[point == "test"]))
    assert len(tests) == 1


@pytest.mark.parametrize(
    ("size", "pool", "message"),
    [
        (30, 20, "must be in 1..--pool-size"),
        (10, 60, "leave none to test"),
        (3, 10, "cannot give validation and 2 train samples"),
    ],
)
def test_what_the_study_cannot_give_is_refused_in_one_line(size, pool, message):
    split, subjects = _left_out([4] * 15)  # 60 samples in subjects of 4
    with pytest.raises(InputError, match=message) as err:
        new_study_split(
            split, size=size, pool_size=pool, seed=1, pool_seed=1, val_fraction=0.2, groups=subjects
        )
    assert "\n" not in str(err.value)


def test_a_size_equal_to_the_pool_is_one_draw_whatever_the_seeds_and_the_table_says_so(tmp_path):
    """The test samples are the study's outside the pool, the same for every size and seed, so
    at the pool's size every seed labels the whole pool: its seeds differ in which samples
    validate, not in which are labelled. `aam new-study` counts the distinct draws of each
    size (``draws``) rather than let its seeds pass for draws."""
    split, _ = _left_out([1] * 40)  # 40 single-sample subjects
    files, drawn = [], {}
    for size in (10, 20):
        for seed in (1, 2):
            point = new_study_split(
                split, size=size, pool_size=20, seed=seed, pool_seed=5, val_fraction=0.2
            )
            labelled = point.index[point.isin(["train", "val"])]
            drawn.setdefault(size, []).append((set(labelled), set(point.index[point == "val"])))
            files.append(_written(tmp_path / f"n{size}_s{seed}", point))
    (first, first_val), (second, second_val) = drawn[20]
    assert first == second and first_val != second_val  # one labelled set, two validations
    assert drawn[10][0][0] != drawn[10][1][0]  # below the pool's size the seeds redraw
    sizes, seeds = [10, 10, 20, 20], [1, 2, 1, 2]
    table = new_study_table(sizes, seeds, *[[f[k] for f in files] for k in range(3)])
    assert list(table["seeds"]) == [2, 2] and list(table["draws"]) == [2, 1]
    assert list(table.columns[: len(FIRST_COLUMNS)]) == FIRST_COLUMNS


def _written(stem: Path, point: pd.Series) -> list[Path]:
    """A point's split, baselines (the mean, 30) and predictions (the truth + 1) files: the
    truth of test sample ``p<k>_0`` is k."""
    write_split(stem.with_suffix(".split.tsv"), point)
    test = sorted(point.index[point == "test"])
    truth = [float(sample.split("_")[0][1:]) for sample in test]
    rows = {"sample_id": test, "split": "test", "model": "mean", "inputs": "none"}
    pd.DataFrame({**rows, "prediction": 30.0}).to_csv(
        stem.with_suffix(".baselines.tsv"), sep="\t", index=False
    )
    predicted = {"sample_id": test, "prediction": np.add(truth, 1.0), "true": truth}
    pd.DataFrame(predicted).to_csv(stem.with_suffix(".predictions.tsv"), sep="\t", index=False)
    return [stem.with_suffix(f".{kind}.tsv") for kind in ("split", "baselines", "predictions")]


def test_the_pooled_forest_fits_the_other_labels_too():
    study = synthetic_study()
    train, test = study.subset("train")[:10], study.subset("test")
    features = relative_abundances(study.samples, test)
    same = fit_predict(study, train, features, trees=30, pooled=train)
    np.testing.assert_array_equal(same["random_forest_pooled"], same["random_forest"])
    more = fit_predict(study, train, features, trees=30, pooled=study.subset("train"))
    error = {k: np.abs(v - study.targets[test]).mean() for k, v in more.items()}
    assert error["random_forest_pooled"] < error["random_forest"], error


def test_the_cli_draws_a_point_of_a_left_out_study_and_fits_the_pooled_forest(
    demo,  # noqa: F811
    tmp_path,
):
    metadata = pd.read_csv(demo["metadata"], sep="\t", dtype=str, index_col="sample_id")
    study = metadata["qiita_study_id"].value_counts().index[0]
    common = ["--table", demo["table"], "--metadata", demo["metadata"], "--target-column", "age"]
    left_out = tmp_path / "left_out.tsv"
    grouped = ["--group-column", "qiita_study_id", "--test-group", study]
    assert aam("split", *common, *grouped, "--output", left_out) == 0
    point = tmp_path / "point.tsv"
    size = ["--new-study-size", "5", "--pool-size", "8", "--seed", "2"]
    assert aam("split", *common, "--from-file", left_out, *size, "--output", point) == 0
    drawn, given_split = read_split(point), read_split(left_out)
    assert (drawn.isin(["train", "val"])).sum() == 5
    ours = metadata.loc[drawn.index[drawn != UNUSED], "qiita_study_id"]
    assert (ours == study).all() and (drawn[given_split != "test"] == UNUSED).all()
    out = tmp_path / "baselines.tsv"
    pooled = ["--pooled-split", left_out, "--trees", "20"]
    assert aam("baselines", *common, "--split", point, *pooled, "--output", out) == 0
    models = pd.read_csv(out, sep="\t")["model"].unique()
    assert sorted(models) == ["mean", "median", "random_forest", "random_forest_pooled"]


def _point(root: Path, name: str, truth: dict, predicted: dict, baselines: dict) -> list[Path]:
    """A point's split, baselines and predictions files for ``truth`` (its test samples)."""
    split = pd.Series(["test"] * len(truth) + ["train"], index=[*truth, "t0"], name="split")
    split.index.name = "sample_id"
    write_split(root / f"{name}.split.tsv", split)
    rows = [
        {"sample_id": s, "split": "test", "model": m, "inputs": "microbiome", "prediction": v[s]}
        for m, v in baselines.items()
        for s in truth
    ]
    pd.DataFrame(rows).to_csv(root / f"{name}.baselines.tsv", sep="\t", index=False)
    table = pd.DataFrame({"sample_id": list(truth), "prediction": [predicted[s] for s in truth]})
    table["true"] = list(truth.values())
    table.to_csv(root / f"{name}.predictions.tsv", sep="\t", index=False)
    return [root / f"{name}.{kind}.tsv" for kind in ("split", "baselines", "predictions")]


def test_a_sizes_errors_are_averaged_over_its_seeds_per_test_sample(tmp_path):
    truth = {"a": 10.0, "b": 20.0, "c": 30.0, "d": 40.0}
    mean = dict.fromkeys(truth, 25.0)
    constants = {"mean": mean, "median": dict.fromkeys(truth, 20.0)}
    one = _point(tmp_path, "s1", truth, {"a": 12, "b": 20, "c": 30, "d": 40}, constants)
    two = _point(tmp_path, "s2", truth, {"a": 10, "b": 24, "c": 30, "d": 40}, constants)
    points = [one, two]
    table = new_study_table(
        [25, 25], [1, 2], *[[p[k] for p in points] for k in range(3)], subjects=None
    )
    assert len(table) == 1 and table.loc[0, "seeds"] == 2 and table.loc[0, "n_test"] == 4
    assert table.loc[0, "model_mae"] == pytest.approx((2 + 4) / 2 / 4)  # 0.75
    assert table.loc[0, "mean_mae"] == pytest.approx(10.0)
    assert table.loc[0, "model_minus_mean"] == pytest.approx(0.75 - 10.0)
    low, high = table.loc[0, ["model_minus_mean_low", "model_minus_mean_high"]]
    assert low <= 0.75 - 10.0 <= high < 0
    assert table.loc[0, "median_mae"] == pytest.approx(10.0)  # |10-20|, 0, 10, 20
    assert table.loc[0, "model_minus_median"] == pytest.approx(0.75 - 10.0)
    other = _point(tmp_path, "s3", {"a": 10.0, "b": 20.0}, {"a": 10, "b": 20}, {"mean": mean})
    with pytest.raises(InputError, match="other test samples"):
        new_study_table([25, 50], [1, 1], *[[p[k] for p in (one, other)] for k in range(3)])


def test_the_overlay_fine_tunes_each_draw_from_the_encoder_of_the_other_studies(tmp_path):
    scheme = planned_overlay("oral-full.yaml", "oral-new-study.yaml", tmp_path)
    assert sorted(scheme.new_studies) == [
        f"{kind}_{study}" for kind in ("corpus", "scratch") for study in (10317, 1841, 2024)
    ]
    study = scheme.new_studies["corpus_1841"]
    assert len(study["points"]) == 12 and study["pool"] == 200 and study["pool_seed"] == 42
    point = scheme.runs["corpus_1841_n50_s2"]
    assert point["encoder_from"] == "corpus_1841" and point["finetune"]["seed"] == 2
    assert scheme.encoder("scratch_1841_n50_s2") is None
    assert scheme.scratch_new_study("corpus_1841") == "scratch_1841"
    assert scheme.split_part("scratch_1841_n50_s2") == "new_study/2/50"
    assert re.fullmatch(SPLIT_PART, scheme.split_part("scratch_1841_n50_s2"))
    assert scheme.datasets["new_1841"]["split_test_group"] == 1841
    flags = Flags(scheme)
    wildcards = type("W", (), {"run": "corpus_2024_n25_s1", "dataset": "new_2024"})
    assert "--split-group-column subject" in flags.predict(wildcards)
    split = flags.new_study_split(type("W", (), {"dataset": "new_2024", "seed": 3, "size": 25}))
    assert "--new-study-size 25 --pool-seed 42 --pool-size 200 --seed 3" in split
    assert "--group-column subject" in split and "--val-fraction 0.2" in split
    assert "corpus_1841_n25_s1" not in scheme.importance_runs
    inputs = scheme.new_study_inputs("corpus_1841")
    assert [len(inputs[k]) for k in ("splits", "scratch", "forests")] == [12, 12, 12]
    assert inputs["scratch"][0].parts[-3] == "scratch_1841_n25_s1"  # the same draw's twin
    assert scheme.new_study_inputs("scratch_1841")["forests"] == []  # no encoder to embed
    assert scheme.pooled_split("new_1841", "new_study/2/50").name == "split.tsv"
    assert scheme.pooled_split("new_1841", "lc/42/0.5") == []


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda c: c["datasets"]["new_1841"].update(split_test_group=None),
            "dataset new_1841 leaves no study out",
        ),
        (
            lambda c: c["runs"]["corpus_1841"]["new_study"].update(pool=100),
            "pool: 100 is below the largest size 200",
        ),
        (
            lambda c: c["runs"]["scratch_1841"].update(new_study={"sizes": [25], "seeds": [1]}),
            "differ from another new study of dataset new_1841",
        ),
    ],
)
def test_a_new_study_the_workflow_cannot_draw_is_refused_at_parse_time(edit, message, tmp_path):
    config = yaml.safe_load((REPO / "config/oral-full.yaml").read_text())
    overlay = yaml.safe_load((REPO / "config/oral-new-study.yaml").read_text())
    config.update(overlay)
    edit(config)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert message in plan_error(path)


def test_the_cli_writes_the_table_and_a_figure_of_mae_against_the_labels(tmp_path, caplog):
    truth = {"a": 10.0, "b": 20.0, "c": 30.0}
    mean = dict.fromkeys(truth, 20.0)
    points = [
        _point(tmp_path, f"p{k}", truth, {s: v + k for s, v in truth.items()}, {"mean": mean})
        for k in range(4)
    ]
    metadata = tmp_path / "metadata.tsv"
    metadata.write_text("sample_id\tage\tsubject\na\t10\tx\nb\t20\tx\nc\t30\ty\n")
    files = {
        flag: [p[k] for p in points]
        for k, flag in enumerate(("--splits", "--baselines", "--predictions"))
    }
    table, plot = tmp_path / "out/new.tsv", tmp_path / "out/new.png"
    args = [x for flag, paths in files.items() for x in (flag, *paths)]
    args += ["--sizes", "25", "25", "50", "50", "--seeds", "1", "2", "1", "2"]
    args += ["--metadata", metadata, "--group-column", "subject", "--target-unit", "years"]
    assert aam("new-study", *args, "--output", table, "--plot", plot) == 0
    written = pd.read_csv(table, sep="\t")
    assert list(written["size"]) == [25, 50] and list(written["seeds"]) == [2, 2]
    assert written["model_mae"].tolist() == pytest.approx([0.5, 2.5])  # seeds 0,1 and 2,3
    # every point labels the one sample t0: two seeds, one draw, said in one line per size
    assert list(written["draws"]) == [1, 1]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [line.split(":")[0] for line in warned] == ["25 labelled", "50 labelled"], warned
    assert "its 2 seeds drew 1 distinct set(s) of labelled samples" in warned[0]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_new_study_of_a_categorical_target_is_refused_at_parse_time(tmp_path):
    """`aam new-study` scores MAE: a classifier's new study would train every point first."""
    config = yaml.safe_load((REPO / "config/oral-full.yaml").read_text())
    config.update(yaml.safe_load((REPO / "config/oral-new-study.yaml").read_text()))
    config["datasets"]["new_1841"]["classifier"] = True
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert "dataset new_1841 has a categorical target" in plan_error(path)


def test_a_pool_equal_to_the_largest_size_is_said_to_be_one_draw_there(tmp_path):
    scheme = planned_overlay("oral-full.yaml", "oral-new-study.yaml", tmp_path)
    notes = [n for n in scheme.notes if "new_study" in n]
    assert "runs.corpus_1841.new_study: at size 200 (= pool) every seed labels the same 200" in (
        " ".join(notes)
    )
    assert len(notes) == len(scheme.new_studies)  # each study of the overlay: pool = largest size
