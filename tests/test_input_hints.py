"""Errors that say the fix (issue 73): a text target without classifier names the key to set,
a missing metadata column the closest one, a run option by another tool's name ours; a path
under `~` is found."""

from __future__ import annotations

import shutil
from pathlib import Path

import biom
import numpy as np
import pytest
import yaml
from biom.util import biom_open
from checkout import REPO
from errors import one_line_error
from planning import plan_error, planned

from aam.data.metadata import metadata_column
from aam.training.inputs.study import Labels, load_study
from aam.workflow.config import run_option_names
from aam.workflow.dataset_checks import check_dataset
from aam.workflow.plan import RUN_OPTIONS_SCHEMA
from aam.workflow.suggest import ALIASES

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


# --- the config: `~` in a path, another tool's name of a run option -----------------------


def _config(tmp_path: Path, edit) -> Path:
    """The test config with ``edit`` applied, written under ``tmp_path``."""
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    edit(config)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_path_under_home_is_expanded(tmp_path, monkeypatch):
    home = tmp_path / "home"
    shutil.copytree(REPO / "data/demo", home / "demo")
    monkeypatch.setenv("HOME", str(home))

    def under_home(config):
        for key in ("table", "tree", "metadata"):
            config["datasets"]["demo"][key] = f"~/demo/{Path(config['datasets']['demo'][key]).name}"
        config["workdir"] = "~/work"

    plan = planned(_config(tmp_path, under_home))
    assert plan.datasets["demo"]["table"] == str(home / "demo/table.biom")
    assert plan.datasets["demo"]["metadata"] == str(home / "demo/metadata.tsv")
    assert plan.work == home / "work"


@pytest.mark.parametrize(
    ("where", "key", "suggested"),
    [
        ("finetune", "learning_rate", "lr"),  # another tool's name: no close match
        ("pretrain", "lrr", "lr"),  # a typo: the closest
        ("model", "num_layers", "layers"),
        ("finetune", "allow_missing_samples", "datasets.<dataset>.drop_samples_without_metadata"),
    ],
)
def test_a_run_option_by_another_name_gets_a_suggestion(tmp_path, where, key, suggested):
    def misnamed(config):
        config["runs"]["tiny"][where][key] = 1

    line = plan_error(_config(tmp_path, misnamed))
    assert line.startswith(
        f"config runs.tiny.{where}.{key}: unknown key (did you mean {suggested}?)"
    )


def test_a_sweep_key_by_another_name_gets_a_suggestion(tmp_path):
    def swept(config):
        config["runs"]["tiny"]["sweep"] = {"finetune.learning_rate": [0.001, 0.01]}

    line = plan_error(_config(tmp_path, swept))
    assert (
        "runs.tiny.sweep.finetune.learning_rate: not a run option (did you mean finetune.lr?)"
        in line
    )


def test_every_alias_names_a_run_option_or_a_config_key():
    options = {
        name for names in run_option_names(REPO / RUN_OPTIONS_SCHEMA).values() for name in names
    }
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    dataset_keys = schema["properties"]["datasets"]["additionalProperties"]["properties"]
    for name, alias in ALIASES.items():
        assert name not in options, name
        section, _, key = alias.rpartition(".")
        assert key in (dataset_keys if section == "datasets.<dataset>" else options), alias
