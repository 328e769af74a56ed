"""Errors that say the fix (issue 73): a text target without classifier names the key to set,
a missing metadata column the closest one."""

from __future__ import annotations

from pathlib import Path

import biom
import numpy as np
import pytest
from biom.util import biom_open
from errors import one_line_error

from aam.data.metadata import metadata_column
from aam.training.data.study import Labels, load_study
from aam.workflow.dataset_checks import check_dataset

IDS = [f"s{k:02d}" for k in range(12)]


@pytest.fixture
def data(tmp_path) -> tuple[Path, Path]:
    """A 12-sample table, and metadata whose `diagnosis` is text and `age` numbers."""
    rng = np.random.default_rng(7)
    asvs = ["".join(rng.choice(list("ACGT"), 24)) for _ in range(8)]
    counts = rng.integers(1, 20, size=(8, len(IDS))).astype(float)
    table = tmp_path / "table.biom"
    with biom_open(str(table), "w") as handle:
        biom.Table(counts, asvs, IDS).to_hdf5(handle, "aam tests")
    rows = [f"{sid}\t{'CD' if k % 3 else 'nonIBD'}\t{30 + k}" for k, sid in enumerate(IDS)]
    metadata = tmp_path / "metadata.tsv"
    metadata.write_text("\n".join(["sample_id\tdiagnosis\tage", *rows]) + "\n")
    return table, metadata


def test_a_text_target_without_classifier_names_the_key_to_set(data):
    table, metadata = data
    message = one_line_error(check_dataset, "ibd", table, metadata, "diagnosis")
    assert message == (
        f"datasets.ibd.metadata: {metadata}: column 'diagnosis' holds text, not numbers (12 of "
        "its 12 values, e.g. nonIBD, CD): a category; to predict its classes set "
        "datasets.ibd.classifier: true, or name a numeric target column"
    )
    assert check_dataset("ibd", table, metadata, "diagnosis", classifier=True).with_target == 12


def test_a_text_target_names_the_flag_on_the_command_line(data):
    table, metadata = data
    labels = Labels(metadata, target="diagnosis")
    message = one_line_error(load_study, table, max_bp=24, labels=labels)
    assert "holds text, not numbers" in message and "train a classifier (--classifier)" in message


def test_a_missing_column_gets_the_closest_and_a_short_list(data, tmp_path):
    """A Qiita metadata file has over 100 columns: the line names the closest and ten."""
    table, _ = data
    columns = [f"column_{k}" for k in range(125)] + ["host_age", "diagnosis"]
    rows = ["\t".join([sid, *(["x"] * 126), "CD"]) for sid in IDS]
    metadata = tmp_path / "qiita.tsv"
    metadata.write_text("\n".join(["sample_id\t" + "\t".join(columns), *rows]) + "\n")
    message = one_line_error(check_dataset, "d", table, metadata, "Host_Age", classifier=True)
    assert message == (
        f"datasets.d: {metadata} has no column(s) ['Host_Age'] (did you mean 'host_age'? "
        "columns: column_0, column_1, column_2, column_3, column_4, column_5, column_6, "
        "column_7, column_8, column_9, ... (+117 more)); fix "
        "target/categorical/split_column/group_column/split_group_column"
    )
    message = one_line_error(metadata_column, metadata, "diagnosys", "--group-column")
    assert message.startswith(f"{metadata}: no column 'diagnosys' (--group-column); did you ")
    assert "did you mean 'diagnosis'? columns: column_0," in message
