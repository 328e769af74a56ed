"""A grouped split of a classifier's samples is stratified by class (issue 73, item 3): whole
groups per side, each side's class balance close to the whole's; a side that still holds one
class is warned of by `aam split`, and fine-tuning then picks its best epoch by the validation
loss, saying so."""

import json
import logging

import numpy as np
import pandas as pd
import pytest
from checkout import REPO
from test_cli_training import (
    aam,
    micro_metadata,
    micro_table,
    micro_train,
    read_history,
    write_metadata,
    write_table,
)

from aam.data.split import (
    make_fold_split,
    make_split,
    one_class_sides,
    one_class_warnings,
    read_split,
    write_split,
)

IBD = pd.read_csv(REPO / "data/ibd/metadata.tsv", sep="\t", dtype=str, index_col="sample_id")
# config/ibd.yaml's fractions; seed 2's draw by sizes alone gave validation 86 Crohn's samples
IBD_SPLIT = {"val_fraction": 0.2, "test_fraction": 0.25}
LARGEST_PERSON = int(IBD["host_subject_id"].value_counts().max())


def ibd_split(seed: int, classes: bool = True) -> pd.Series:
    return make_split(
        list(IBD.index),
        **IBD_SPLIT,
        seed=seed,
        groups=list(IBD["host_subject_id"]),
        classes=list(IBD["ibd"]) if classes else None,
    )


def assert_whole(split: pd.Series, groups: pd.Series) -> None:
    spread = split.groupby(groups.reindex(split.index)).nunique()
    assert (spread == 1).all(), spread[spread > 1]


def test_the_draw_by_sizes_alone_is_unchanged_and_can_give_one_class():
    """Without classes (a regression target) the draw is the one before stratifying: seed 2
    gives the ibd data a validation set of one class, which the stratified draw must fix."""
    split = ibd_split(2, classes=False)
    assert one_class_sides(split, IBD["ibd"]) == {"val": ("Crohns", 86)}
    assert split.value_counts().to_dict() == {"train": 248, "test": 115, "val": 86}


@pytest.mark.parametrize("seed", [2, 3, 10, 17, 42])  # 2, 3, 10, 17 gave a one-class side
def test_a_grouped_classifier_split_keeps_each_sides_class_balance(seed):
    split = ibd_split(seed)
    assert_whole(split, IBD["host_subject_id"])
    share = IBD["ibd"].eq("Crohns").groupby(split).mean()
    whole = IBD["ibd"].eq("Crohns").mean()
    assert (share - whole).abs().max() < 0.1, share  # 0.40 Crohn's everywhere, within 0.1
    n = len(IBD)
    for side, fraction in (("val", 0.2), ("test", 0.25)):
        assert abs((split == side).sum() - fraction * n) <= LARGEST_PERSON  # whole people
    assert one_class_sides(split, IBD["ibd"]) == {}


def test_no_seed_of_fifty_gives_the_ibd_data_a_one_class_side():
    one_class = [s for s in range(50) if one_class_sides(ibd_split(s), IBD["ibd"])]
    assert one_class == []
    unstratified = [s for s in range(50) if one_class_sides(ibd_split(s, False), IBD["ibd"])]
    assert len(unstratified) >= 4  # what the stratified draw fixes


def test_grouped_folds_draw_their_validation_people_stratified():
    """Fold 1 of 4 (seed 42, config/ibd.yaml's cv) drew 3 Crohn's people as its validation."""
    for fold in range(1, 5):
        split = make_fold_split(
            list(IBD.index),
            folds=4,
            fold=fold,
            val_fraction=0.2,
            seed=42,
            classes=list(IBD["ibd"]),
            groups=list(IBD["host_subject_id"]),
        )
        assert_whole(split, IBD["host_subject_id"])
        assert one_class_sides(split, IBD["ibd"]) == {}, fold


def test_leaving_one_person_out_draws_validation_stratified():
    split = make_split(
        list(IBD.index),
        val_fraction=0.2,
        test_fraction=0.0,
        seed=2,
        groups=list(IBD["host_subject_id"]),
        test_group="s1000100",
        classes=list(IBD["ibd"]),
    )
    assert set(IBD.loc[split == "test", "host_subject_id"]) == {"s1000100"}
    assert set(IBD.loc[split == "val", "ibd"]) == {"Control", "Crohns"}
    # the person left out holds one class: the warning says so and how to read it
    (line,) = one_class_warnings(split, IBD["ibd"], "lo.tsv", IBD["host_subject_id"])
    assert line.startswith("lo.tsv: test holds one class ('Control', 24 samples) of the 2 ")
    assert "it is one group (s1000100, --group-column)" in line


def _one_group_of_b() -> tuple[list[str], pd.Series, pd.Series]:
    """Ten groups of five samples: nine of class A, one of class B."""
    ids = [f"s{k}" for k in range(50)]
    groups = pd.Series([f"g{k // 5}" for k in range(50)], index=ids)
    classes = pd.Series(["B" if k < 5 else "A" for k in range(50)], index=ids)
    return ids, groups, classes


def test_a_side_that_whole_groups_leave_one_class_is_one_line_naming_the_fix():
    ids, groups, classes = _one_group_of_b()
    split = make_split(
        ids, val_fraction=0.2, test_fraction=0.2, seed=0, groups=list(groups), classes=classes
    )
    sides = one_class_sides(split, classes)
    assert len(sides) == 2 and all(label == "A" for label, _ in sides.values())
    lines = one_class_warnings(split, classes, "split.tsv", groups)
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    side = next(iter(sides))
    assert lines[0].startswith(f"split.tsv: {side} holds one class ('A', ")
    assert "class 'B' has 1 group(s) (--group-column)" in lines[0]
    assert "add samples of more groups of that class" in lines[0]
    # without groups the fix is another draw
    assert "draw another split" in one_class_warnings(split, classes, "split.tsv")[0]


def test_unused_samples_and_samples_without_a_class_are_not_counted():
    split = pd.Series(["train", "train", "val", "val", "unused", "test"], index=list("abcdef"))
    classes = pd.Series(["x", "y", "x", "x", "y"], index=list("abcde"))  # f: no class
    assert one_class_sides(split, classes) == {"val": ("x", 2)}
    assert one_class_sides(split, classes.replace("y", "x")) == {}  # one class in all: no sides


def test_aam_split_warns_of_a_one_class_side(tmp_path, caplog):
    ids, groups, classes = _one_group_of_b()
    table = write_table(tmp_path / "table.biom", micro_table(50))
    metadata = pd.DataFrame(
        {"label": classes.to_numpy(), "person": groups.to_numpy()},
        index=pd.Index([f"s{k:02d}" for k in range(50)], name="sample_id"),
    )
    meta = write_metadata(tmp_path / "metadata.tsv", metadata)
    out = tmp_path / "split.tsv"
    caplog.set_level(logging.WARNING)
    args = ["--table", table, "--metadata", meta, "--target-column", "label", "--classifier"]
    fractions = ["--val-fraction", "0.2", "--test-fraction", "0.2"]  # two people each
    assert aam("split", *args, *fractions, "--group-column", "person", "--output", out) == 0
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    sides = one_class_sides(read_split(out), metadata["label"])
    assert sides and len(warned) == len(sides), warned
    assert all(
        line.startswith(f"{out}: ") and "class 'B' has 1 group(s)" in line for line in warned
    )


def _micro_classes(tmp_path, val: list[str]) -> tuple:
    """A hand-made 12-sample table, its metadata (class ``site``: gut, oral alternating) and a
    split whose val samples are ``val``, the others train."""
    table = write_table(tmp_path / "table.biom", micro_table())
    metadata = write_metadata(tmp_path / "metadata.tsv", micro_metadata())
    ids = [f"s{k:02d}" for k in range(12)]
    split = pd.Series(["val" if i in val else "train" for i in ids], index=ids, name="split")
    split.index.name = "sample_id"
    write_split(tmp_path / "split.tsv", split)
    return table, metadata, tmp_path / "split.tsv"


@pytest.mark.parametrize(
    ("val", "chosen"),
    [(["s00", "s02", "s04"], "val_loss"), (["s00", "s01", "s02"], "val_accuracy")],
)
def test_a_one_class_validation_picks_the_best_epoch_by_its_loss(tmp_path, caplog, val, chosen):
    table, metadata, split = _micro_classes(tmp_path, val)  # s00, s02, s04: all gut
    out = tmp_path / "run"
    caplog.set_level(logging.WARNING)
    flags = ["--classifier", "--split", split, "--epochs", "3"]
    assert micro_train(table, metadata, out, *flags, target="site") == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best_metric"] == chosen
    history = read_history(out / "history.tsv")
    if chosen == "val_loss":
        assert summary["best_epoch"] == int(history.loc[history["val_loss"].idxmin(), "epoch"])
    warned = [r.getMessage() for r in caplog.records if "holds one class" in r.getMessage()]
    if chosen == "val_loss":
        assert warned == [
            "--split: validation holds one class ('gut', 3 samples): its AUC is undefined and "
            "its accuracy scores that class alone; the best epoch is chosen by val_loss instead "
            "of val_accuracy; make a split whose validation holds every class (`aam split "
            "--classifier` stratifies whole groups by class)"
        ]
    else:
        assert warned == []
    assert np.isnan(history["val_auc"]).all() == (chosen == "val_loss")


def test_an_asked_auc_on_a_one_class_validation_gives_way_to_the_loss(tmp_path, caplog):
    """The AUC of one class is NaN in every epoch: asked for, it stopped the run with no model
    to keep; it now gives way to the loss, with the line."""
    table, metadata, split = _micro_classes(tmp_path, ["s00", "s02", "s04"])
    out = tmp_path / "run"
    caplog.set_level(logging.WARNING)
    flags = ["--classifier", "--split", split, "--epochs", "2", "--best-metric", "auc"]
    assert micro_train(table, metadata, out, *flags, target="site") == 0
    assert json.loads((out / "summary.json").read_text())["best_metric"] == "val_loss"
    assert any("chosen by val_loss instead of val_auc" in r.getMessage() for r in caplog.records)
