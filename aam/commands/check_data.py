"""`aam check-data`: the workflow's checks of a dataset's table and metadata against its config
(``aam.workflow.dataset_checks``), then a sha256 manifest of the checked files (rule check_data:
the first job that parses a dataset, before any other job reads it). A command of its own, so
that an edit of the data readers reruns this check, never the staging of the data."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aam.errors import InputError
from aam.options import SEED, add_options, check_options, from_args, option
from aam.runtime.atomic import atomic_output, check_output_path
from aam.runtime.staging import sha256_of
from aam.workflow.dataset_checks import SeededSplit, check_dataset

log = logging.getLogger(__name__)


@dataclass
class CheckDataOptions:
    """The options of `aam check-data`; a malformed ``--folds`` or ``--predict-on`` item is
    refused here."""

    dataset: str = option(None, "the dataset's config name (messages)", required=True)
    table: Path = option(None, "BIOM table or table.qza", required=True)
    sequences: Path | None = option(None, "FASTA or rep-seqs.qza of the table's feature IDs")
    metadata: Path = option(None, "sample metadata TSV", required=True)
    output: Path = option(None, "manifest to write", required=True)
    samples: Path | None = option(
        None,
        "JSON to write: how many samples the table and the metadata hold, share, and hold "
        "alone, and how many shared ones have a target (and that as the log's line, for the "
        "landing page)",
    )
    target_column: str = option(None, "metadata column of the target", required=True)
    classifier: bool = option(False, "the target is categorical")
    categorical_columns: str | None = option(None, "covariate columns (a,b)")
    split_column: str | None = option(None, "metadata column holding the given split")
    group_column: str | None = option(None, "metadata column of the groups (e.g. the study)")
    split_file: Path | None = option(None, "sample_id<TAB>split TSV")
    split_group_column: str | None = option(
        None, "metadata column of the groups the split keeps whole"
    )
    split_seed: int | None = option(
        None,
        "seed of the dataset's seeded split (config split.seed; without --split-column or "
        "--split-file): drawn here as rule split draws it, so a split that cannot be made "
        "stops here",
        **SEED,
    )
    val_fraction: float = option(
        0.1, "with --split-seed: the split's validation fraction", minimum=0, exclusive_maximum=1
    )
    test_fraction: float = option(
        0.2, "with --split-seed: the split's test fraction", minimum=0, exclusive_maximum=1
    )
    test_group: str | None = option(
        None, "with --split-seed: the --split-group-column value whose samples are the test set"
    )
    folds: list[str] = option([], "K folds of cross-validated RUN", metavar="RUN=K")
    predict_on: list[str] = option(
        [],
        "RUN predicts DATASET: its METADATA needs the covariate columns",
        metavar="RUN=DATASET=METADATA",
    )
    shards: int = option(1, "UniFrac shards of its matrix", minimum=1)
    rarefied: bool = option(False, "the table is rarefied first (drops empty samples)")
    drop_samples_without_metadata: bool = option(
        False,
        "leave out table samples without a metadata row (the jobs read the table without "
        "them) instead of stopping",
    )
    lsmat: bool = option(
        False, "its UniFrac matrix is written as an lsmat TSV (PCoA): sample IDs must fit one"
    )

    def __post_init__(self) -> None:
        check_options(self)
        self.run_folds = _pairs(self.folds, "--folds", int)
        self.predicted = [_predicted(item) for item in self.predict_on]

    @property
    def seeded(self) -> SeededSplit | None:
        """The seeded split asked for (None without ``--split-seed``)."""
        if self.split_seed is None:
            return None
        return SeededSplit(self.val_fraction, self.test_fraction, self.split_seed, self.test_group)

    @property
    def categorical(self) -> list[str]:
        """The covariate columns of ``--categorical-columns a,b``."""
        return [c for c in (self.categorical_columns or "").split(",") if c]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam check-data`."""
    add_options(parser, CheckDataOptions)


def run(args: argparse.Namespace) -> None:
    """Check the dataset; log how its table and metadata meet (and write it, --samples);
    write ``<sha256>  <path>`` of the table and the metadata."""
    opts = from_args(CheckDataOptions, args)
    check_output_path(opts.output, "manifest")
    if opts.samples is not None:
        check_output_path(opts.samples, "sample counts")
    counts = check_dataset(
        opts.dataset,
        opts.table,
        opts.metadata,
        opts.target_column,
        opts.categorical,
        opts.split_column,
        opts.split_file,
        opts.classifier,
        folds=opts.run_folds,
        predict_on=opts.predicted,
        shards=opts.shards,
        group_column=opts.group_column,
        split_group_column=opts.split_group_column,
        sequences=opts.sequences,
        rarefied=opts.rarefied,
        lsmat=opts.lsmat,
        drop_samples_without_metadata=opts.drop_samples_without_metadata,
        seeded=opts.seeded,
    )
    line = counts.line(opts.dataset, opts.target_column)
    log.info("%s", line)
    if opts.samples is not None:
        with atomic_output(opts.samples) as tmp:
            tmp.write_text(json.dumps(dataclasses.asdict(counts) | {"line": line}, indent=2) + "\n")
    with atomic_output(opts.output) as tmp:
        checked = (opts.table, opts.metadata, *([opts.sequences] if opts.sequences else []))
        tmp.write_text("".join(f"{sha256_of(p)}  {p}\n" for p in checked))


def _predicted(item: str) -> tuple[str, str, Path]:
    """(run, dataset, metadata file) of a ``--predict-on RUN=DATASET=METADATA`` item."""
    run, dataset, path = (item.split("=", 2) + ["", ""])[:3]
    if not (run and dataset and path):
        raise InputError(f"--predict-on {item}: expected RUN=DATASET=METADATA")
    return run, dataset, Path(path)


def _pairs(items: list[str], flag: str, convert: Callable[[str], Any]) -> dict[str, Any]:
    """KEY -> convert(VALUE) of ``flag KEY=VALUE ...`` arguments."""
    pairs = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            pairs[key] = convert(value) if key and value else None
        except ValueError:
            pairs[key] = None
        if pairs[key] is None:
            raise InputError(f"{flag} {item}: expected KEY=VALUE")
    return pairs
