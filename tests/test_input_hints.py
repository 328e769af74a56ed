"""Errors that say the fix (issue 73): a text target without classifier names the key to set."""

from __future__ import annotations

from pathlib import Path

import biom
import numpy as np
import pytest
from biom.util import biom_open
from errors import one_line_error

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
