"""`aam pretrain`: self-supervised base (UniFrac distances + masked nucleotides)."""

from __future__ import annotations

import argparse

from aam.commands.common import add_common_arguments, training_options
from aam.profiling.probe import memory_curve
from aam.training.run import pretrain


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam pretrain`."""
    add_common_arguments(parser, "pretrain")


def run(args: argparse.Namespace) -> None:
    """Pretrain a SequenceEncoder and write OUTPUT_DIR/encoder.pt (+ history, split): the run
    is ``aam.training.run.pretrain`` (one writer per output directory)."""
    pretrain(training_options(args, "pretrain"), memory_curve)
