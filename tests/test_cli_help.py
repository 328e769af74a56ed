"""`aam --help` (commands grouped, one line each), `aam --version`, and every option of every
command shown with its help and default."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
from importlib import metadata

import pytest
from errors import failure_lines

import aam
from aam.cli import COMMANDS, GROUPS, DefaultsFormatter, command_parser, main


def test_help_lists_every_command_once_in_its_group_analysis_first(capsys):
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    headers = [line for line in text.splitlines() if line.rstrip(":") in GROUPS]
    assert headers == [f"{group}:" for group in GROUPS] and headers[0] == "analysis:"
    listed = re.findall(r"^  ([a-z][a-z-]+)  +(\S.*)$", text, flags=re.M)
    assert [name for name, _ in listed] == list(COMMANDS)  # each once, in the groups' order
    assert all(line == COMMANDS[name][1] for name, line in listed)  # its one line
    analysis = set(GROUPS["analysis"])
    assert {"pretrain", "finetune", "predict", "unifrac"} <= analysis
    assert not {"lint-def", "run-options-schema"} & analysis


def test_no_command_is_the_help_and_exit_status_2(capsys):
    assert main([]) == 2
    assert "analysis:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("typed", "hint"),
    [
        ("finetnue", "; did you mean 'finetune'?"),
        ("unifac", "; did you mean 'unifrac'?"),
        ("xyz", ""),
    ],
)
def test_an_unknown_command_is_one_line_with_the_closest_one(capsys, typed, hint):
    with pytest.raises(SystemExit) as stop:
        main([typed, "--help"])
    assert stop.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == f"aam: error: unknown command {typed!r}{hint}; see aam --help", line


def test_version_names_aam_torch_and_python():
    run = subprocess.run(
        [sys.executable, "-m", "aam", "--version"], capture_output=True, text=True, check=True
    )
    line = run.stdout.strip()
    assert line.startswith(f"aam {aam.__version__} (torch {metadata.version('torch')}, python 3.")
    assert metadata.version("aam") == aam.__version__  # pyproject's version is aam.__version__
    assert "\n" not in line and run.stderr == ""


def _options(name: str) -> list[argparse.Action]:
    parser = command_parser(name, importlib.import_module(COMMANDS[name][0]))
    return [
        a
        for a in parser._actions
        if a.option_strings
        and a.help != argparse.SUPPRESS
        and not isinstance(a, argparse._HelpAction)
    ]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_option_has_help_and_shows_its_default(name):
    formatter = DefaultsFormatter(f"aam {name}")
    for action in _options(name):
        flag = action.option_strings[-1]
        assert action.help, f"aam {name} {flag}: no help"
        shown = formatter._get_help_string(action)
        if action.default not in (None, False, argparse.SUPPRESS) and action.default != []:
            assert "default" in shown, f"aam {name} {flag}: default {action.default!r} not shown"


def test_defaults_appear_in_the_help(capsys):
    for name, flag, default in [
        ("unifrac", "--engine", "builtin"),
        ("unifrac", "--dtype", "float64"),
        ("unifrac", "--alpha", "0.5"),
        ("split", "--val-fraction", "0.1"),
        ("split", "--seed", "42"),
        ("predict", "--subset", "test"),
        ("baselines", "--trees", "500"),
    ]:
        with pytest.raises(SystemExit):
            main([name, "--help"])
        text = capsys.readouterr().out
        entry = re.search(rf"^  {flag}\b.*?(?=^  -|\Z)", text, flags=re.M | re.S)[0]
        shown = " ".join(entry.split())  # "(default: X)", or an option's "(default X; bounds)"
        assert re.search(rf"\(default:? {re.escape(default)}[;)]", shown), entry


# Stages that read tables, metadata or metrics but no model: `import torch` is ~3 s of CPU per
# process, paid by every such job of a workflow (and, on a cluster, by every SLURM job).
NO_MODEL = (
    *("split", "rarefy", "match-samples", "baselines", "check-data", "stage"),
    *("cross-validation", "learning-curve", "overview", "pcoa"),
)
# One interpreter imports them in turn (argv: the modules) and names the first whose import
# brought torch or numba (~1 s, only where a UniFrac kernel runs) in.
FIRST_TORCH = """
import importlib, sys
for module in sys.argv[1:]:
    importlib.import_module(module)
    heavy = [name for name in ("torch", "numba") if name in sys.modules]
    if heavy:
        print(module, *heavy)
        break
"""


def test_no_command_that_reads_no_model_imports_torch_or_numba():
    modules = [COMMANDS[name][0] for name in NO_MODEL]
    run = subprocess.run(
        [sys.executable, "-c", FIRST_TORCH, *modules], capture_output=True, text=True, check=True
    )
    assert run.stdout == "", f"{run.stdout.strip()}: imported"


CRASH = """
import ctypes, sys, types
from aam import cli
crash = types.ModuleType("crash")
crash.add_arguments = lambda parser: None
def run(args):
    ctypes.string_at(0)  # a native crash, as a bad kernel or collective would be
crash.run = run
sys.modules["crash"] = crash
cli.COMMANDS["crash"] = ("crash", "reads address 0")
sys.exit(cli.main(["crash"]))
"""


def test_a_native_crash_leaves_the_python_stack_in_the_log():
    """A SIGSEGV in a command (a ROCm kernel, a gloo collective) names where Python was."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    done = subprocess.run([sys.executable, "-c", CRASH], capture_output=True, text=True, env=env)
    assert done.returncode == -11, done.stderr
    assert "Fatal Python error: Segmentation fault" in done.stderr
    assert '"<string>", line 7 in run' in done.stderr, done.stderr
    frames = failure_lines(done.stderr, tail=0)
    assert '"<string>", line 7 in run' in frames and "Segmentation fault" in frames
