"""Grouped splits (issue 59, item 1): `aam split --group-column` keeps each group (a subject, a
study) whole, in one split, in every fold and when one group is left out (`--test-group`);
what whole groups cannot give is refused in one line."""

import shlex
from pathlib import Path

import pandas as pd
import pytest
import yaml
from checkout import REPO
from hypothesis import given, settings
from hypothesis import strategies as st
from planning import check_data_error, plan_error, planned
from test_cli_training import aam, error_line

from aam.data.split import MIN_TRAIN, make_fold_split, make_split, read_split
from aam.errors import InputError
from aam.workflow.flags import Flags

DEMO = REPO / "data/demo"

# 1-30 groups of 1-25 samples each
group_sizes = st.lists(st.integers(1, 25), min_size=1, max_size=30)


def _samples(sizes: list[int]) -> tuple[list[str], list[str]]:
    groups = [f"g{k}" for k, size in enumerate(sizes) for _ in range(size)]
    return [f"s{i}" for i in range(len(groups))], groups


def _assert_whole(split: pd.Series, groups: list[str]) -> None:
    parts = pd.DataFrame({"group": groups, "part": split.to_numpy()}).groupby("group")["part"]
    spread = parts.nunique()
    assert (spread == 1).all(), spread[spread > 1]


@given(
    sizes=group_sizes,
    val=st.sampled_from([0.0, 0.1, 0.2]),
    test=st.sampled_from([0.1, 0.2, 0.3]),
    seed=st.integers(0, 2**32 - 1),
)
def test_no_group_is_on_two_sides_and_every_side_asked_for_has_samples(sizes, val, test, seed):
    ids, groups = _samples(sizes)
    try:
        split = make_split(ids, val_fraction=val, test_fraction=test, seed=seed, groups=groups)
    except InputError as err:  # too few or too large groups for three sides: one line
        assert "\n" not in str(err) and "whole groups" in str(err) or "samples leave" in str(err)
        return
    assert list(split.index) == ids
    _assert_whole(split, groups)
    counts = split.value_counts()
    assert counts.get("train", 0) >= MIN_TRAIN
    assert counts.get("test", 0) > 0 or round(test * len(ids)) == 0
    assert counts.get("val", 0) > 0 or round(val * len(ids)) == 0


@given(sizes=st.lists(st.integers(1, 3), min_size=60, max_size=80), seed=st.integers(0, 1000))
def test_many_small_groups_meet_the_fractions_closely(sizes, seed):
    ids, groups = _samples(sizes)
    split = make_split(ids, val_fraction=0.1, test_fraction=0.2, seed=seed, groups=groups)
    counts = split.value_counts()
    for part, fraction in (("test", 0.2), ("val", 0.1)):
        assert abs(counts[part] - fraction * len(ids)) <= 3, counts  # a group is <= 3 samples


@settings(deadline=None)  # the first example imports scikit-learn's model_selection
@given(sizes=st.lists(st.integers(1, 12), min_size=3, max_size=20), seed=st.integers(0, 1000))
def test_grouped_folds_keep_groups_whole_and_their_tests_partition_the_samples(sizes, seed):
    ids, groups = _samples(sizes)
    folds = min(3, len(sizes))
    tested = []
    for fold in range(1, folds + 1):
        try:
            split = make_fold_split(
                ids, folds=folds, fold=fold, val_fraction=0.0, seed=seed, groups=groups
            )
        except InputError as err:
            assert "whole groups" in str(err)  # a fold's rest too small to train on
            return
        _assert_whole(split, groups)
        tested += list(split.index[split == "test"])
    assert sorted(tested) == sorted(ids)


def test_as_many_folds_as_groups_leave_each_group_out_in_turn():
    ids, groups = _samples([4, 6, 5, 7])
    left_out = []
    for fold in range(1, 5):
        split = make_fold_split(ids, folds=4, fold=fold, val_fraction=0.2, seed=3, groups=groups)
        _assert_whole(split, groups)
        left_out.append({g for g, s in zip(groups, split, strict=True) if s == "test"})
    assert sorted(map(sorted, left_out)) == [["g0"], ["g1"], ["g2"], ["g3"]]
    with pytest.raises(InputError, match=r"only 4 group\(s\) .*; use at most 4 folds$"):
        make_fold_split(ids, folds=5, fold=1, val_fraction=0.1, seed=3, groups=groups)
    one = ["g0"] * len(ids)  # no fold count can work: the fix names a column, not "1 folds"
    with pytest.raises(InputError, match=r"only 1 group\(s\) .*; group by a column with 2 or"):
        make_fold_split(ids, folds=5, fold=1, val_fraction=0.1, seed=3, groups=one)


def test_grouped_class_folds_keep_groups_whole_and_hold_each_class():
    ids, groups = _samples([3] * 12)
    classes = ["a" if k % 2 else "b" for k in range(12) for _ in range(3)]
    for fold in range(1, 4):
        split = make_fold_split(
            ids, folds=3, fold=fold, val_fraction=0.1, seed=5, classes=classes, groups=groups
        )
        _assert_whole(split, groups)
        assert set(pd.Series(classes, index=ids)[split == "test"]) == {"a", "b"}


def test_one_group_left_out_is_the_test_set():
    ids, groups = _samples([5, 8, 6, 9, 4])
    split = make_split(
        ids, val_fraction=0.2, test_fraction=0.3, seed=1, groups=groups, test_group="g3"
    )
    assert set(split.index[split == "test"]) == {
        i for i, g in zip(ids, groups, strict=True) if g == "g3"
    }
    _assert_whole(split, groups)
    assert (split == "val").any() and (split == "train").sum() >= MIN_TRAIN
    with pytest.raises(InputError, match="no sample of that group"):
        make_split(ids, val_fraction=0.1, test_fraction=0.2, seed=1, groups=groups, test_group="g9")


def test_two_groups_cannot_fill_three_sides():
    ids, groups = _samples([10, 10])
    with pytest.raises(InputError, match="cannot give .* in whole groups") as err:
        make_split(ids, val_fraction=0.1, test_fraction=0.2, seed=1, groups=groups)
    assert "\n" not in str(err.value)


def split_demo(out: Path, *extra: str) -> int:
    """`aam split` of the demo's samples with a target (age) into ``out``."""
    demo = ["--table", DEMO / "table.biom", "--metadata", DEMO / "metadata.tsv"]
    return aam("split", *demo, "--target-column", "age", "--output", out, *extra)


def test_the_demo_split_by_study_has_no_study_on_two_sides(tmp_path):
    out = tmp_path / "split.tsv"
    assert split_demo(out, "--group-column", "qiita_study_id") == 0
    split = read_split(out)
    studies = pd.read_csv(DEMO / "metadata.tsv", sep="\t", dtype=str, index_col="sample_id")
    _assert_whole(split, list(studies.loc[split.index, "qiita_study_id"]))
    assert set(split) == {"train", "val", "test"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--group-column", "nope"], "no column 'nope' (--group-column)"),
        (["--test-group", "550"], "--test-group 550: needs --group-column"),
        (["--group-column", "qiita_study_id", "--from-column", "age"], "a given split"),
        (
            [
                "--group-column",
                "qiita_study_id",
                "--test-group",
                "550",
                "--folds",
                "3",
                "--fold",
                "1",
            ],
            "--test-group with --folds",
        ),
        (["--group-column", "qiita_study_id", "--test-group", "1"], "no sample of that group"),
    ],
)
def test_bad_grouping_is_one_line(tmp_path, capsys, extra, message):
    out = tmp_path / "split.tsv"
    code = split_demo(out, *extra)
    assert code != 0 and not out.exists()
    assert message in error_line(capsys, "split")


def test_a_sample_without_a_group_is_one_line(tmp_path, capsys):
    metadata = pd.read_csv(DEMO / "metadata.tsv", sep="\t", dtype=str)
    metadata.loc[3, "qiita_study_id"] = ""
    path = tmp_path / "metadata.tsv"
    metadata.to_csv(path, sep="\t", index=False)
    out = tmp_path / "split.tsv"
    code = aam(
        "split",
        "--table",
        DEMO / "table.biom",
        "--metadata",
        path,
        "--target-column",
        "age",
        "--group-column",
        "qiita_study_id",
        "--output",
        out,
    )
    assert code != 0 and not out.exists()
    assert "is empty for 1 sample(s)" in error_line(capsys, "split")


# --- the workflow: datasets.<name>.split_group_column / split_test_group -----------------------


def _config(tmp_path, runs: dict | None = None, **dataset) -> Path:
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config["datasets"]["demo"].update(dataset)
    config["runs"]["tiny"].update(runs or {})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Wildcards:
    dataset, folds, fold, seed = "demo", "3", "2", "42"


def test_the_split_and_the_folds_of_a_grouped_dataset_keep_its_groups_whole(tmp_path):
    flags = Flags(planned(_config(tmp_path, split_group_column="qiita_study_id")))
    for words in (shlex.split(flags.split(Wildcards)), shlex.split(flags.cv_split(Wildcards))):
        assert words[words.index("--group-column") + 1] == "qiita_study_id"
    left_out = _config(tmp_path, split_group_column="qiita_study_id", split_test_group=10317)
    words = shlex.split(Flags(planned(left_out)).split(Wildcards))
    assert words[words.index("--test-group") + 1] == "10317"


@pytest.mark.parametrize(
    ("dataset", "runs", "message"),
    [
        ({"split_test_group": "550"}, None, "split_test_group: needs split_group_column"),
        (
            {"split_group_column": "qiita_study_id", "split_column": "age"},
            None,
            "split_column and split_group_column both set",
        ),
        (
            {"split_group_column": "qiita_study_id", "split_test_group": "550"},
            {"cv": {"folds": 3}},
            "has its own split (split_test_group)",
        ),
    ],
)
def test_a_grouping_the_split_cannot_follow_stops_the_plan(tmp_path, dataset, runs, message):
    assert message in plan_error(_config(tmp_path, runs, **dataset))


def test_the_data_check_refuses_more_folds_than_groups_and_grouping_by_the_target(tmp_path):
    config = _config(tmp_path, {"cv": {"folds": 10}}, split_group_column="qiita_study_id")
    assert "10 folds but 9 group(s)" in check_data_error(config, "demo")
    config = _config(tmp_path, split_group_column="age")
    assert "split_group_column: 'age' is the target" in plan_error(config)  # at parse time


def test_a_dataset_whose_covariate_is_its_target_stops_the_plan(tmp_path):
    """Issue 61, item 1: refused at parse time, before any job (and by `aam check-data`)."""
    config = _config(tmp_path, categorical=["qiita_study_id", "age"])
    assert "datasets.demo.categorical: 'age' is the target" in plan_error(config)


def test_the_data_check_refuses_a_grouping_of_one_group_and_all_empty_columns(tmp_path):
    """Issue 74, item 3: what the split or training refused later, check-data refuses first
    (a grouped split over one group; an all-empty covariate or group column)."""
    metadata = pd.read_csv(REPO / "data/demo/metadata.tsv", sep="\t", dtype=str)
    metadata["person"] = "p1"
    metadata["empty"] = ""
    path = tmp_path / "metadata.tsv"
    metadata.to_csv(path, sep="\t", index=False)
    config = _config(tmp_path, metadata=str(path), split_group_column="person")
    line = check_data_error(config, "demo")
    assert "datasets.demo.split_group_column: " in line and "holds one group (p1)" in line
    for key in ({"categorical": ["empty"]}, {"group_column": "empty"}):
        line = check_data_error(_config(tmp_path, metadata=str(path), **key), "demo")
        assert "'empty' is empty in " in line and "for every one of the 400 samples" in line


@pytest.mark.parametrize(
    ("dataset", "message"),
    [
        (
            {"split_group_column": "person"},
            "datasets.demo: its seeded split cannot be made: 2 group(s) of 400 samples cannot "
            "give test and val samples in whole groups",
        ),
        (
            {"split_group_column": "qiita_study_id", "split_test_group": "nope"},
            "datasets.demo: its seeded split cannot be made: split_test_group nope: no sample "
            "of that group",
        ),
    ],
    ids=["two-groups-three-sides", "absent-test-group"],
)
def test_the_data_check_draws_the_seeded_split_first(tmp_path, dataset, message):
    """A grouped split the config asks for but that cannot be made (two groups for train, val
    and test; a test group no sample has) stops check-data, the first job, naming the
    config's fields, not rule split after the stage jobs."""
    metadata = pd.read_csv(REPO / "data/demo/metadata.tsv", sep="\t", dtype=str)
    metadata["person"] = ["p1", "p2"] * (len(metadata) // 2)
    path = tmp_path / "metadata.tsv"
    metadata.to_csv(path, sep="\t", index=False)
    line = check_data_error(_config(tmp_path, metadata=str(path), **dataset), "demo")
    assert message in line, line
    assert "--" not in line.split("cannot be made:")[1], line  # the config's names, not flags
