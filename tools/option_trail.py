"""Which modules a training command's options pass through before the training loop starts.

Runs a tiny `aam pretrain` (or `aam finetune`) on data/demo in this process and records, for
every call of a function in the `aam` package until ``Trainer.fit``, whether one of its
arguments is the command's typed options or a part of them (inputs, samples, UniFrac, model,
training, run options), or the argparse namespace. Prints the modules, in the order first
reached, their count, how often the trail moves from one module to another, and how often it
comes back to a module of ``aam/commands/`` after leaving it (issue 40: "a run has no single
owner").

    python tools/option_trail.py pretrain
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DEMO = REPO / "data" / "demo"
TINY = "--embedding-dim 16 --attention-heads 2 --layers 1 --token-limit 64 --batch-size 8"
FIT = ("trainer.py", "fit")


def tracked(value: object) -> list[object]:
    """``value`` and, for a dataclass of options, its fields' values (one level)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [value, *(getattr(value, f.name) for f in dataclasses.fields(value))]
    return [value]


def trail(argv: list[str]) -> list[str]:
    """The aam modules whose functions received the options before ``Trainer.fit``, one entry
    per call, in call order."""
    from aam.cli import main

    package = str(REPO / "aam")
    seen: list[str] = []
    ids: set[int] = set()

    def profile(frame, event, arg):  # noqa: ARG001 - sys.setprofile's signature
        if event != "call" or not frame.f_code.co_filename.startswith(package):
            return
        code = frame.f_code
        if (Path(code.co_filename).name, code.co_name) == FIT:
            sys.setprofile(None)
            return
        arguments = [frame.f_locals.get(n) for n in code.co_varnames[: code.co_argcount]]
        for value in arguments:
            if isinstance(value, argparse.Namespace) or type(value).__name__ == "TrainingOptions":
                ids.update(id(v) for v in tracked(value))
        if any(id(v) in ids for v in arguments if v is not None):
            module = str(Path(code.co_filename).relative_to(REPO))
            seen.append(module)

    sys.setprofile(profile)
    try:
        main(argv)
    finally:
        sys.setprofile(None)
    return seen


def summary(calls: list[str]) -> tuple[list[str], int, int]:
    """The distinct modules (first reached first), the moves between modules, and the returns
    to ``aam/commands/`` after the trail left it."""
    hops = [m for i, m in enumerate(calls) if i == 0 or m != calls[i - 1]]
    left = [i for i, m in enumerate(hops) if not m.startswith("aam/commands/")]
    returns = sum(
        1
        for i, m in enumerate(hops)
        if m.startswith("aam/commands/")
        and left
        and i > left[0]
        and not hops[i - 1].startswith("aam/commands/")
    )
    return list(dict.fromkeys(calls)), len(hops) - 1, returns


def main() -> int:
    command = sys.argv[1] if len(sys.argv) > 1 else "pretrain"
    with tempfile.TemporaryDirectory(prefix="aam-trail-") as tmp:
        argv = [command, "--table", str(DEMO / "table.biom"), "--output-dir", tmp]
        argv += ["--epochs", "1", "--threads", "1", "--no-progress", *TINY.split()]
        if command == "pretrain":
            argv += ["--tree", str(DEMO / "tree.nwk")]
        else:
            argv += ["--metadata", str(DEMO / "metadata.tsv"), "--target-column", "age"]
        modules, moves, returns = summary(trail(argv))
    for module in modules:
        print(module)
    print(f"{len(modules)} modules, {moves} moves between them, {returns} returns to aam/commands/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
