"""`runs.<run>.model/pretrain/finetune` accept exactly the flags of `aam pretrain` / `aam finetune`:
the schema is generated from the parsers, committed, and checked before any job."""

import argparse
import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from checkout import REPO, dry_run
from jsonschema import Draft202012Validator
from planning import plan_error

from aam.commands import common
from aam.commands import run_options_schema as run_options
from aam.commands.run_options_schema import RULE_FLAGS, SCHEMA_FILE, SECTIONS, command_parser
from aam.models.config import LAYER_STACKS, ModelConfig
from aam.options import (
    OptionError,
    OptionValue,
    field_domain,
    flag,
    is_int_or_word,
    option,
    option_fields,
    value_type,
)
from aam.training.config import (
    FINETUNE,
    REGRESSION_METRICS,
    RuntimeConfig,
    TrainConfig,
    UniFracOptions,
)
from aam.training.inputs.study_options import StudyOptions

SCHEMA = run_options.run_options_schema()
# Rule flags the rules do not pass: the workflow keeps the default checkpoint location, the
# split fractions apply only without --split, training reads the tree (--tree), not a matrix
# (--unifrac), and the inputs of the jobs list the same samples (--allow-missing-samples).
NOT_PASSED = {"checkpoint_dir", "val_fraction", "test_fraction", "unifrac", "allow_missing_samples"}


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


# The option dataclasses of the training commands and the schema section of their fields.
CONFIGS = [
    (ModelConfig, "model"),
    (TrainConfig, None),
    (StudyOptions, None),
    (UniFracOptions, None),
    (RuntimeConfig, None),
]


def _wrong_value(kind: type, choices):
    """A value of the wrong JSON type (or outside the choices)."""
    if choices:
        return "not-a-choice"
    return 3 if kind is str else "three"


def _valid_value(f: dataclasses.Field, kind: type):
    if f.default is not None:
        return f.default
    return {int: 2, float: 0.5, bool: True}.get(kind, "x")


@pytest.mark.parametrize(("section", "command"), sorted(SECTIONS.items()))
def test_every_option_field_is_a_flag_and_a_schema_key(section, command):
    """Walk every option field: the flag exists with its type, default and choices, and the
    run's config section accepts a valid value and rejects a wrong type and an unknown key."""
    flags = _flags(command)
    walked = set()
    for cls, fixed_section in CONFIGS:
        for f in option_fields(cls, command):
            if f.name in RULE_FLAGS:
                continue
            walked.add(f.name)
            kind, optional = value_type(cls, f.name)
            action = flags[f.name]
            negated = ["--no-" + flag(f.name)[2:]] if kind is bool and optional else []
            assert action.option_strings == [flag(f.name), *negated]
            validator = _validator(fixed_section or section)
            if kind is bool:
                assert action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction)
            else:  # the type, bounds and choices of the field (for this command)
                assert isinstance(action.type, OptionValue), f.name
                assert action.type.kind is kind, f.name
                assert action.type.domain == field_domain(f, command), f.name
                assert action.type.int_or_word == is_int_or_word(cls, f.name), f.name
                assert all(validator.is_valid({f.name: w}) for w in action.type.words), f.name
            expected_default = argparse.SUPPRESS if cls is ModelConfig else f.default
            assert action.default == expected_default, f.name
            assert validator.is_valid({f.name: _valid_value(f, kind)}), f.name
            wrong = _wrong_value(kind, f.metadata["choices"])
            assert not validator.is_valid({f.name: wrong}), f.name
    assert set(flags) - walked == {"layers"}  # the one flag that is not a field (all stacks)
    assert not _validator(section).is_valid({"embeding_dim": 64})
    assert not _validator("model").is_valid({"epochs": 3})  # an option of another section


def test_only_finetune_options_are_not_pretrain_flags():
    pretrain, finetune = _flags("pretrain"), _flags("finetune")
    only = {f.name for f in option_fields(TrainConfig) if f.metadata["commands"] == FINETUNE}
    assert only and set(finetune) - set(pretrain) == only
    assert {"loss", "freeze_base"} <= only


def test_adding_a_field_adds_the_flag_and_the_schema_key(monkeypatch):
    """Adding a hyper-parameter is one field declaration (docs/development.md, "Adding an
    option")."""

    @dataclasses.dataclass
    class Extended(TrainConfig):
        ema_decay: float = option(0.0, "exponential moving average of the weights (0: off)")

    monkeypatch.setattr(common, "TrainConfig", Extended)
    parser = run_options.GroupRecorder()
    common.add_common_arguments(parser, "pretrain")
    args = parser.parse_args(["--table", "t", "--output-dir", "o", "--ema-decay", "0.9"])
    assert common.training_options(args, "finetune").train == Extended(ema_decay=0.9)
    monkeypatch.setattr(run_options, "command_parser", lambda c: parser)
    schema = run_options.run_options_schema()["$defs"]["pretrain"]
    assert schema["properties"]["ema_decay"]["type"] == "number"
    assert not Draft202012Validator(schema).is_valid({"ema_decay": "high"})
    assert not Draft202012Validator(schema).is_valid({"ema_decay": float("nan")})


def test_layers_sets_every_stack_and_a_stack_option_wins():
    config = ModelConfig.from_options({"layers": 3, "asv_layers": 1})
    assert [getattr(config, name) for name in LAYER_STACKS] == [1, 3, 3, 3, 3]


def test_a_pretrained_base_keeps_its_stacks_and_rejects_a_contradiction():
    base = ModelConfig(asv_layers=1, sample_layers=1, encoder_layers=1).to_dict()
    config = ModelConfig.from_options({"layers": 4}, base)
    assert (config.asv_layers, config.target_layers) == (1, 4)
    with pytest.raises(OptionError) as err:
        ModelConfig.from_options({"embedding_dim": 64}, base)
    assert err.value.as_flag().startswith("--embedding-dim 64: the pretrained encoder has")


def test_rule_flags_are_passed_by_the_rules():
    rules = (REPO / "workflow/rules/train.smk").read_text()
    rules += (REPO / "aam/workflow/flags.py").read_text()  # FLAGS.pretrain, FLAGS.finetune
    for name in RULE_FLAGS - NOT_PASSED:
        flag = "--no-progress" if name == "progress" else "--" + name.replace("_", "-")
        given = flag in rules or f'"{name}"' in rules or f"{name}=" in rules  # input_flags
        assert given, f"{name} is not set by train.smk nor by Flags"


def _config(tmp_path, section: str, key: str, value) -> Path:
    """The test config with ``runs.tiny.<section>.<key>: value``, writing under tmp_path/work."""
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config["runs"]["tiny"][section][key] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.workflow
def test_a_typo_stops_the_dry_run_with_one_line_naming_the_key(tmp_path, checkout_copy):
    """The one end-to-end case: Snakemake prints plan()'s line once and starts nothing (the
    other config errors are found in process, tests/planning.py)."""
    run = dry_run(checkout_copy, _config(tmp_path, "model", "embeding_dim", 64))
    assert run.returncode != 0
    assert not (tmp_path / "work").exists()
    lines = [ln for ln in (run.stdout + run.stderr).splitlines() if re.match(r"config \S", ln)]
    assert len(lines) == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert lines[0].startswith("config runs.tiny.model.embeding_dim: unknown key"), lines[0]
    assert "did you mean embedding_dim?" in lines[0]


def test_a_wrong_type_stops_before_any_job_naming_the_key(tmp_path):
    line = plan_error(_config(tmp_path, "pretrain", "epochs", "three"))
    assert line.startswith("config runs.tiny.pretrain.epochs: 'three' is not of type 'integer'")
    assert "--epochs" in line


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("lr", -1, "-1 is less than or equal to the minimum of 0 (--lr"),
        ("mask_rate", float("nan"), "nan is not a finite number (--mask-rate"),
    ],
)
def test_a_value_out_of_range_stops_before_any_job(tmp_path, key, value, expected):
    line = plan_error(_config(tmp_path, "pretrain", key, value))
    assert line.startswith(f"config runs.tiny.pretrain.{key}: {expected}"), line


def test_a_best_metric_of_the_other_target_kind_stops_before_any_job(tmp_path):
    line = plan_error(_config(tmp_path, "finetune", "best_metric", "accuracy"))
    assert line == (
        "config runs.tiny.finetune.best_metric: 'accuracy' not measured for a regression target "
        "(datasets.demo); choose from " + ", ".join(REGRESSION_METRICS)
    ), line
