"""The checks of a dataset's data that the workflow's rule check_data runs (`aam check-data`)
before rule stage copies it: the first job that parses the table and the metadata stops on bad
data with one line naming the config field, file and fix, before any training job starts. The
checks of the config alone run at parse time (``aam.workflow.checks``)."""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from aam.data.feature_sequences import read_sequences, with_sequences
from aam.data.metadata import column_hint, load_metadata, numeric_column
from aam.data.reconcile import preview
from aam.data.samples import check_samples_have_reads, check_sequences
from aam.data.split import check_folds, given_split, group_folds_fix, make_split, read_split
from aam.data.table import check_training_counts, load_table
from aam.errors import InputError
from aam.unifrac.io import check_tsv_ids
from aam.unifrac.shard_plan import check_shard_count
from aam.workflow.checks import check_not_target

log = logging.getLogger(__name__)
LOW_DEPTH = 1000  # reads below which an unrarefied sample's abundances are warned noisy
# `aam split`'s flags as the workflow config names them, in a seeded split's error line.
SPLIT_FIELDS = {
    "--val-fraction": "split.val_fraction",
    "--test-fraction": "split.test_fraction",
    "--test-group": "split_test_group",
    "--group-column": "split_group_column",
}


@dataclass(frozen=True)
class SeededSplit:
    """The seeded split the config asks of a dataset (config ``split:``, and its
    ``split_test_group``), as rule split draws it."""

    val_fraction: float
    test_fraction: float
    seed: int
    test_group: str | None = None


if TYPE_CHECKING:
    from biom import Table


@dataclass(frozen=True)
class SampleCounts:
    """How a dataset's table and metadata meet (check-data's log line and samples.json): the
    table's samples, the metadata's rows, the samples in both (those the dataset's jobs read,
    before rarefaction), the table's samples without a row (left out:
    drop_samples_without_metadata), the rows of samples the table lacks (ignored) and the
    samples in both with a target value; and, in a dataset not rarefied, how many of the
    samples read hold fewer than ``LOW_DEPTH`` reads."""

    table_samples: int
    metadata_rows: int
    matched: int
    table_only: int
    metadata_only: int
    with_target: int
    low_depth: int = 0

    def line(self, name: str, target: str) -> str:
        """The counts as one line of check-data's log."""
        return (
            f"datasets.{name}: {self.matched} samples in the table ({self.table_samples}) and "
            f"the metadata ({self.metadata_rows} rows), {self.with_target} of them with a "
            f"{target!r} value; {self.metadata_only} metadata rows of samples the table lacks "
            f"ignored; {self.table_only} table samples without a metadata row left out"
            + (f"; {self.low_depth} with fewer than {LOW_DEPTH:,} reads" if self.low_depth else "")
        )


def check_dataset(
    name: str,
    table: Path,
    metadata: Path,
    target: str,
    categorical: Sequence[str] = (),
    split_column: str | None = None,
    split_file: Path | None = None,
    classifier: bool = False,
    *,
    folds: Mapping[str, int] | None = None,
    predict_on: Sequence[tuple[str, str, Path]] = (),
    shards: int = 1,
    group_column: str | None = None,
    split_group_column: str | None = None,
    sequences: Path | None = None,
    rarefied: bool = False,
    lsmat: bool = False,
    drop_samples_without_metadata: bool = False,
    seeded: SeededSplit | None = None,
) -> SampleCounts:
    """Dataset ``name`` fits its config: the target, covariate and group columns exist, the
    counts fit training's float32, table and metadata share samples, each table sample has a
    metadata row (unless ``drop_samples_without_metadata``: the jobs read the table without
    those; rows of samples the table lacks are always ignored), a regression target (not
    ``classifier``) holds numbers and is not declared categorical (``#q2:types``), a given split
    (a metadata column or a file) labels every sample with a target and leaves enough of them
    for training; each cross-validated run's ``folds`` (run -> folds) can partition the samples
    with a target; the metadata of each dataset a run of this one predicts (``predict_on``: run,
    dataset, metadata file) has the covariate columns; the table has a sample per UniFrac shard;
    every sample with a target has a group in ``split_group_column``, whose groups are enough
    for each run's folds and the ``seeded`` split (drawn here as rule split draws it, where no
    split is given); the table's feature IDs are nucleotide sequences (or, with
    ``sequences``, each has one there). Returns how the table's samples and the metadata's
    rows meet."""
    check_not_target(name, target, categorical, group_column, split_group_column)
    columns = load_metadata(metadata)
    grouping = (split_column, group_column, split_group_column)
    _check_columns(name, metadata, columns, [target, *categorical, *(c for c in grouping if c)])
    for run, other, path in predict_on:
        absent = [c for c in categorical if c not in load_metadata(path).columns]
        if absent:
            raise InputError(
                f"runs.{run}.predict_on: {path} (datasets.{other}) has no covariate "
                f"column(s) {absent} the model uses; add them (empty cells map to the unknown "
                "category)"
            )
    counts = _loaded_table(name, table, sequences)
    sample_ids = [str(x) for x in counts.ids()]
    _check_normalization(name, table, metadata, sample_ids, list(columns.index))
    rows = set(columns.index)
    shared = set(sample_ids) & rows
    if not shared:
        raise InputError(
            f"datasets.{name}: {table} and {metadata} share no sample IDs; "
            "check that both files describe the same samples"
        )
    table_only = [sid for sid in sample_ids if sid not in rows]
    if table_only and not drop_samples_without_metadata:
        raise InputError(
            f"datasets.{name}: {len(table_only)} of the {len(sample_ids)} samples of {table} "
            f"have no row in {metadata} ({preview(table_only)}); add their rows (an empty "
            f"target cell marks a sample without a target), or set datasets.{name}."
            "drop_samples_without_metadata: true to leave them out"
        )
    read = counts.filter(shared, inplace=False) if table_only else counts  # what the jobs read
    low_depth = _check_samples(name, table, read, rarefied, lsmat, shards)
    if classifier:
        targets = columns[target].reindex(sorted(shared))
    else:  # numbers, as training reads them: text or a categorical declaration stop here
        source = f"datasets.{name}.metadata: {metadata}"
        fix = f"set datasets.{name}.classifier: true"
        targets = numeric_column(columns, target, source, fix).reindex(sorted(shared))
    targets = targets.dropna()
    if split_column:
        source = f"datasets.{name}.split_column: {metadata} column {split_column!r}"
        given_split(columns[split_column], list(targets.index), source)
    if split_file:
        source = f"datasets.{name}.split_file: {split_file}"
        given_split(read_split(split_file), list(targets.index), source)
    classes = targets.astype(str).value_counts().to_dict() if classifier else None
    _check_filled(name, metadata, columns, targets.index, categorical, group_column)
    groups = _groups(name, metadata, columns, split_group_column, targets.index)
    if groups is not None and groups.nunique() < 2 and not (split_column or split_file):
        raise InputError(
            f"datasets.{name}.split_group_column: {metadata} column {split_group_column!r} "
            f"holds one group ({groups.iloc[0]}) for all {len(groups)} samples with a target; "
            "a split keeps each group whole, so it cannot give both training and test samples: "
            "group by a column with 2 or more groups, or leave split_group_column out"
        )
    if seeded is not None and not (split_column or split_file):
        in_table = [sid for sid in sample_ids if sid in targets.index]  # rule split's order
        classes_of = targets.astype(str) if classifier else None
        _check_seeded_split(name, seeded, in_table, groups, classes_of)
    for run, k in (folds or {}).items():
        where = f"config runs.{run}.cv.folds (dataset {name}, samples with a target)"
        check_folds(k, len(targets), classes, where)
        if groups is not None and k > groups.nunique():
            raise InputError(
                f"{where}: {k} folds but {groups.nunique()} group(s) in split_group_column "
                f"{split_group_column!r} (a fold's test part is whole groups); "
                f"{group_folds_fix(groups.nunique())}"
            )
    return SampleCounts(
        table_samples=len(sample_ids),
        metadata_rows=len(rows),
        matched=len(shared),
        table_only=len(table_only),
        metadata_only=len(rows - shared),
        with_target=len(targets),
        low_depth=low_depth,
    )


def _check_columns(name: str, metadata: Path, columns: pd.DataFrame, named: list[str]) -> None:
    """InputError naming the config's column fields when ``metadata`` lacks one of ``named``."""
    missing = [c for c in named if c not in columns.columns]
    if missing:
        raise InputError(
            f"datasets.{name}: {metadata} has no column(s) {missing} "
            f"({column_hint(missing, columns.columns)}); "
            "fix target/categorical/split_column/group_column/split_group_column"
        )


def _loaded_table(name: str, table: Path, sequences: Path | None) -> Table:
    """``table`` with its features as sequences (``sequences``: theirs), checked to be
    sequences and to hold counts that fit float32."""
    counts = load_table(table)
    if sequences is not None:
        counts = with_sequences(counts, read_sequences(sequences), table, sequences)
    check_sequences([str(x) for x in counts.ids("observation")], f"datasets.{name}.table: {table}")
    check_training_counts(counts, f"datasets.{name}.table: {table}")
    return counts


def _check_samples(
    name: str, table: Path, counts: Table, rarefied: bool, lsmat: bool, shards: int
) -> int:
    """The samples of ``table`` the jobs read (``counts``) all have reads (unless
    ``rarefied``, which drops them), their IDs suit the PCoA's TSV (``lsmat``) and there is
    one per UniFrac shard. Returns how many hold fewer than ``LOW_DEPTH`` reads where the
    dataset is not rarefied (warned: their relative abundances are noisy), else 0."""
    sample_ids = [str(x) for x in counts.ids()]
    low = 0
    if not rarefied:
        reads = counts.matrix_data.tocsc()
        reads.eliminate_zeros()
        check_samples_have_reads(
            sample_ids, np.diff(reads.indptr), f"datasets.{name}.table: {table}"
        )
        depths = np.asarray(reads.sum(axis=0)).ravel()
        shallow = np.flatnonzero(depths < LOW_DEPTH)
        low = len(shallow)
        if low:
            least = int(np.argmin(depths))
            log.warning(
                "datasets.%s: %d of the %d samples of %s hold fewer than %s reads (the least, "
                "%s: %d); their relative abundances are noisy: set datasets.%s.rarefy: "
                "{depth: ..., seed: 42} to drop the shallow samples and subsample the others "
                "evenly",
                name,
                low,
                len(sample_ids),
                table,
                f"{LOW_DEPTH:,}",
                sample_ids[least],
                int(depths[least]),
                name,
            )
    if lsmat:
        check_tsv_ids(f"datasets.{name}: {table} (its PCoA's distance-matrix.tsv)", sample_ids)
    if shards > 1:
        check_shard_count(
            shards, counts.shape[1], f"config unifrac.shards (dataset {name}, {table})"
        )
    return low


def _check_normalization(
    name: str, table: Path, metadata: Path, table_ids: list[str], metadata_ids: list[str]
) -> None:
    """One line where two sample IDs differ only in Unicode normalization (NFC and NFD forms
    of one name, e.g. from two operating systems): within the table, within the metadata, or a
    table ID that matches a metadata ID only once both are normalized."""
    for source, ids in ((table, table_ids), (metadata, metadata_ids)):
        seen: dict[str, str] = {}
        for sid in ids:
            other = seen.setdefault(unicodedata.normalize("NFC", sid), sid)
            if other != sid:
                raise InputError(
                    f"datasets.{name}: {source} has sample IDs {other!r} and {sid!r}, the same "
                    "name in two Unicode normalizations (NFC, NFD); rename one of them"
                )
    exact = set(metadata_ids)
    normalized = {unicodedata.normalize("NFC", sid): sid for sid in metadata_ids}
    for sid in table_ids:
        match = normalized.get(unicodedata.normalize("NFC", sid))
        if sid not in exact and match is not None:
            raise InputError(
                f"datasets.{name}: sample {sid!r} of {table} is {match!r} in {metadata} in "
                "another Unicode normalization (NFC, NFD); write both files in one (NFC)"
            )


def _check_filled(
    name: str,
    metadata: Path,
    columns: pd.DataFrame,
    samples: pd.Index,
    categorical: Sequence[str],
    group_column: str | None,
) -> None:
    """Each covariate column and the ``group_column`` holds a value for some sample with a
    target (an all-empty one stopped training and the baselines, after check-data passed)."""
    named = [(f"categorical: {c!r}", c) for c in categorical]
    named += [(f"group_column: {group_column!r}", group_column)] if group_column else []
    for key, column in named:
        if columns[column].reindex(samples).isna().all():
            raise InputError(
                f"datasets.{name}.{key} is empty in {metadata} for every one of the "
                f"{len(samples)} samples with a target; fill the column, or leave it out of "
                "the config"
            )


def _groups(
    name: str, metadata: Path, columns: pd.DataFrame, column: str | None, samples: pd.Index
) -> pd.Series | None:
    """The ``split_group_column`` value of each sample with a target (None without one); one
    line where a sample has none."""
    if column is None:
        return None
    groups = columns[column].reindex(samples)
    missing = groups.index[groups.isna()]
    if len(missing):
        raise InputError(
            f"datasets.{name}.split_group_column: {metadata} column {column!r} is empty for "
            f"{len(missing)} sample(s) with a target (e.g. {missing[0]}); give every sample its "
            "group"
        )
    return groups.astype(str)


def _check_seeded_split(
    name: str,
    seeded: SeededSplit,
    samples: list[str],
    groups: pd.Series | None,
    classes: pd.Series | None,
) -> None:
    """Rule split's draw of the ``seeded`` split of ``samples`` (whole ``groups``, stratified
    by ``classes``), made here first: one line, naming the config's fields, where it cannot be
    made (a test group no sample has, fractions whole groups cannot meet, too few to train)."""
    try:
        make_split(
            samples,
            val_fraction=seeded.val_fraction,
            test_fraction=seeded.test_fraction,
            seed=seeded.seed,
            groups=None if groups is None else list(groups.reindex(samples)),
            test_group=seeded.test_group,
            classes=None if classes is None else list(classes.reindex(samples)),
        )
    except InputError as err:
        line = str(err)
        for flag, field in SPLIT_FIELDS.items():
            line = line.replace(flag, field)
        raise InputError(f"datasets.{name}: its seeded split cannot be made: {line}") from None
