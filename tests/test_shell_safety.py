"""Nothing from a config or a metadata header executes: every value that reaches a `shell:` is
quoted, names used in paths match a safe pattern, and a bad config stops with one line."""

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from checkout import REPO, dry_run
from hypothesis import given
from hypothesis import strategies as st

from aam.workflow.config import NEGATABLE, cli_flags, config_error_line

# Placeholders a shell: directive may use unquoted: numbers, or flag strings that cli_flags built.
PREQUOTED = {"threads", "params.options", "params.paths", "params.launcher", "params.scratch"}
HOSTILE = ["$(touch {marker})", "`touch {marker}`", "x; touch {marker}", "a'b\"c", "host age"]


def _shell_templates() -> dict[str, str]:
    """rule name -> its shell: template (the concatenated string literals after `shell:`)."""
    templates = {}
    for path in sorted((REPO / "workflow/rules").glob("*.smk")):
        # `use rule BASE as NAME with:` runs BASE's shell: its block has none of its own
        chunks = re.split(
            r"^\s*(?:rule|use rule \w+ as) (\w+)(?: with)?:", path.read_text(), flags=re.M
        )
        for rule, body in zip(chunks[1::2], chunks[2::2], strict=True):
            shell = body.split("shell:", 1)[1] if "shell:" in body else ""
            literals = re.findall(r"^\s+([\"'])(.*)\1\s*$", shell, flags=re.M)
            templates[rule] = "".join(text for _, text in literals)
    return templates


def test_every_shell_placeholder_is_quoted_or_prequoted():
    templates = _shell_templates()
    assert {"pretrain", "finetune", "predict", "unifrac", "split", "stage"} <= set(templates)
    for rule, template in templates.items():
        for name, spec in re.findall(r"(?<!\{)\{([\w.]+)(:q)?\}(?!\})", template):
            assert spec == ":q" or name in PREQUOTED, f"rule {rule}: {{{name}}} is not quoted"


OPTION_VALUES = st.one_of(
    st.text(),
    st.integers(),
    st.floats(allow_nan=False),
    st.lists(st.text(), max_size=3),
    st.booleans(),
    st.none(),
)


@given(st.dictionaries(st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True), OPTION_VALUES))
def test_cli_flags_round_trip_through_the_shell_lexer(options):
    expected = []
    for key, value in sorted(options.items()):
        flag = "--" + key.replace("_", "-")
        if value is True:
            expected.append(flag)
        elif value is False and key in NEGATABLE:
            expected.append("--no-" + flag[2:])
        elif isinstance(value, list):
            expected += [flag, *value]
        elif value is not False and value is not None:
            expected += [flag, str(value)]
    assert shlex.split(cli_flags(options)) == expected


def test_false_is_a_flag_where_unset_is_a_choice_of_its_own():
    """``progress: false`` must reach the command as --no-progress (unset: bars on a terminal);
    ``freeze_base: false`` is the command's default, so no flag; ``compile: off`` is a word."""
    assert NEGATABLE == {"progress"}
    flags = {"compile": "off", "freeze_base": False, "progress": False}
    assert cli_flags(flags) == "--compile off --no-progress"


@pytest.mark.parametrize("template", HOSTILE)
def test_hostile_flag_values_do_not_execute_in_bash(tmp_path, template):
    marker = tmp_path / "executed"
    value = template.format(marker=marker)
    line = "printf '%s\\n' " + cli_flags({"target_column": value, "columns": [value, "b"]})
    run = subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["--columns", value, "b", "--target-column", value]
    assert not marker.exists()


def _config(tmp_path: Path, **changes) -> Path:
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    for dotted, value in changes.items():
        *parents, key = dotted.split(".")
        node = config
        for parent in parents:
            node = node[parent]
        node[key] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _dry_run(cwd: Path, config: Path) -> subprocess.CompletedProcess:
    return dry_run(cwd, config, "--printshellcmds")


@pytest.mark.workflow
@pytest.mark.parametrize("where", ["datasets", "runs"])
def test_unsafe_names_stop_before_any_job_with_one_line(tmp_path, checkout_copy, where):
    marker = tmp_path / "executed"
    bad = f"x$(touch {marker})"
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config[where] = {bad: config[where].popitem()[1]}
    if where == "datasets":
        config["runs"]["tiny"]["dataset"] = bad
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    run = _dry_run(checkout_copy, path)
    assert run.returncode != 0
    lines = [ln for ln in (run.stdout + run.stderr).splitlines() if ln.startswith("config ")]
    assert len(lines) == 1 and lines[0].startswith(f"config {where}: "), run.stdout[-2000:]
    assert "does not match" in lines[0] and "used in file paths" in lines[0]
    assert not marker.exists() and not (tmp_path / "work").exists()


def test_config_error_line_is_one_line_naming_the_key():
    from jsonschema import Draft202012Validator

    schema = {
        "type": "object",
        "properties": {
            "runs": {
                "type": "object",
                "properties": {"r": {"type": "integer", "description": "epochs\nof training"}},
            }
        },
    }
    error = next(Draft202012Validator(schema).iter_errors({"runs": {"r": "x\ny"}}))
    try:
        try:
            raise error
        except type(error):
            raise RuntimeError("Error validating config file.") from None  # as Snakemake does
    except RuntimeError as wrapped:
        line = config_error_line(wrapped)
    assert "\n" not in line
    assert line.startswith("config runs.r: 'x\\ny' is not of type 'integer' (epochs of training)")


@pytest.mark.workflow
def test_hostile_option_values_are_quoted_in_the_planned_commands(tmp_path, checkout_copy):
    marker = tmp_path / "executed"
    value = f"$(touch {marker}); `touch {marker}`"
    config = _config(tmp_path, scratch=value)  # run options are enums/numbers
    run = _dry_run(checkout_copy, config)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"--scratch '{value}'" in run.stdout
    refused = _dry_run(checkout_copy, _config(tmp_path, device=value))  # a device name's pattern
    assert refused.returncode != 0 and "config device: " in refused.stdout + refused.stderr
    assert not marker.exists()
