"""Assemble a study for training or prediction: table, UniFrac, metadata target, split.

UniFrac comes as a ``PairDistances``: computed per batch from the table and a tree (the
default), or read by rows from a precomputed matrix. Nothing N x N is loaded."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from aam.data.metadata import column_hint, declared_types, load_metadata, numeric_column
from aam.data.rarefy import EVALUATION, EpochDraw, check_drawable, rarefy
from aam.data.reconcile import preview, reconcile_sample_ids
from aam.data.samples import ReadDraw, SampleSet
from aam.data.split import MIN_TRAIN, SPLITS, make_split, read_split, split_counts
from aam.data.table import check_training_counts, counts_of, load_table
from aam.errors import InputError
from aam.training.inputs.distances import MatrixDistances, PairDistances, TreeDistances
from aam.training.inputs.study_options import StudyOptions
from aam.unifrac.batch import BatchUniFrac
from aam.unifrac.io import MatrixRows
from aam.unifrac.pair_sums import DTYPES
from aam.unifrac.tree import load_tree

if TYPE_CHECKING:
    from biom import Table

    from aam.data.batching import Batch
    from aam.training.config import UniFracOptions

log = logging.getLogger(__name__)


@dataclass
class Study:
    """Aligned per-sample inputs: position k of every array is ``samples.sample_ids[k]``."""

    samples: SampleSet
    split: pd.Series  # sample_id -> train | val | test
    distances: PairDistances | None = None  # UniFrac between any samples, by position
    targets: np.ndarray | None = None  # (N,) float, or class index for classifiers
    classes: list[str] = field(default_factory=list)  # class labels of a classifier target
    categories: np.ndarray | None = None  # (N, C) int64, 0 = unknown
    category_levels: dict[str, list[str]] = field(default_factory=dict)
    draw_depth: int | None = None  # --rarefy-each-epoch: reads drawn per sample and epoch
    draw_seed: int = 0

    def fingerprint(self) -> str:
        """sha256 of the sample IDs and their split: a resumed run must see the same data."""
        labels = self.split.reindex(self.samples.sample_ids).astype(str)
        text = "\n".join(f"{sid}\t{label}" for sid, label in labels.items())
        return hashlib.sha256(text.encode()).hexdigest()

    def class_labels(self) -> pd.Series | None:
        """sample_id -> class label of a classifier's target (None for any other study)."""
        if not self.classes:
            return None
        labels = np.asarray(self.classes, dtype=object)[self.targets]
        return pd.Series(labels, index=pd.Index(self.samples.sample_ids, name="sample_id"))

    def subset(self, name: str) -> np.ndarray:
        """Positions of the samples in split ``name``."""
        labels = self.split.reindex(self.samples.sample_ids).to_numpy()
        return np.flatnonzero(labels == name)

    def draw(self, epoch: int) -> EpochDraw | None:
        """The reads of ``epoch`` (EVALUATION: evaluation's fixed draw) under
        --rarefy-each-epoch; None: the table's reads."""
        if self.draw_depth is None:
            return None
        return EpochDraw(self.draw_depth, self.draw_seed, epoch)

    def batch(
        self,
        positions: np.ndarray,
        token_limit: int,
        asv_sampling: str = "first",
        rng: np.random.Generator | None = None,
        draw: ReadDraw | None = None,
    ) -> Batch:
        """The batch of ``positions`` (reads as ``draw`` draws them) with targets and
        categories; ``aam.training.inputs.batches`` adds its UniFrac block."""
        from aam.data.batching import make_batch  # torch: only where batches are made

        return make_batch(
            self.samples,
            positions,
            token_limit=token_limit,
            asv_sampling=asv_sampling,
            rng=rng,
            draw=draw,
            targets=self.targets,
            categories=self.categories,
        )

    def batches(
        self, positions: np.ndarray, batch_size: int, token_limit: int, asv_sampling: str = "first"
    ) -> Iterator[Batch]:
        """Every one of ``positions`` once, in order, ``batch_size`` at a time, as evaluation
        and inference read them (evaluation's fixed draw under --rarefy-each-epoch)."""
        from aam.data.batching import batch_indices

        draw = self.draw(EVALUATION)
        for idx in batch_indices(len(positions), batch_size, shuffle=False):
            yield self.batch(positions[idx], token_limit, asv_sampling, draw=draw)


@dataclass(frozen=True)
class UniFracSource:
    """Where a study's UniFrac comes from: each batch's distances computed from the table and
    a ``tree`` (with ``options``), or rows read from a precomputed ``matrix``; neither: none."""

    tree: Path | None = None
    matrix: Path | None = None
    options: UniFracOptions | None = None

    def __post_init__(self) -> None:
        if self.tree is not None and self.options is None:
            raise ValueError("UniFracSource: a tree needs options (the batch kernel's)")


@dataclass(frozen=True)
class Labels:
    """What a study reads from a ``metadata`` file: a ``target`` column (class labels with
    ``classifier``) and ``categorical`` covariate columns, coded by ``levels`` where a trained
    model fixed them (learned from the data otherwise); none of them: its sample IDs only."""

    metadata: Path
    target: str | None = None
    classifier: bool = False
    categorical: Sequence[str] = ()
    levels: dict[str, list[str]] | None = None

    @classmethod
    def of(cls, metadata: Path | None, **fields: Any) -> Labels | None:
        """The labels of ``metadata``; None without one, an InputError if a target or
        covariates are asked for without it."""
        if metadata is not None:
            return cls(metadata, **fields)
        if fields.get("target") is not None:
            raise InputError(f"--target-column {fields['target']}: needs --metadata")
        if fields.get("categorical"):
            columns = ", ".join(fields["categorical"])
            raise InputError(f"covariate column(s) {columns}: need --metadata")
        return None


def load_study(
    table_path: Path,
    *,
    max_bp: int,
    unifrac: UniFracSource | None = None,
    labels: Labels | None = None,
    split_path: Path | None = None,
    reading: StudyOptions | None = None,
    seed: int = 42,
    training: bool = True,
) -> Study:
    """Load, reconcile sample IDs across the inputs, and align everything to one order.

    UniFrac comes from ``unifrac`` (or is absent); targets and covariates from ``labels``.
    How the samples are read is ``reading`` (the run's ``StudyOptions``; default: its
    defaults). Samples whose target is missing, or with fewer reads than its ``rarefy_depth``,
    are dropped and counted (an error if all are); the other inputs may list the latter. With
    ``rarefy_each_epoch`` nothing is rarefied here: every sample must have ``rarefy_depth``
    reads, drawn afresh each epoch. Without ``split_path`` a seeded split (its ``val_fraction``,
    ``test_fraction``, ``seed``) is made (the caller records ``study.split``). Every sample's
    counts must sum within float32 (training and prediction read them so); a study for
    ``training`` (prediction: False) needs at least ``MIN_TRAIN`` train samples with a target
    in ``split_path``.
    """
    reading = reading or StudyOptions()
    _check_unifrac(unifrac, reading)
    table = load_table(table_path)
    check_training_counts(table, table_path)
    sources: dict[str, list[str]] = {str(table_path): [str(s) for s in table.ids()]}
    table, too_shallow = _rarefied(table, table_path, reading, seed)
    matrix = metadata = split = None
    if unifrac is not None and unifrac.matrix is not None:
        matrix = _read_matrix(unifrac.matrix, training)
        sources[str(unifrac.matrix)] = matrix.ids
    if labels is not None:
        metadata = load_metadata(labels.metadata)
        sources[str(labels.metadata)] = list(metadata.index)
    if split_path is not None:
        split = read_split(split_path)
        sources[str(split_path)] = list(split.index)
        if labels is not None and labels.target in metadata.columns:
            # `aam split --target-column` leaves out samples without a target value; they are
            # dropped below anyway, so their absence from the split is no mismatch.
            unassigned = metadata.index[metadata[labels.target].isna()].difference(split.index)
            sources[str(split_path)] += list(unassigned)
    ids = reconcile_sample_ids(sources, allow_missing=reading.allow_missing_samples)
    ids = [sid for sid in ids if sid not in too_shallow]
    if not ids:
        raise InputError(
            f"--rarefy-depth {reading.rarefy_depth}: every sample shared by the inputs has fewer "
            "reads; choose a lower --rarefy-depth"
        )
    kept, labelled = ids, {}
    if labels is not None:
        kept, labelled = _labelled(metadata, labels, ids)
    if training and split is not None:
        target, path = (labels.target, labels.metadata) if labels is not None else (None, None)
        _check_training_split(split, split_path, ids, kept, target, path)

    table = table.filter(kept, inplace=False).remove_empty(axis="observation")
    samples = SampleSet.from_table(table, max_bp, table_name=str(table_path))
    distances: PairDistances | None = None
    if matrix is not None:
        position = {sid: k for k, sid in enumerate(matrix.ids)}
        distances = MatrixDistances(matrix, np.array([position[s] for s in samples.sample_ids]))
    if unifrac is not None and unifrac.tree is not None:
        distances = _tree_distances(table, table_path, samples, unifrac)
    if split is None:
        split = make_split(
            samples.sample_ids,
            val_fraction=reading.val_fraction,
            test_fraction=reading.test_fraction,
            seed=seed,
        )
    return Study(
        samples=samples,
        split=split.reindex(samples.sample_ids),
        distances=distances,
        **labelled,
        draw_depth=reading.rarefy_depth if reading.rarefy_each_epoch else None,
        draw_seed=seed,
    )


def _check_unifrac(unifrac: UniFracSource | None, reading: StudyOptions) -> None:
    """InputError for two sources of UniFrac, or draws each epoch without a tree."""
    if unifrac is not None and unifrac.tree is not None and unifrac.matrix is not None:
        raise InputError(
            f"--tree {unifrac.tree} and --unifrac {unifrac.matrix}: give one source of UniFrac "
            "(--tree computes each batch's distances; --unifrac reads a precomputed matrix)"
        )
    if reading.rarefy_each_epoch and (unifrac is None or unifrac.tree is None):
        raise InputError(
            "--rarefy-each-epoch: needs --tree (the distances of each draw are computed per "
            "batch; a precomputed matrix cannot follow the draws)"
        )


def _rarefied(
    table: Table, table_path: Path, reading: StudyOptions, seed: int
) -> tuple[Table, set[str]]:
    """``table`` rarefied to ``reading.rarefy_depth`` (unless drawn each epoch: then checked
    drawable) and the IDs of the samples with fewer reads (dropped: rarefy logs them)."""
    if reading.rarefy_each_epoch:
        check_drawable(table, reading.rarefy_depth, str(table_path))
    elif reading.rarefy_depth:
        table, dropped = rarefy(table, reading.rarefy_depth, seed)
        return table, set(dropped)
    return table, set()


def _read_matrix(path: Path, training: bool) -> MatrixRows:
    """A precomputed UniFrac matrix, read by rows; for ``training`` every value checked first
    (not only the pairs that batches meet)."""
    matrix = MatrixRows(path)
    if training:
        started = time.perf_counter()
        matrix.check_whole()
        log.info(
            "checked every distance of %s (%d samples) in %.1f s",
            path,
            len(matrix.ids),
            time.perf_counter() - started,
        )
    return matrix


def _labelled(metadata: pd.DataFrame, labels: Labels, ids: list[str]) -> tuple[list[str], dict]:
    """The IDs with a target (all of ``ids`` without one) and the Study fields ``labels`` fill:
    targets and classes, categories and their levels."""
    fields: dict = {}
    kept = ids
    if labels.target is not None:
        targets, classes, kept = _targets(
            metadata, labels.target, ids, labels.metadata, labels.classifier
        )
        fields.update(targets=targets, classes=classes)
    if labels.categorical:
        if labels.target in labels.categorical:
            raise InputError(
                f"{labels.metadata}: column {labels.target!r} is the target and a covariate (or "
                "group) column; it would feed the model the answer: drop it from the covariates"
            )
        categories, levels = _categories(
            metadata, list(labels.categorical), kept, labels.metadata, labels.levels
        )
        fields.update(categories=categories, category_levels=levels)
    return kept, fields


def _tree_distances(
    table: Table, table_path: Path, samples: SampleSet, unifrac: UniFracSource
) -> TreeDistances:
    """Each batch's UniFrac computed from ``table`` and ``unifrac.tree``; the compiled kernels
    loaded now (a first block of two samples)."""
    opts = unifrac.options
    batch_unifrac = BatchUniFrac.for_table(
        counts_of(table),
        load_tree(unifrac.tree, midpoint_root=opts.midpoint_root),
        opts.unifrac_metric,
        alpha=opts.unifrac_alpha,
        dtype=DTYPES[opts.unifrac_dtype],
        prune_missing=opts.prune_missing,
        table_name=str(table_path),
        tree_name=str(unifrac.tree),
    )
    distances = TreeDistances(samples, batch_unifrac)
    distances.block(np.arange(min(2, len(samples))))
    return distances


def _check_training_split(
    split: pd.Series,
    path: Path,
    shared: list[str],
    kept: list[str],
    target: str | None = None,
    metadata_path: Path | None = None,
) -> None:
    """InputError naming the split file when fewer than ``MIN_TRAIN`` of the ``kept`` samples
    (those of ``shared``, the samples in every input, with a target) are labelled train."""
    labels = split.reindex(kept)
    n_train = int((labels == "train").sum())
    if n_train >= MIN_TRAIN:
        return
    lacking = int((split.reindex(shared) == "train").sum()) - n_train
    why = f"; {lacking} train samples have no {target!r} in {metadata_path}" if lacking else ""
    which = f"samples that have {target!r}" if target else "samples"
    raise InputError(
        f"--split {path}: {n_train} train sample(s) among the {len(kept)} samples used "
        f"({split_counts(labels)}{why}); training needs at least {MIN_TRAIN}: mark more "
        f"{which} as train, or make a new split with `aam split`"
    )


def _targets(
    metadata: pd.DataFrame, column: str, ids: list[str], path: Path, classifier: bool
) -> tuple[np.ndarray, list[str], list[str]]:
    """Target per kept sample, the class labels, and the IDs that have a target."""
    if classifier:
        if column not in metadata.columns:
            raise InputError(
                f"{path}: no column {column!r}; {column_hint(column, metadata.columns)}"
            )
        values = metadata.loc[ids, column]
        _log_declared_numeric(
            metadata, column, path, "a classifier target: its values are class labels"
        )
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
            f"({column_hint(missing, metadata.columns)})"
        )
    levels = dict(known_levels or {})
    out = np.zeros((len(ids), len(columns)), dtype=np.int64)
    for k, column in enumerate(columns):
        _log_declared_numeric(metadata, column, path, "a covariate: its values are categories")
        values = metadata.loc[ids, column]
        if column not in levels:
            levels[column] = _levels(values, column, path)
        lookup = {v: i + 1 for i, v in enumerate(levels[column])}
        out[:, k] = [lookup.get(str(v), 0) if pd.notna(v) else 0 for v in values]
        unseen = int((values.notna() & (out[:, k] == 0)).sum())
        if unseen:
            log.warning(
                "%s: column %r: %d of %d samples have a level the model was not trained on; "
                "they read the unknown category",
                path,
                column,
                unseen,
                len(values),
            )
    return out, levels


CONTINUOUS_SHARE = 0.5  # a numeric covariate with more distinct values than this share of samples


def _levels(values: pd.Series, column: str, path: Path) -> list[str]:
    """The levels of covariate ``column`` learned from ``values``; InputError, one line naming
    the column and file, for a column empty for every sample or one that looks continuous
    (numbers, distinct in more than CONTINUOUS_SHARE of the samples: a category each)."""
    given = values.dropna().astype(str)
    levels = sorted(given.unique())
    if not levels:
        raise InputError(
            f"{path}: covariate column {column!r} is empty for every sample; fill it or drop it "
            "from the covariates"
        )
    numeric = pd.to_numeric(given, errors="coerce").notna().all()
    if numeric and len(levels) > 2 and len(levels) > CONTINUOUS_SHARE * len(given):
        raise InputError(
            f"{path}: covariate column {column!r} holds {len(levels)} distinct numbers in "
            f"{len(given)} samples: it looks continuous, and covariates are categories; bin it "
            "into a few categories or drop it from the covariates"
        )
    return levels


def _log_declared_numeric(metadata: pd.DataFrame, column: str, path: Path, use: str) -> None:
    """Log that the ``#q2:types`` row's ``numeric`` for ``column`` does not apply to ``use``."""
    if declared_types(metadata).get(column) == "numeric":
        log.info("%s: column %r is declared numeric (#q2:types) and used as %s", path, column, use)


def describe(study: Study) -> str:
    """One log line: sample counts per split."""
    counts = {name: len(study.subset(name)) for name in SPLITS}
    return f"{len(study.samples)} samples ({', '.join(f'{k} {v}' for k, v in counts.items())})"
