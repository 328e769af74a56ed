"""`aam <command>` entry point: dispatches to one command module, imported lazily.

Each command is a module of ``aam.commands`` named after it, exposing ``add_arguments(parser)``
and ``run(args) -> None``; it turns the arguments into typed values for the library below it.
Only the chosen command's module is imported, so `aam unifrac` does not pay for torch model
code and the workflow can fingerprint exactly the code a command uses.
"""

from __future__ import annotations

import argparse
import difflib
import faulthandler
import importlib
import logging
import os
import platform
import re
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from aam import __version__
from aam.errors import EXIT_INPUT, EXIT_NON_FINITE, InputError, NonFiniteError
from aam.options import OptionError
from aam.runtime.atomic import output_set
from aam.workflow.provenance import provenance_record, write_provenance

# The commands, in the groups and order of `aam --help`: a researcher's first, then what the
# workflow and the clusters run, then the developers' tools. command -> one line.
GROUPS: dict[str, dict[str, str]] = {
    "analysis": {
        "unifrac": "UniFrac distance matrix from a BIOM table and a newick tree",
        "tree": "Phylogeny of the ASV sequences (MAFFT, FastTree, midpoint root)",
        "taxonomy": "Each ASV's lineage by the RDP classifier, as QIIME 2's taxonomy.tsv",
        "rarefy": "Subsample every sample of a BIOM table to a depth, once, seeded",
        "match-samples": "Keep the samples of a BIOM table that have a metadata row",
        "split": "Seeded train/validation/test split, or fold k of a K-fold partition",
        "pretrain": "Pretrain the base on UniFrac + masked nucleotides",
        "finetune": "Fine-tune on a metadata target (regression or classes)",
        "predict": "Predict with a fine-tuned model; metrics if truth known",
        "baselines": "Mean, group-mean and random-forest baselines fitted on the train split",
        "embedding-forest": "Random forests on AAM's pretrained sample embeddings (+ abundances)",
        "cross-validation": "Per-fold and mean +- sd test metrics of a cross-validated run",
        "learning-curve": "Test metrics against training-set size: a table and a plot",
        "new-study": "Test MAE of a new study against its labelled samples: a table and a plot",
        "plot-history": "Training curves (PNG) from a history.tsv",
        "overview": "The report's front page: every run's metrics beside the baselines'",
        "pcoa": "PCoA of a UniFrac matrix, and its ordination and lsmat for QIIME 2",
        "importance": "Which ASVs carry the signal: AAM's and the forest's importance",
    },
    "workflow and cluster": {
        "stage": "Copy inputs into the work area, verified, with a sha256 manifest",
        "check-data": "The workflow's checks of a dataset's table and metadata against its config",
        "unifrac-shard": "Shard i of K of a UniFrac matrix (a row block; for large tables)",
        "unifrac-gather": "Merge the K shards of `aam unifrac-shard` into the matrix file",
        "search-worker": "One worker of a hyperparameter search: trials until the budget is used",
        "search-best": "A search's best values (best.yaml), every trial (trials.tsv), figures",
        "search-forest": "The random forest's search on the same folds, and its best fitted",
        "doctor": "Attention backends and torch stack check, with a recommendation",
        "profile": "Kernel table, peak memory and samples/s of a few steps",
        "profiling-report": "HTML profiling report (kernels, memory, rules)",
        "validate": "Golden numeric check: generate, or compare on any device",
        "gpu-check": "What aam does on this machine's GPU (CUDA or ROCm), as one report",
    },
    "developer tools": {
        "lint-def": "Check Singularity .def files (header, sections, no aam)",
        "run-options-schema": "Schema of the workflow's runs.* options, from the flags",
    },
}
# command -> (module, help); `aam foo-bar` is the module aam.commands.foo_bar.
COMMANDS: dict[str, tuple[str, str]] = {
    name: (f"aam.commands.{name.replace('-', '_')}", text)
    for commands in GROUPS.values()
    for name, text in commands.items()
}


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that states every option's default, unless its text already does (the training
    flags say it with their bounds) or there is none (no value, a switch that is off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        unset = action.default in (None, False, argparse.SUPPRESS) or action.default == []
        if not action.option_strings or unset or "default" in text:
            return text
        shown = " ".join(map(str, action.default)) if isinstance(action.default, list) else None
        return f"{text} (default: {action.default if shown is None else shown})"


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, exit status 2:
    ``aam <command>: error: --flag VALUE: reason; see aam <command> --help``."""

    def error(self, message: str) -> NoReturn:
        # "argument --flag: VALUE: reason" -> "--flag VALUE: reason" (--x/--no-x: --x)
        text = " ".join(re.sub(r"^argument ([^/\s]+)(/\S+)?: ", r"\1 ", message).split())
        self.exit(2, f"{self.prog}: error: {text}; see {self.prog} --help\n")


def version_line() -> str:
    """``aam X (torch Y, python Z)``, read without importing torch."""
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "not installed"
    return f"aam {__version__} (torch {torch}, python {platform.python_version()})"


def _top_parser() -> argparse.ArgumentParser:
    width = max(map(len, COMMANDS)) + 2
    listing = "\n\n".join(
        f"{group}:\n" + "\n".join(f"  {name:<{width}}{text}" for name, text in commands.items())
        for group, commands in GROUPS.items()
    )
    parser = CommandParser(
        prog="aam",
        usage="aam [--version] [--provenance PATH] <command> [options]",
        description="Attention All Microbes: data, UniFrac, training and validation tools.",
        epilog=f"{listing}\n\n`aam <command> --help`: the command's options and defaults.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "command", choices=sorted(COMMANDS), metavar="<command>", help="one of the commands below"
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument(
        "--provenance", metavar="PATH", help="also write the run's provenance record to PATH"
    )
    return parser


def command_parser(name: str, module: ModuleType) -> CommandParser:
    """The parser of `aam NAME`, whose command module is ``module`` (imported by ``main``
    alone: the code fingerprints resolve that one computed import to the command)."""
    parser = CommandParser(
        prog=f"aam {name}", description=COMMANDS[name][1], formatter_class=DefaultsFormatter
    )
    module.add_arguments(parser)
    return parser


def _os_error_line(err: OSError) -> str:
    """One line for a file-system error on a user-given path: the path, the reason, the fix."""
    fix = {
        "PermissionError": "check the permissions or choose another location",
        "IsADirectoryError": "give a file name, not a directory",
        "NotADirectoryError": "a parent of the path is a file; fix the path",
        "FileNotFoundError": "check the path",
    }.get(type(err).__name__, "check the path and the file system (space, quota, mounts)")
    return f"{err.filename}: {err.strerror or err}; {fix}"


def main(argv: list[str] | None = None) -> int:
    """Run one `aam` command; bad input exits 2 with a one-line message.

    ``aam --provenance PATH <command> ...`` also writes PATH (see ``aam.workflow.provenance``)
    when the command succeeds.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    provenance = None
    if argv[:1] == ["--provenance"] and len(argv) > 1:
        provenance, argv = Path(argv[1]), argv[2:]
    started = datetime.now(timezone.utc)
    if not argv or argv[0] in ("-h", "--help"):
        _top_parser().print_help()
        return 0 if argv else 2
    if argv[0] == "--version":
        print(version_line())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        close = difflib.get_close_matches(name, COMMANDS, n=1)
        _top_parser().error(
            f"unknown command {name!r}" + (f"; did you mean {close[0]!r}?" if close else "")
        )
    module = importlib.import_module(COMMANDS[name][0])
    args = command_parser(name, module).parse_args(rest)
    if not faulthandler.is_enabled():  # a crash in native code (a kernel, a collective)
        faulthandler.enable()  # leaves the Python stack of every thread in the log
    logging.basicConfig(level=logging.INFO, format=f"aam {name}: %(message)s")
    try:
        with output_set():  # the command's outputs and its provenance, published together
            module.run(args)
            if provenance is not None and os.environ.get("RANK", "0") == "0":  # torchrun: rank 0
                write_provenance(provenance, provenance_record(argv, COMMANDS[name][0], started))
    except InputError as err:
        print(f"aam {name}: error: {err}", file=sys.stderr)
        return EXIT_INPUT
    except OptionError as err:
        print(f"aam {name}: error: {err.as_flag()}", file=sys.stderr)
        return EXIT_INPUT
    except NonFiniteError as err:
        print(f"aam {name}: error: {err}", file=sys.stderr)
        return EXIT_NON_FINITE
    except OSError as err:
        if err.filename is None:  # not about a path the user gave: a bug, keep the traceback
            raise
        print(f"aam {name}: error: {_os_error_line(err)}", file=sys.stderr)
        return EXIT_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main())
