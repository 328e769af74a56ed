"""`load_study`: samples without a target and the split file written by `aam split`."""

from __future__ import annotations

from pathlib import Path

import biom
import numpy as np
import pandas as pd
import pytest
from biom.util import biom_open

from aam.cli import main
from aam.data.split import write_split
from aam.errors import InputError
from aam.training.inputs.study import Labels, UniFracSource, load_study
from aam.training.inputs.study_options import StudyOptions
from aam.unifrac.io import write_distance_matrix

ASVS = ["ACGTACGTAC", "CCGGTTAAGG", "TTTTAAAACC", "GAGAGACTCT"]


def _inputs(tmp_path: Path, ages: list[float], sites: list[str | None]) -> tuple[Path, Path]:
    ids = [f"s{k}" for k in range(len(ages))]
    counts = np.random.default_rng(0).integers(1, 9, size=(len(ASVS), len(ids))).astype(float)
    table = tmp_path / "table.biom"
    with biom_open(str(table), "w") as handle:
        biom.Table(counts, ASVS, ids).to_hdf5(handle, "test")
    metadata = tmp_path / "metadata.tsv"
    frame = pd.DataFrame({"sample_id": ids, "age": ages, "site": sites})
    frame.to_csv(metadata, sep="\t", index=False)
    return table, metadata


def _split(tmp_path: Path, ids: list[str]) -> Path:
    labels = ["train"] * (len(ids) - 1) + ["val"]
    path = tmp_path / "split.tsv"
    write_split(path, pd.Series(labels, index=pd.Index(ids, name="sample_id"), name="split"))
    return path


AGES = [20.0, float("nan"), 40.0, 50.0, float("nan"), 70.0]
SITES = ["gut", "oral", None, "gut", "oral", "gut"]


def test_split_without_the_samples_lacking_a_target(tmp_path):
    table, metadata = _inputs(tmp_path, AGES, SITES)
    # What `aam split --target-column age` writes: s1 and s4 have no age and are left out.
    split = _split(tmp_path, ["s0", "s2", "s3", "s5"])
    study = load_study(table, max_bp=10, labels=Labels(metadata, target="age"), split_path=split)
    assert study.samples.sample_ids == ["s0", "s2", "s3", "s5"]
    np.testing.assert_array_equal(study.targets, [20.0, 40.0, 50.0, 70.0])
    assert list(study.split) == ["train", "train", "train", "val"]


def test_split_without_a_sample_lacking_a_class(tmp_path):
    table, metadata = _inputs(tmp_path, AGES, SITES)
    split = _split(tmp_path, ["s0", "s1", "s3", "s4", "s5"])  # s2 has no site
    study = load_study(
        table, max_bp=10, labels=Labels(metadata, target="site", classifier=True), split_path=split
    )
    assert study.classes == ["gut", "oral"]
    assert study.samples.sample_ids == ["s0", "s1", "s3", "s4", "s5"]


def test_split_missing_a_sample_that_has_a_target_is_still_an_error(tmp_path):
    table, metadata = _inputs(tmp_path, AGES, SITES)
    split = _split(tmp_path, ["s0", "s2", "s3"])  # s5 has an age but no split
    with pytest.raises(InputError, match=r"split.tsv lacks 1 ID\(s\) .*\(s5\)"):
        load_study(table, max_bp=10, labels=Labels(metadata, target="age"), split_path=split)
    study = load_study(
        table,
        max_bp=10,
        labels=Labels(metadata, target="age"),
        split_path=split,
        reading=StudyOptions(allow_missing_samples=True),
    )
    assert study.samples.sample_ids == ["s0", "s2", "s3"]


def test_split_without_target_keeps_the_strict_check(tmp_path):
    table, metadata = _inputs(tmp_path, AGES, SITES)
    split = _split(tmp_path, ["s0", "s2", "s3", "s5"])
    with pytest.raises(InputError, match="lacks 2 ID"):
        load_study(table, max_bp=10, labels=Labels(metadata), split_path=split)


def test_truncated_unifrac_matrix_is_one_line(tmp_path):
    table, _ = _inputs(tmp_path, AGES, SITES)
    unifrac = tmp_path / "unifrac.h5"
    ids = [f"s{k}" for k in range(len(AGES))]
    write_distance_matrix(unifrac, ids, np.ones((len(ids), len(ids))) - np.eye(len(ids)))
    unifrac.write_bytes(unifrac.read_bytes()[: unifrac.stat().st_size // 2])
    with pytest.raises(InputError) as info:
        load_study(table, max_bp=10, unifrac=UniFracSource(matrix=unifrac))
    assert str(info.value).startswith(f"{unifrac}: corrupt or truncated HDF5 file")
    assert "\n" not in str(info.value)


# --- `aam split`: the output is checked before the inputs are read ---------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "split.csv",
            "split.csv: unsupported split file name (extension '.csv'); "
            "name it one of *.tsv, *.txt",
        ),
        ("is_a_dir", "is_a_dir: unsupported split file name (no extension)"),
        (
            "a_file/split.tsv",
            "a_file: split directory is an existing file; choose another location",
        ),
    ],
)
def test_split_output_is_checked_first(tmp_path, capsys, name, message):
    (tmp_path / "a_file").write_text("not a directory\n")
    (tmp_path / "is_a_dir").mkdir()
    argv = ["split", "--table", str(tmp_path / "absent.biom"), "--output", str(tmp_path / name)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "is_a_dir"]


def test_split_output_that_is_a_directory(tmp_path, capsys):
    (tmp_path / "split.tsv").mkdir()
    argv = ["split", "--table", str(tmp_path / "absent.biom"), "--output"]
    assert main([*argv, str(tmp_path / "split.tsv")]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("split.tsv: split path is a directory; give a file name")
    )


def _given(tmp_path: Path, labels: list[str | None]) -> tuple[Path, Path]:
    """The AGES study with a metadata column ``fold`` holding ``labels``."""
    table, metadata = _inputs(tmp_path, AGES, SITES)
    frame = pd.read_csv(metadata, sep="\t")
    frame["fold"] = labels
    frame.to_csv(metadata, sep="\t", index=False)
    return table, metadata


def test_split_from_a_metadata_column_keeps_the_users_labels(tmp_path, capsys):
    # s1 and s4 have no age: whatever their labels, they are unused (pretraining may read them).
    table, metadata = _given(tmp_path, ["train", None, "test", "val", None, "train"])
    out = tmp_path / "split.tsv"
    args = ["--table", table, "--metadata", metadata, "--target-column", "age"]
    assert main(["split", *map(str, args), "--from-column", "fold", "--output", str(out)]) == 0
    split = pd.read_csv(out, sep="\t", index_col="sample_id")["split"]
    labelled = {"s0": "train", "s2": "test", "s3": "val", "s5": "train"}
    assert split.to_dict() == {**labelled, "s1": "unused", "s4": "unused"}
    again = tmp_path / "again.tsv"
    assert main(["split", *map(str, args), "--from-file", str(out), "--output", str(again)]) == 0
    assert again.read_text() == out.read_text()


def test_a_user_split_may_leave_samples_with_a_target_out(tmp_path):
    """``unused`` in a split column or file (a new-study point's split read back as a
    dataset's split_file) leaves that sample out of training and test alike."""
    table, metadata = _given(tmp_path, ["train", None, "unused", "val", None, "train"])
    out = tmp_path / "split.tsv"
    args = ["--table", table, "--metadata", metadata, "--target-column", "age"]
    assert main(["split", *map(str, args), "--from-column", "fold", "--output", str(out)]) == 0
    split = pd.read_csv(out, sep="\t", index_col="sample_id")["split"]
    assert split.to_dict() == {
        **{"s0": "train", "s3": "val", "s5": "train"},
        **{"s1": "unused", "s2": "unused", "s4": "unused"},
    }
    again = tmp_path / "again.tsv"
    assert main(["split", *map(str, args), "--from-file", str(out), "--output", str(again)]) == 0
    assert again.read_text() == out.read_text()


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (["train", None, "test", "holdout", None, "train"], "unknown split label(s) ['holdout']"),
        (["train", None, None, "val", None, "train"], "no split label for 1 of 4 samples"),
        (["test", None, "test", "val", None, "val"], "no sample is labelled train"),
    ],
    ids=["unknown-label", "sample-without-label", "no-train"],
)
def test_a_bad_user_split_is_one_line_naming_the_column(tmp_path, capsys, labels, message):
    table, metadata = _given(tmp_path, labels)
    out = tmp_path / "split.tsv"
    args = ["--table", table, "--metadata", metadata, "--target-column", "age"]
    assert main(["split", *map(str, args), "--from-column", "fold", "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("aam split: error: "), err
    assert f"column 'fold': {message}" in err, err
    assert not out.exists()


def test_split_from_a_column_needs_the_metadata(tmp_path, capsys):
    table, _ = _given(tmp_path, ["train", None, "test", "val", None, "train"])
    out = tmp_path / "split.tsv"
    argv = ["split", "--table", str(table), "--from-column", "fold", "--output", str(out)]
    assert main(argv) == 2
    assert (
        capsys.readouterr().err.strip() == "aam split: error: --from-column fold: needs --metadata"
    )
    assert not out.exists()


def test_a_target_column_needs_the_metadata(tmp_path, capsys):
    table, _ = _inputs(tmp_path, AGES, SITES)
    out = tmp_path / "split.tsv"
    argv = ["split", "--table", str(table), "--target-column", "age", "--output", str(out)]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "aam split: error: --target-column age: needs --metadata"
    )
    assert not out.exists()


def test_labels_without_metadata_are_none_unless_something_is_asked_of_them(tmp_path):
    assert Labels.of(None) is None
    assert Labels.of(tmp_path / "m.tsv", target="age") == Labels(tmp_path / "m.tsv", "age")
    with pytest.raises(InputError, match=r"^covariate column\(s\) site, host: need --metadata$"):
        Labels.of(None, categorical=["site", "host"])


def test_samples_below_the_rarefaction_depth_leave_the_study_not_a_mismatch(tmp_path, caplog):
    table, metadata = _inputs(tmp_path, AGES, SITES)
    counts = biom.load_table(str(table)).matrix_data.toarray()
    depths = counts.sum(axis=0)
    depth = int(np.sort(depths)[1])  # the shallowest sample falls below
    shallow = f"s{int(np.argmin(depths))}"
    split = _split(tmp_path, ["s0", "s2", "s3", "s5"])
    study = load_study(
        table,
        max_bp=10,
        labels=Labels(metadata, target="age"),
        split_path=split,
        reading=StudyOptions(rarefy_depth=depth),
    )
    kept = [s for s in ["s0", "s2", "s3", "s5"] if s != shallow]
    assert study.samples.sample_ids == kept
    with pytest.raises(InputError, match="--rarefy-depth 1000: no sample has that many reads"):
        load_study(
            table, max_bp=10, labels=Labels(metadata), reading=StudyOptions(rarefy_depth=1000)
        )
