"""`runs.<run>.model/pretrain/finetune` accept exactly the flags of `aam pretrain` / `aam finetune`:
the schema is generated from the parsers, committed, and checked before any job."""

import argparse
import re
import subprocess
import sys

import pytest
import yaml
from checkout import REPO
from jsonschema import Draft202012Validator

from aam import run_options
from aam.run_options import RULE_FLAGS, SCHEMA_FILE, SECTIONS, command_parser

SCHEMA = run_options.run_options_schema()
# Rule flags the rules do not pass: the workflow keeps the default checkpoint location, and the
# split fractions apply only without --split.
NOT_PASSED = {"checkpoint_dir", "val_fraction", "test_fraction"}


def test_committed_schema_is_what_the_flags_generate():
    assert SCHEMA_FILE.read_text() == run_options.render(), (
        "workflow/schemas/run_options.schema.json is stale: run `make schema`"
    )


def _validator(section: str) -> Draft202012Validator:
    return Draft202012Validator(SCHEMA["$defs"][section])


def _flags(command: str) -> dict[str, argparse.Action]:
    parser = command_parser(command)
    return {
        a.dest: a
        for a in parser._actions
        if a.option_strings and a.dest not in RULE_FLAGS and a.dest != "help"
    }


def _wrong_value(action: argparse.Action):
    """A value of the wrong JSON type (or outside the choices) for ``action``."""
    if action.choices is not None:
        return "not-a-choice"
    if action.type in (int, float) or action.nargs == 0:
        return "three"
    return 3


def _valid_value(action: argparse.Action):
    if action.default is not None:
        return action.default
    if action.choices is not None:
        return list(action.choices)[0]
    return {int: 2, float: 0.5}.get(action.type, "x")


@pytest.mark.parametrize(("section", "command"), sorted(SECTIONS.items()))
def test_every_flag_is_an_option_with_its_type(section, command):
    model = SCHEMA["$defs"]["model"]["properties"]
    own = SCHEMA["$defs"][section]["properties"]
    flags = _flags(command)
    assert set(flags) == set(model) | set(own) and not set(model) & set(own)
    for name, action in flags.items():
        validator = _validator("model" if name in model else section)
        assert validator.is_valid({name: _valid_value(action)}), name
        assert not validator.is_valid({name: _wrong_value(action)}), name
    assert not _validator(section).is_valid({"embeding_dim": 64})
    assert not _validator("model").is_valid({"epochs": 3})  # an option of another section


def test_model_flags_are_the_same_for_both_commands():
    pretrain, train = _flags("pretrain"), _flags("train")
    for name in SCHEMA["$defs"]["model"]["properties"]:
        assert (pretrain[name].type, pretrain[name].choices) == (
            train[name].type,
            train[name].choices,
        )


def test_rule_flags_are_passed_by_the_rules():
    rules = (REPO / "workflow/rules/train.smk").read_text()
    for name in RULE_FLAGS - NOT_PASSED:
        flag = "--no-progress" if name == "progress" else "--" + name.replace("_", "-")
        assert flag in rules or f'"{name}"' in rules, f"{name} is not set by train.smk"


def _dry_run(tmp_path, checkout_copy, section: str, key: str, value):
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config["runs"]["tiny"][section][key] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "snakemake", "all", "--profile", "profiles/local",
           "--configfile", str(path), "--dry-run"]  # fmt: skip
    run = subprocess.run(cmd, cwd=checkout_copy, capture_output=True, text=True)
    assert run.returncode != 0
    assert not (tmp_path / "work").exists()
    lines = [ln for ln in (run.stdout + run.stderr).splitlines() if re.match(r"config \S", ln)]
    assert len(lines) == 1, run.stdout[-2000:] + run.stderr[-2000:]
    return lines[0]


def test_a_typo_stops_before_any_job_naming_the_key(tmp_path, checkout_copy):
    line = _dry_run(tmp_path, checkout_copy, "model", "embeding_dim", 64)
    assert line.startswith("config runs.tiny.model.embeding_dim: unknown key"), line
    assert "did you mean embedding_dim?" in line


def test_a_wrong_type_stops_before_any_job_naming_the_key(tmp_path, checkout_copy):
    line = _dry_run(tmp_path, checkout_copy, "pretrain", "epochs", "three")
    assert line.startswith("config runs.tiny.pretrain.epochs: 'three' is not of type 'integer'")
    assert "--epochs" in line
