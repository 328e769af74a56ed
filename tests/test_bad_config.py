"""A bad config stops at parse time with one line; bad data stops the dataset's check_data job
(the first job, before any training), with one line naming the config field. Both found in
this process (tests/planning.py)."""

from pathlib import Path

import pandas as pd
import pytest
import yaml
from checkout import REPO
from planning import check_data_error, plan_error, planned

from aam.cli import main
from aam.device_names import KERNEL_DEVICE, TORCH_DEVICE
from aam.workflow.plan import PlanError, plan


@pytest.mark.parametrize(
    ("predict_on", "message", "at_parse"),
    [
        ("nope", "runs.r.predict_on: 'nope' is not a dataset other than the run's own (demo)", 1),
        ("bare", "(datasets.bare) has no covariate column(s) ['qiita_study_id']", 0),
    ],
    ids=["unknown-dataset", "missing-covariate-column"],
)
def test_bad_predict_on_stops_before_any_job(tmp_path, demo_dir, predict_on, message, at_parse):
    """A config error stops at parse time; the data's, in the staging check of the dataset."""
    bare = tmp_path / "bare.tsv"  # the demo's metadata without the covariate
    metadata = pd.read_csv(demo_dir / "metadata.tsv", sep="\t", dtype=str)
    metadata.drop(columns="qiita_study_id").to_csv(bare, sep="\t", index=False)
    files = "table: data/demo/table.biom, tree: data/demo/tree.nwk, target: age"
    lines = [f"workdir: {tmp_path / 'work'}", "datasets:"]
    lines += [
        f"  demo: {{{files}, metadata: data/demo/metadata.tsv, categorical: [qiita_study_id]}}"
    ]
    lines += [f"  bare: {{{files}, metadata: {bare}}}"]
    lines += ["runs:", f"  r: {{dataset: demo, predict_on: [{predict_on}]}}"]
    config = tmp_path / "config.yaml"
    config.write_text("\n".join(lines) + "\n")
    if not at_parse:
        line = check_data_error(config, "demo")
        assert (
            line.startswith(f"aam check-data: error: runs.r.predict_on: {bare} ")
            and message in line
        )
        return
    assert message in plan_error(config)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"table": "data/demo/missing.biom"}, "datasets.demo.table: data/demo/missing.biom"),
        ({"target": "height"}, "datasets.demo: data/demo/metadata.tsv has no column(s) ['height']"),
        ({"metadata": "{other}"}, "share no sample IDs"),
        ({"bogus_key": 1}, "bogus_key"),
        ({"split_column": "qiita_study_id"}, "unknown split label(s) ['10052'"),
        ({"split_file": "{split}"}, "no split label for"),
    ],
    ids=[
        "missing-file",
        "absent-target",
        "no-shared-samples",
        "unknown-key",
        "split-column-labels",
        "split-file-missing-samples",
    ],
)
def test_bad_config_stops_before_any_job(tmp_path, change, message):
    """A config error stops at parse time; bad data in the staging check, before training."""
    other = tmp_path / "other.tsv"
    other.write_text("sample_id\tage\tqiita_study_id\nx1\t30\t1\nx2\t40\t1\n")
    split = tmp_path / "split.tsv"  # labels two samples: the others have none
    split.write_text("sample_id\tsplit\n10317.000003995\ttrain\n550.L6S86.s.6.sequence\ttest\n")
    dataset = {
        "table": "data/demo/table.biom",
        "tree": "data/demo/tree.nwk",
        "metadata": "data/demo/metadata.tsv",
        "target": "age",
    }
    paths = {"{other}": str(other), "{split}": str(split)}
    dataset.update({k: paths.get(str(v), str(v)) for k, v in change.items()})
    lines = [f"workdir: {tmp_path / 'work'}", "datasets:", "  demo:"]
    lines += [f"    {key}: {value}" for key, value in dataset.items()]
    lines += ["runs:", "  r:", "    dataset: demo"]
    config = tmp_path / "config.yaml"
    config.write_text("\n".join(lines) + "\n")
    if "table" not in change and "bogus_key" not in change:  # the data's: the staging check's
        assert message in check_data_error(config, "demo")
        return
    assert message in plan_error(config)


@pytest.mark.parametrize(
    ("rarefy", "message"),
    [
        (
            "{depth: 0, seed: 1}",
            "config datasets.demo.rarefy.depth: 0 is less than the minimum of 1",
        ),
        ("{depth: 1000}", "config datasets.demo.rarefy: 'seed' is a required property"),
    ],
)
def test_a_bad_rarefaction_stops_before_any_job(tmp_path, rarefy, message):
    files = "table: data/demo/table.biom, metadata: data/demo/metadata.tsv, target: age"
    config = tmp_path / "config.yaml"
    config.write_text(
        f"workdir: {tmp_path / 'work'}\ndatasets:\n  demo: {{{files}, rarefy: {rarefy}}}\n"
        "runs:\n  r: {dataset: demo}\n"
    )
    assert plan_error(config).startswith(message)


@pytest.mark.parametrize(
    ("section", "value", "accepted"),
    [
        ("device: {}", "gpu", False),
        ("device: {}", "cuda:x", False),
        ("device: {}", "CPU", False),
        ("device: {}", "cuda:1", True),
        ("device: {}", "auto", True),
        ("unifrac: {{device: {}}}", "auto", False),  # the matrix kernels take a device, no auto
        ("unifrac: {{device: {}}}", "cuda:0", True),
    ],
)
def test_a_device_name_is_checked_at_parse_time_by_the_commands_declaration(
    tmp_path, capsys, section, value, accepted
):
    """The workflow refuses before any job the device names its commands would refuse, and
    takes the ones they take (one declaration: aam/device_names.py)."""
    files = "table: data/demo/table.biom, metadata: data/demo/metadata.tsv, target: age"
    config = tmp_path / "config.yaml"
    config.write_text(
        f"workdir: {tmp_path / 'work'}\ndatasets:\n  demo: {{{files}}}\n"
        f"runs:\n  r: {{dataset: demo}}\n{section.format(value)}\n"
    )
    if section.startswith("unifrac"):
        names, commands = (
            KERNEL_DEVICE,
            [["unifrac", "--table", "t", "--tree", "t", "--output", "o"]],
        )
    else:
        names, commands = TORCH_DEVICE, [["validate", "compare", "--golden", "g"], ["pretrain"]]
    if accepted:
        planned(config)
        return
    assert f"'{value}' does not match" in plan_error(config)
    for command in commands:
        with pytest.raises(SystemExit) as exit_info:
            main([*command, "--device", value])
        assert exit_info.value.code == 2
        assert f"--device {value}: must be {names[1]}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "where"),
    [
        ('    target_unit: "</script><script>alert(1)</script>"', "datasets.demo.target_unit"),
        ('    group_column: "study<b>"', "datasets.demo.group_column"),
        ('    categorical: ["a>b"]', "datasets.demo.categorical[0]"),
        ('    target_unit: "years\\tmonths"', "datasets.demo.target_unit"),
        ('    target_unit: "years\\x85"', "datasets.demo.target_unit"),
        ('    target_unit: "years\\u2028"', "datasets.demo.target_unit"),
        ('    group_column: "study\\u202e"', "datasets.demo.group_column"),
        ('    categorical: ["a\\u200bb"]', "datasets.demo.categorical[0]"),
    ],
    ids=[
        "script-unit",
        "markup-group",
        "markup-covariate",
        "tab-unit",
        "c1-control-unit",
        "line-separator-unit",
        "bidi-override-group",
        "zero-width-covariate",
    ],
)
def test_markup_in_a_config_string_stops_at_parse_time(tmp_path, line, where):
    """No config string can carry markup into Snakemake's report (its params are embedded in
    a script element unescaped) nor a tab into a table header."""
    lines = [f"workdir: {tmp_path / 'work'}", "datasets:", "  demo:"]
    lines += ["    table: data/demo/table.biom", "    metadata: data/demo/metadata.tsv"]
    lines += ["    target: age", line, "runs:", "  r: {dataset: demo}"]
    config = tmp_path / "config.yaml"
    config.write_text("\n".join(lines) + "\n")
    message = plan_error(config)
    assert f"config.{where}: " in message and "may not hold '<', '>' or control" in message


def _one_dataset(tmp_path, *lines: str) -> Path:
    """A config of the demo's dataset with ``lines`` of its own (table and metadata given)."""
    text = [f"workdir: {tmp_path / 'work'}", "datasets:", "  demo:", "    target: age"]
    text += [*lines, "runs:", "  r: {dataset: demo}"]
    config = tmp_path / "config.yaml"
    config.write_text("\n".join(text) + "\n")
    return config


@pytest.mark.parametrize(
    ("line", "where", "cap"),
    [
        (
            f"    target_unit: {'y' * 100}",
            "datasets.demo.target_unit",
            "100 characters; at most 32",
        ),
        (
            f"    group_column: {'c' * 300}",
            "datasets.demo.group_column",
            "300 characters; at most 256",
        ),
        (
            f"    categorical: [{'c' * 257}]",
            "datasets.demo.categorical[0]",
            "257 characters; at most 256",
        ),
    ],
    ids=["unit", "column", "covariate"],
)
def test_a_string_over_its_kinds_cap_stops_at_parse_time(tmp_path, line, where, cap):
    """A 100,000-character target_unit trained, then killed predict with a MemoryError: a unit
    holds at most 32 characters, a metadata column 256, in one line that does not quote it."""
    config = _one_dataset(
        tmp_path, "    table: data/demo/table.biom", "    metadata: data/demo/metadata.tsv", line
    )
    message = plan_error(config)
    assert message.startswith(f"config {where}: {cap} here") and len(message) < 400, message


def test_a_config_string_longer_than_a_path_stops_at_parse_time(tmp_path):
    """Any string (a path here) is at most 4,096 characters, in one line that does not quote it."""
    config = _one_dataset(
        tmp_path, f"    table: data/{'t' * 5000}.biom", "    metadata: data/demo/metadata.tsv"
    )
    message = plan_error(config)
    assert "config.datasets.demo.table: a string of 5,010 characters" in message
    assert "config strings hold at most 4,096: shorten it" in message and len(message) < 400


def test_a_config_file_over_a_mebibyte_stops_before_the_plan_walks_it(tmp_path):
    """A 2 MiB config (a data file given as the config) is refused by its size, in one line."""
    config = _one_dataset(
        tmp_path, "    table: data/demo/table.biom", "    metadata: data/demo/metadata.tsv"
    )
    with config.open("a") as handle:
        handle.write("".join(f"# {'x' * 1000}\n" for _ in range(2100)))
    with pytest.raises(PlanError) as stop:
        plan(yaml.safe_load(config.read_text()), REPO, configfiles=[config])
    assert str(stop.value) == (
        f"{config}: 2.0 MiB; a workflow config holds at most 1 MiB (data are files it names by "
        "path, not values in it): check that it is the config"
    )


NFC, NFD = "caf\u00e9", "cafe\u0301"


@pytest.mark.parametrize(
    ("extra", "metadata_ids", "matrix", "message"),
    [
        ({"zero.1": 0}, None, "false", "1 samples have no ASVs (e.g. zero.1)"),
        ({NFC: 1, NFD: 1}, None, "false", "the same name in two Unicode normalizations"),
        ({NFD: 1}, [NFC], "false", "in another Unicode normalization (NFC, NFD)"),
        ({'s"1': 1}, None, "true", "sample ID 's\"1' holds a double quote"),
    ],
    ids=["no-reads", "nfc-nfd-in-table", "nfc-nfd-across-files", "lsmat-id"],
)
def test_check_data_runs_the_later_jobs_checks(
    tmp_path, demo_dir, extra, metadata_ids, matrix, message
):
    """What split, unifrac and pcoa would refuse stops the check_data job, with one line (a
    sample without reads; IDs one name apart only in Unicode normalization; an ID the PCoA's
    lsmat TSV cannot hold, where the matrix is built)."""
    import biom
    import h5py
    import numpy as np

    demo = biom.load_table(str(demo_dir / "table.biom"))
    added = biom.Table(
        np.array([[float(n)] * demo.shape[0] for n in extra.values()]).T,
        demo.ids("observation"),
        list(extra),
    )
    table = tmp_path / "table.biom"
    with h5py.File(table, "w") as handle:
        demo.concat([added]).to_hdf5(handle, "test")
    rows = metadata_ids or list(extra)
    metadata = tmp_path / "metadata.tsv"
    text = (demo_dir / "metadata.tsv").read_text(encoding="utf-8")
    metadata.write_text(text + "".join(f"{sid}\t30\t10317\n" for sid in rows), encoding="utf-8")
    config = tmp_path / "config.yaml"
    lines = [f"workdir: {tmp_path / 'work'}", f"unifrac: {{matrix: {matrix}}}", "datasets:"]
    lines += [f"  demo: {{table: {table}, metadata: {metadata}, target: age}}"]
    lines += ["runs:", "  r: {dataset: demo}"]
    config.write_text("\n".join(lines) + "\n")
    assert message in check_data_error(config, "demo")


def test_a_yaml_alias_bomb_stops_at_parse_time_within_seconds(tmp_path):
    """Nested anchors (a "billion laughs": 10 levels of 10 aliases, 10^10 values walked) in a
    1 KB config: one line, found within the check's own budget, not after minutes."""
    import time

    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 10)}]" for k in range(1, 10)]
    lines += [f"workdir: {tmp_path / 'work'}", "datasets: {}", "runs: {}"]
    config = tmp_path / "config.yaml"
    config.write_text("\n".join(lines) + "\n")
    assert config.stat().st_size < 1024
    start = time.monotonic()
    message = plan_error(config)
    assert "config: more than 100,000 keys and values (YAML aliases counted where used)" in message
    assert time.monotonic() - start < 5
