"""Assemble a study for training or prediction: table, UniFrac, metadata target, split."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from aam.data.batching import Batch, SampleSet, batch_indices, make_batch
from aam.data.metadata import load_metadata, numeric_column
from aam.data.rarefy import rarefy
from aam.data.reconcile import preview, reconcile_sample_ids
from aam.data.split import SPLITS, make_split, read_split
from aam.data.table import load_table
from aam.errors import InputError
from aam.unifrac.io import read_distance_matrix

log = logging.getLogger(__name__)


@dataclass
class Study:
    """Aligned per-sample inputs: position k of every array is ``samples.sample_ids[k]``."""

    samples: SampleSet
    split: pd.Series  # sample_id -> train | val | test
    distances: np.ndarray | None = None  # (N, N) UniFrac
    targets: np.ndarray | None = None  # (N,) float, or class index for classifiers
    classes: list[str] = field(default_factory=list)  # class labels of a classifier target
    categories: np.ndarray | None = None  # (N, C) int64, 0 = unknown
    category_levels: dict[str, list[str]] = field(default_factory=dict)

    def fingerprint(self) -> str:
        """sha256 of the sample IDs and their split: a resumed run must see the same data."""
        labels = self.split.reindex(self.samples.sample_ids).astype(str)
        text = "\n".join(f"{sid}\t{label}" for sid, label in labels.items())
        return hashlib.sha256(text.encode()).hexdigest()

    def subset(self, name: str) -> np.ndarray:
        """Positions of the samples in split ``name``."""
        labels = self.split.reindex(self.samples.sample_ids).to_numpy()
        return np.flatnonzero(labels == name)

    def batch(
        self,
        positions: np.ndarray,
        token_limit: int,
        asv_sampling: str = "first",
        rng: np.random.Generator | None = None,
    ) -> Batch:
        """The batch of ``positions`` with its UniFrac block, targets and categories."""
        return make_batch(
            self.samples,
            positions,
            token_limit=token_limit,
            asv_sampling=asv_sampling,
            rng=rng,
            distances=self.distances,
            targets=self.targets,
            categories=self.categories,
        )

    def batches(
        self, positions: np.ndarray, batch_size: int, token_limit: int, asv_sampling: str = "first"
    ) -> Iterator[Batch]:
        """Every one of ``positions`` once, in order, ``batch_size`` at a time."""
        for idx in batch_indices(len(positions), batch_size, shuffle=False):
            yield self.batch(positions[idx], token_limit, asv_sampling)


def load_study(
    table_path: Path,
    *,
    max_bp: int,
    unifrac_path: Path | None = None,
    metadata_path: Path | None = None,
    target: str | None = None,
    classifier: bool = False,
    categorical: list[str] | None = None,
    category_levels: dict[str, list[str]] | None = None,
    split_path: Path | None = None,
    val_fraction: float = 0.1,
    test_fraction: float = 0.0,
    seed: int = 42,
    rarefy_depth: int | None = None,
    allow_missing: bool = False,
) -> Study:
    """Load, reconcile sample IDs across the inputs, and align everything to one order.

    Samples whose target is missing, or with fewer reads than ``rarefy_depth``, are dropped
    and counted (an error if all are); the other inputs may list the latter. Without
    ``split_path`` a seeded split is made (the caller records ``study.split``).
    """
    table = load_table(table_path)
    sources: dict[str, list[str]] = {str(table_path): [str(s) for s in table.ids()]}
    too_shallow: set[str] = set()  # fewer reads than rarefy_depth: dropped (rarefy logs them)
    if rarefy_depth:
        table, dropped = rarefy(table, rarefy_depth, seed)
        too_shallow = set(dropped)
    distances = metadata = split = None
    if unifrac_path is not None:
        dm_ids, distances = read_distance_matrix(unifrac_path)
        _check_distances(unifrac_path, distances)
        sources[str(unifrac_path)] = dm_ids
    if metadata_path is not None:
        metadata = load_metadata(metadata_path)
        sources[str(metadata_path)] = list(metadata.index)
    if split_path is not None:
        split = _read_split(split_path)
        sources[str(split_path)] = list(split.index)
        if target is not None and metadata is not None and target in metadata.columns:
            # `aam split --target-column` leaves out samples without a target value; they are
            # dropped below anyway, so their absence from the split is no mismatch.
            unassigned = metadata.index[metadata[target].isna()].difference(split.index)
            sources[str(split_path)] += list(unassigned)
    ids = reconcile_sample_ids(sources, allow_missing=allow_missing)
    ids = [sid for sid in ids if sid not in too_shallow]
    if not ids:
        raise InputError(
            f"--rarefy-depth {rarefy_depth}: every sample shared by the inputs has fewer reads; "
            "choose a lower --rarefy-depth"
        )

    targets, classes = None, []
    if target is not None:
        if metadata is None:
            raise InputError(f"--target-column {target}: needs --metadata")
        targets, classes, ids = _targets(metadata, target, ids, metadata_path, classifier)
    categories, levels = None, {}
    if categorical:
        if metadata is None:
            raise InputError("--categorical-columns: needs --metadata")
        categories, levels = _categories(metadata, categorical, ids, metadata_path, category_levels)

    table = table.filter(ids, inplace=False).remove_empty(axis="observation")
    samples = SampleSet.from_table(table, max_bp, table_name=str(table_path))
    if distances is not None:
        position = {sid: k for k, sid in enumerate(sources[str(unifrac_path)])}
        order = np.array([position[sid] for sid in samples.sample_ids])
        distances = np.ascontiguousarray(distances[np.ix_(order, order)], dtype=np.float32)
    if split is None:
        split = make_split(
            samples.sample_ids, val_fraction=val_fraction, test_fraction=test_fraction, seed=seed
        )
    return Study(
        samples=samples,
        split=split.reindex(samples.sample_ids),
        distances=distances,
        targets=targets,
        classes=classes,
        categories=categories,
        category_levels=levels,
    )


def _read_split(path: Path) -> pd.Series:
    """``read_split``, with a file that is not a table as one InputError line."""
    try:
        return read_split(path)
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        reason = " ".join(str(err).split())[:120]
        message = f"{path}: not a split table ({reason}); create it with `aam split`"
        raise InputError(message) from None


def _check_distances(path: Path, matrix: np.ndarray) -> None:
    if not np.isfinite(matrix).all():
        raise InputError(f"{path}: the distance matrix holds NaN or inf; recompute it")


def _targets(
    metadata: pd.DataFrame, column: str, ids: list[str], path: Path, classifier: bool
) -> tuple[np.ndarray, list[str], list[str]]:
    """Target per kept sample, the class labels, and the IDs that have a target."""
    if classifier:
        if column not in metadata.columns:
            raise InputError(
                f"{path}: no column {column!r} (columns: {', '.join(map(str, metadata.columns))})"
            )
        values = metadata.loc[ids, column]
    else:
        values = numeric_column(metadata, column, path).loc[ids]
    missing = values.isna().to_numpy()
    if missing.all():
        raise InputError(f"{path}: column {column!r} is empty for every sample; pick a target")
    if missing.any():
        log.warning(
            "%s: dropped %d samples with no %s value (%s)",
            path,
            int(missing.sum()),
            column,
            preview(values.index[missing]),
        )
    kept = [sid for sid, m in zip(ids, missing, strict=True) if not m]
    values = values[~missing]
    if not classifier:
        return values.to_numpy(dtype=np.float64), [], kept
    classes = sorted(values.astype(str).unique())
    if len(classes) < 2:
        raise InputError(f"{path}: column {column!r} has one class only; a classifier needs 2+")
    lookup = {c: k for k, c in enumerate(classes)}
    return values.astype(str).map(lookup).to_numpy(dtype=np.int64), classes, kept


def _categories(
    metadata: pd.DataFrame,
    columns: list[str],
    ids: list[str],
    path: Path,
    known_levels: dict[str, list[str]] | None,
) -> tuple[np.ndarray, dict[str, list[str]]]:
    """Category index per sample and column (0 = unknown); levels come from the data unless
    given (prediction reuses the training levels; unseen values map to 0)."""
    missing = [c for c in columns if c not in metadata.columns]
    if missing:
        raise InputError(
            f"{path}: no column(s) {missing} for --categorical-columns "
            f"(columns: {', '.join(map(str, metadata.columns))})"
        )
    levels = dict(known_levels or {})
    out = np.zeros((len(ids), len(columns)), dtype=np.int64)
    for k, column in enumerate(columns):
        values = metadata.loc[ids, column]
        if column not in levels:
            levels[column] = sorted(values.dropna().astype(str).unique())
        lookup = {v: i + 1 for i, v in enumerate(levels[column])}
        out[:, k] = [lookup.get(str(v), 0) if pd.notna(v) else 0 for v in values]
    return out, levels


def describe(study: Study) -> str:
    """One log line: sample counts per split."""
    counts = {name: len(study.subset(name)) for name in SPLITS}
    return f"{len(study.samples)} samples ({', '.join(f'{k} {v}' for k, v in counts.items())})"
