"""Every option value is checked where it is declared: ``option(...)``'s bounds and choices
refuse a bad value as the flag is read (one line, exit 2, nothing created), in the option
dataclass itself, and in the workflow's config schema; every `aam` argument error is one line."""

from __future__ import annotations

import math
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from aam.cli import COMMANDS, main
from aam.commands import finetune as finetune_command
from aam.commands.run_options_schema import RULE_FLAGS, run_options_schema
from aam.models import ModelConfig, SequenceEncoder, SequencePredictor
from aam.models.files import KINDS
from aam.options import (
    Domain,
    OptionError,
    field_domain,
    flag,
    is_int_or_word,
    option_fields,
    value_type,
)
from aam.training.config import BEST_METRICS, RuntimeConfig, TrainConfig, UniFracOptions
from aam.training.evaluation import evaluate
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import Labels, UniFracSource, load_study
from aam.training.inputs.study_options import StudyOptions
from aam.training.objective import Objective
from aam.training.trainer import Trainer, validation_metrics

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"
OPTION_CLASSES = (ModelConfig, TrainConfig, StudyOptions, UniFracOptions, RuntimeConfig)
FIELDS = [(cls, f) for cls in OPTION_CLASSES for f in option_fields(cls)]
SCHEMA = run_options_schema()["$defs"]
TINY = (
    "--embedding-dim 16 --attention-heads 2 --layers 1 --max-bp 100 --token-limit 64 "
    "--epochs 1 --batch-size 8 --threads 2 --no-progress"
).split()


def aam(*args: str | Path) -> int:
    """Exit status of `aam ARGS` run in-process (argparse errors raise SystemExit)."""
    try:
        return main([str(a) for a in args])
    except SystemExit as stop:
        return int(stop.code or 0)


def one_error_line(capsys, command: str, logs: bool = False) -> str:
    """Stderr, which must be one `aam <command>: error:` line (after log lines if ``logs``)."""
    err = capsys.readouterr().err
    lines = err.splitlines()
    if logs:
        lines = [line for line in lines if f"aam {command}: error: " in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"aam {command}: error: "), err
    return lines[0]


def command_of(f) -> str:
    """A training command that has option field ``f``."""
    commands = f.metadata["commands"]
    return "pretrain" if commands is None or "pretrain" in commands else "finetune"


def required_args(command: str, out: Path) -> list[str]:
    args = ["--table", DEMO / "table.biom", "--tree", DEMO / "tree.nwk", "--output-dir", out]
    if command == "finetune":
        args += ["--metadata", DEMO / "metadata.tsv", "--target-column", "age"]
    return [str(a) for a in args]


# --------------------------------------------------------------- values outside the domain


def _below(kind: type, bound: float, inclusive: bool) -> st.SearchStrategy:
    """Numbers below ``bound`` (``inclusive``: the bound itself is allowed, so not drawn)."""
    if kind is int:
        return st.integers(max_value=int(bound) - (1 if inclusive else 0))
    numbers = st.floats(max_value=bound, allow_nan=False, allow_infinity=False)
    return numbers.filter(lambda x: x < bound if inclusive else x <= bound)


def _above(kind: type, bound: float, inclusive: bool) -> st.SearchStrategy:
    if kind is int:
        return st.integers(min_value=int(bound) + (1 if inclusive else 0))
    numbers = st.floats(min_value=bound, allow_nan=False, allow_infinity=False)
    return numbers.filter(lambda x: x > bound if inclusive else x >= bound)


def out_of_range(kind: type, domain: Domain) -> st.SearchStrategy:
    """Numbers outside ``domain``'s bounds, non-finite floats, and text that is no number."""
    parts = [st.sampled_from(["x", "1,5"] + (["1.5"] if kind is int else []))]
    if kind is float and domain.finite:
        parts.append(st.sampled_from([math.nan, math.inf, -math.inf]))
    for bound, inclusive, side in (
        (domain.minimum, True, _below),
        (domain.exclusive_minimum, False, _below),
        (domain.maximum, True, _above),
        (domain.exclusive_maximum, False, _above),
    ):
        if bound is not None:
            parts.append(side(kind, bound, inclusive))
    return st.one_of(parts)


def not_a_choice(domain: Domain, others: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Words outside ``domain``'s choices, among them choices of another command (``others``)."""
    words = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True)
    outside = [w for w in others if w not in domain.words()]
    return st.one_of(
        words.filter(lambda w: w not in domain.words()),
        *([st.sampled_from(outside)] if outside else []),
    )


def invalid_values(cls: type, f, command: str) -> st.SearchStrategy:
    """Values field ``f`` of ``cls`` cannot take on ``command``'s command line."""
    kind, _ = value_type(cls, f.name)
    domain = field_domain(f, command)
    if kind is bool:  # a switch takes no value
        return st.sampled_from(["yes", "1", "x"])
    if kind is str and not domain.choices:  # --device: checked as the run starts
        return st.sampled_from(["gpu", "tpu", "npu"])
    words = not_a_choice(domain, f.metadata["choices"] or ())
    if kind is str:
        return words
    numbers = out_of_range(kind, domain)
    return st.one_of(numbers, words) if is_int_or_word(cls, f.name) else numbers


def as_text(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


EVERY_FIELD = pytest.mark.parametrize(("cls", "f"), FIELDS, ids=[f.name for _, f in FIELDS])


def test_every_option_field_is_walked():
    assert len(FIELDS) == len({f.name for _, f in FIELDS}) > 40


@pytest.mark.slow
@EVERY_FIELD
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_value_outside_an_option_is_one_line_naming_the_flag(cls, f, data, capsys):
    """`aam <command> --flag=VALUE` for VALUE outside the field's bounds or choices (NaN and
    infinities too): exit 2, one stderr line naming the flag, and no output directory; the
    dataclass refuses the value too."""
    command = command_of(f)
    value = data.draw(invalid_values(cls, f, command), label="value")
    out = Path(tempfile.mkdtemp(prefix="aam-bounds-")) / "out"
    try:
        rc = aam(command, *required_args(command, out), f"{flag(f.name)}={as_text(value)}")
        line = one_error_line(capsys, command)
        assert rc == 2, line
        assert line.startswith(f"aam {command}: error: {flag(f.name)} "), line
        assert not out.exists()
    finally:
        shutil.rmtree(out.parent)
    kind, _ = value_type(cls, f.name)
    if f.metadata["domain"].problem(kind, value, is_int_or_word(cls, f.name)):
        with pytest.raises(OptionError) as err:  # the dataclass refuses it too
            cls(**{f.name: value})
        assert err.value.name == f.name


RUN_OPTIONS = [(cls, f) for cls, f in FIELDS if f.name not in RULE_FLAGS]  # set by the rules


@pytest.mark.parametrize(("cls", "f"), RUN_OPTIONS, ids=[f.name for _, f in RUN_OPTIONS])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_the_run_options_schema_refuses_what_the_flag_refuses(cls, f, data):
    """A workflow config value outside an option's domain fails the config's validation."""
    command = command_of(f)
    value = data.draw(invalid_values(cls, f, command), label="value")
    section = "model" if cls is ModelConfig else command
    validator = Draft202012Validator(SCHEMA[section])
    unset_valid = True if value_type(cls, f.name)[0] is bool else 1
    assert validator.is_valid({f.name: f.default if f.default is not None else unset_valid})
    assert not validator.is_valid({f.name: value}), (f.name, value)


def test_the_schema_carries_the_bounds():
    pretrain = SCHEMA["pretrain"]["properties"]
    assert pretrain["lr"]["exclusiveMinimum"] == 0
    assert pretrain["mask_rate"]["minimum"] == 0 and pretrain["mask_rate"]["exclusiveMaximum"] == 1
    assert SCHEMA["model"]["properties"]["layers"]["minimum"] == 0
    validator = Draft202012Validator(SCHEMA["pretrain"])
    for bad in ({"lr": -1}, {"lr": math.nan}, {"lr": math.inf}, {"patience": -1}):
        assert not validator.is_valid(bad), bad
    assert validator.is_valid({"lr": 1e-3, "patience": 0, "best_metric": "loss"})
    assert not validator.is_valid({"best_metric": "mae"})  # fine-tuning's, not pretraining's
    assert Draft202012Validator(SCHEMA["finetune"]).is_valid({"best_metric": "val_mae"})


# --------------------------------------------------------------- one-line argument errors


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--batch-size", "big"], "--batch-size big: must be a whole number or auto"),
        (["--precision", "fp16"], "--precision fp16: must be one of auto, fp32, bf16"),
        (["--lr", "-1"], "--lr -1: must be greater than 0"),
        (["--mask-rate", "1.5"], "--mask-rate 1.5: must be in [0, 1)"),
        (["--warmup-fraction=-0.1"], "--warmup-fraction -0.1: must be in [0, 1)"),
        (["--lr=nan"], "--lr nan: must be a finite number, greater than 0"),
        (["--layers=-1"], "--layers -1: must be at least 0"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["--tree", "t.nwk", "--unifrac", "u.h5"], "--unifrac not allowed with argument --tree"),
    ],
)
def test_argument_errors_are_one_line(args, expected, tmp_path, capsys):
    out = tmp_path / "out"
    rc = aam("pretrain", "--table", DEMO / "table.biom", "--output-dir", out, *args)
    line = one_error_line(capsys, "pretrain")
    assert rc == 2 and expected in line and line.endswith("; see aam pretrain --help"), line
    assert not out.exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_one_line_argument_errors(command, capsys):
    assert aam(command, "--no-such-flag") == 2
    line = one_error_line(capsys, command)
    assert "--no-such-flag" in line or "required" in line, line


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        ("split", ["--seed", "-1"], "--seed -1: must be in [0, 4294967295]"),
        ("baselines", ["--seed", "4294967296"], "--seed 4294967296: must be in [0, 4294967295]"),
        ("unifrac-shard", ["--alpha", "2"], "--alpha 2: must be in [0, 1]"),
        ("unifrac-gather", ["--dtype", "float16"], "--dtype float16: must be one of float32, "),
    ],
)
def test_bounded_flags_that_are_no_field(command, args, expected, capsys):
    assert aam(command, *args) == 2
    assert expected in one_error_line(capsys, command)


def test_a_missing_argument_and_an_unknown_command_are_one_line(capsys):
    assert aam("pretrain", "--tree", DEMO / "tree.nwk") == 2
    line = one_error_line(capsys, "pretrain")
    assert "the following arguments are required: --table, --output-dir" in line
    assert aam("trian") == 2
    err = capsys.readouterr().err
    assert err == "aam: error: unknown command 'trian'; did you mean 'pretrain'?; see aam --help\n"


def test_unifrac_shard_takes_one_metric(tmp_path, capsys):
    out = tmp_path / "s.h5"
    common = ["--table", DEMO / "table.biom", "--tree", DEMO / "tree.nwk", "--shards", "2"]
    rc = aam(
        "unifrac-shard", *common, "--shard", "1", "--output", out,
        "--metric", "unweighted", "--metric", "weighted_normalized",
    )  # fmt: skip
    line = one_error_line(capsys, "unifrac-shard")
    assert (
        rc == 2 and "--metric weighted_normalized: given again (first unweighted); a shard" in line
    )
    assert not out.exists()
    assert aam("unifrac-shard", *common, "--shard", "1", "--output", out, "--metric", "x") == 2
    assert "--metric x: must be one of unweighted, " in one_error_line(capsys, "unifrac-shard")
    assert aam("unifrac", *common[:4], "--output", out, "--metric", "x", "--metric", "y") == 2
    assert "--metric x: must be one of unweighted, " in one_error_line(capsys, "unifrac")  # several


# --------------------------------------------------------------- --best-metric


def test_best_metric_keeps_the_optional_prefix():
    assert TrainConfig(best_metric="loss").best_metric == "loss"
    assert set(BEST_METRICS["pretrain"]) < set(BEST_METRICS["finetune"])
    with pytest.raises(OptionError, match="must be one of auto, val_loss"):
        TrainConfig(best_metric="val_los")


@pytest.mark.parametrize(
    ("target", "metric", "expected"),
    [
        (["--target-column", "age"], "auc", "not measured for a regression target"),
        (
            ["--target-column", "qiita_study_id", "--classifier"],
            "mae",
            "not measured for a classifier",
        ),
    ],
)
def test_finetune_refuses_a_metric_of_the_other_target_kind_first(
    target, metric, expected, tmp_path, capsys, monkeypatch
):
    def never(*args):
        raise AssertionError("fine-tuning started")

    monkeypatch.setattr(finetune_command, "finetune", never)
    out = tmp_path / "out"
    table = ["--table", DEMO / "table.biom", "--tree", DEMO / "tree.nwk", "--output-dir", out]
    rc = aam("finetune", *table, "--metadata", DEMO / "metadata.tsv", *target,
             "--best-metric", metric)  # fmt: skip
    line = one_error_line(capsys, "finetune")
    assert rc == 2 and f"--best-metric {metric}: {expected}; choose from val_loss" in line, line
    assert not out.exists()


def test_a_metric_the_run_does_not_measure_is_refused_before_training(
    tmp_path, capsys, monkeypatch
):
    def never(self):
        raise AssertionError("training started")

    monkeypatch.setattr(Trainer, "fit", never)
    out = tmp_path / "out"
    args = required_args("pretrain", out)
    rc = aam("pretrain", *args, *TINY, "--mask-rate", "0", "--best-metric", "nuc_loss")
    line = one_error_line(capsys, "pretrain", logs=True)
    assert rc == 2 and "--best-metric nuc_loss: not measured in this run" in line, line
    assert "val_unifrac_r" in line and "val_nuc" not in line
    assert not out.exists() or not list(out.iterdir())


@pytest.fixture(scope="module")
def studies(small_study) -> dict:
    """The 48-sample study without a target, with age (regression) and with a class target."""
    table, metadata = small_study / "table.biom", DEMO / "metadata.tsv"
    common = dict(max_bp=100, unifrac=UniFracSource(matrix=small_study / "unifrac.h5"))
    missing = StudyOptions(val_fraction=0.25, allow_missing_samples=True)
    return {
        "pretrain": load_study(table, reading=StudyOptions(val_fraction=0.25), **common),
        "regression": load_study(
            table, labels=Labels(metadata, target="age"), reading=missing, **common
        ),
        "classifier": load_study(
            table,
            labels=Labels(metadata, target="qiita_study_id", classifier=True),
            reading=missing,
            **common,
        ),
    }


@pytest.mark.parametrize(
    ("kind", "train"),
    [
        ("pretrain", {}),
        ("pretrain", {"mask_rate": 0.0}),
        ("regression", {}),
        ("regression", {"freeze_base": True}),
        ("classifier", {"unifrac_weight": 0.0}),
    ],
)
def test_the_declared_metric_names_are_what_validation_reports(studies, kind, train):
    study = studies[kind]
    config = dict(embedding_dim=16, attention_heads=2, asv_layers=1, sample_layers=1, max_bp=100)
    torch.manual_seed(0)
    if kind == "pretrain":
        model = SequenceEncoder(ModelConfig(**config))
    else:
        classes = len(study.classes)
        model = SequencePredictor(
            ModelConfig(**config, out_dim=max(classes, 1), classifier=bool(classes))
        )
    cfg = TrainConfig(batch_size=8, **train)
    objective = Objective.of(cfg, predictor=kind != "pretrain", study=study)
    batches = TrainBatches(study, 64, distances=objective.use_unifrac)
    cpu = torch.device("cpu")
    reported = evaluate(
        objective, model, batches, np.arange(8), cpu, batch_size=cfg.batch_size, seed=cfg.seed
    )
    assert {f"val_{k}" for k in reported} == set(validation_metrics(objective))
    allowed = BEST_METRICS["pretrain" if kind == "pretrain" else "finetune"]
    assert set(validation_metrics(objective)) <= set(allowed)


# --------------------------------------------------------------- messages name real commands


def test_messages_name_only_commands_that_exist():
    named = set()
    for path in [*(REPO / "aam").rglob("*.py"), *(REPO / "workflow").rglob("*.smk")]:
        named |= set(re.findall(r"`aam ([a-z][a-z-]*)", path.read_text()))
    named |= {command.removeprefix("aam ") for _, _, command in KINDS.values()}
    named -= {"foo-bar"}  # aam/cli.py's example of a command's module name
    assert named and named <= set(COMMANDS), sorted(named - set(COMMANDS))
