"""Simple baselines fitted on a study's training samples: the constant predictors (for a
regression target the training mean, the best constant under squared error, and the training
median, the best under absolute error; for categorical targets ``mean``, the training class
frequencies), a random forest on relative abundances and, where a grouping column (e.g. the
study) is given, the group mean: each group's training mean (class frequencies), which is what
a model that only recognises the group can reach. Where AAM reads covariates (categorical
metadata columns), a second forest reads them too (one-hot, beside the abundances), so that AAM
has a baseline with the same inputs.

Predictions take the form of the model's: target units for regression, log-probabilities over
``study.classes`` for classes, so the same metrics apply to all of them. Another study's table
is predicted on the fitted study's ASVs (``aligned_abundances``).
"""

from __future__ import annotations

from collections.abc import Sequence

import biom
import numpy as np
import scipy.sparse as sp

from aam.analysis.prediction_tables import LOG_FLOOR
from aam.data.samples import SampleSet
from aam.errors import InputError
from aam.runtime.threads import usable_threads
from aam.training.inputs.study import Study

# The constant predictors of a regression target (a name -> its training statistic): every
# sample gets the same value, so a model must beat them to show any skill.
CONSTANTS = {"mean": np.mean, "median": np.median}


def relative_abundances(samples: SampleSet, positions: np.ndarray) -> sp.csr_matrix:
    """(len(positions), n_asvs) reads / sample total of the chosen samples."""
    lengths = np.diff(samples.asv_ptr)
    totals = np.add.reduceat(samples.counts, samples.asv_ptr[:-1]).astype(np.float64)
    matrix = sp.csr_matrix(
        (samples.counts / np.repeat(totals, lengths), samples.asv_idx, samples.asv_ptr),
        shape=(len(samples), len(samples.tokens)),
    )
    return matrix[positions]


def aligned_abundances(table: biom.Table, asv_ids: Sequence[str], name: str) -> sp.csr_matrix:
    """(samples of ``table``, len(``asv_ids``)) reads / sample total on the columns ``asv_ids``:
    an ASV the table lacks is 0; the table's other ASVs have no column, but their reads count
    in each sample's total. InputError naming ``name`` for a sample without reads."""
    totals = np.asarray(table.matrix_data.sum(axis=0), dtype=np.float64).ravel()
    empty = [str(s) for s, total in zip(table.ids(), totals, strict=True) if total <= 0]
    if empty:
        raise InputError(
            f"{name}: {len(empty)} sample(s) have no reads (e.g. {', '.join(empty[:3])}); "
            "remove them from the table"
        )
    column = {asv: k for k, asv in enumerate(asv_ids)}
    position = np.array([column.get(str(asv), -1) for asv in table.ids("observation")])
    entries = table.matrix_data.tocoo()
    known = position[entries.row] >= 0
    rows, asvs = entries.col[known], position[entries.row[known]]
    values = entries.data[known] / totals[rows]
    return sp.csr_matrix((values, (rows, asvs)), shape=(len(totals), len(asv_ids)))


def with_covariates(abundances: sp.csr_matrix, codes: np.ndarray, levels: np.ndarray):
    """``abundances`` with one 0/1 column per level of each covariate beside them: ``codes``
    (rows, C) are level codes, 0 = unknown (no column set); ``levels`` (C,) the largest code
    of each covariate."""
    blocks = [abundances]
    for c, count in enumerate(levels):
        known = codes[:, c] > 0
        rows = np.flatnonzero(known)
        onehot = sp.csr_matrix(
            (np.ones(len(rows)), (rows, codes[known, c] - 1)), shape=(len(codes), int(count))
        )
        blocks.append(onehot)
    return sp.hstack(blocks, format="csr")


def fit_forest(
    study: Study,
    train: np.ndarray,
    *,
    trees: int,
    seed: int,
    threads: int,
    covariates: tuple[np.ndarray, np.ndarray] | None = None,
    features: np.ndarray | sp.csr_matrix | None = None,
):
    """The random forest fitted on the ``train`` positions' relative abundances (a regressor,
    or a classifier of class indices); with ``covariates`` (codes of every study sample,
    largest code of each) their one-hot columns too; with ``features`` (a row per study
    sample) on those rows instead."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    if features is not None:
        x_train = features[train]
    else:
        x_train = relative_abundances(study.samples, train)
    if covariates is not None:
        x_train = with_covariates(x_train, covariates[0][train], covariates[1])
    options = dict(n_estimators=trees, random_state=seed, n_jobs=usable_threads(threads))
    if not study.classes:
        return RandomForestRegressor(**options).fit(x_train, study.targets[train])
    return RandomForestClassifier(**options).fit(x_train, study.targets[train].astype(np.int64))


def fit_predict(
    study: Study,
    train: np.ndarray,
    features: sp.csr_matrix,
    *,
    trees: int = 500,
    seed: int = 42,
    threads: int = 1,
    groups: np.ndarray | None = None,
    predict_groups: np.ndarray | None = None,
    covariates: np.ndarray | None = None,
    pooled: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Each baseline fitted on the ``train`` positions of ``study``, predicting the rows of
    ``features`` (relative abundances on the study's ASVs, one row per sample to predict).
    Regression targets get each of ``CONSTANTS``, classes ``mean`` (the class frequencies).
    With ``groups`` (a group code per study sample, 0 = none) and ``predict_groups`` (one per
    row of ``features``) the group mean too; a group without training samples gets the mean.
    With ``covariates`` (level codes of every study sample, (N, C); the rows of ``features``
    are then the study's samples) ``random_forest_covariates`` too. With ``pooled`` (positions
    of more labelled samples, e.g. other studies') ``random_forest_pooled`` too: the forest
    fitted on ``train`` and them."""
    y = study.targets[train]
    forests = {"random_forest": (features, None)}
    if covariates is not None:
        levels = covariates.max(axis=0) if len(covariates) else np.zeros(covariates.shape[1])
        coded = with_covariates(features, covariates, levels)
        forests["random_forest_covariates"] = (coded, (covariates, levels))
    n = features.shape[0]
    fitted = {
        name: (fit_forest(study, train, trees=trees, seed=seed, threads=threads, covariates=c), x)
        for name, (x, c) in forests.items()
    }
    if pooled is not None:
        both = np.union1d(train, pooled)
        forest = fit_forest(study, both, trees=trees, seed=seed, threads=threads)
        fitted["random_forest_pooled"] = (forest, features)
    if not study.classes:
        out = {name: np.full(n, float(statistic(y))) for name, statistic in CONSTANTS.items()}
        out.update({name: forest_outputs(study, forest, x) for name, (forest, x) in fitted.items()})
        if groups is not None:
            out["group_mean"] = _group_means(y[:, None], groups[train], predict_groups)[:, 0]
        return out
    onehot = np.eye(len(study.classes))[y.astype(np.int64)]
    out = {"mean": _log(np.tile(onehot.mean(axis=0), (n, 1)))}
    out.update({name: forest_outputs(study, forest, x) for name, (forest, x) in fitted.items()})
    if groups is not None:
        out["group_mean"] = _log(_group_means(onehot, groups[train], predict_groups))
    return out


def forest_outputs(study: Study, forest, features: np.ndarray | sp.csr_matrix) -> np.ndarray:
    """A fitted forest's outputs for the rows of ``features``: values, or log-probabilities
    over the study's classes (a class absent from its training samples gets the floor)."""
    if not study.classes:
        return forest.predict(features)
    probs = np.zeros((features.shape[0], len(study.classes)))
    probs[:, forest.classes_] = forest.predict_proba(features)
    return _log(probs)


def _log(probs: np.ndarray) -> np.ndarray:
    """Log-probabilities, floored at LOG_FLOOR first: always finite."""
    return np.log(np.maximum(probs, LOG_FLOOR))


def _group_means(y: np.ndarray, train_groups: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """(len(groups), y.shape[1]): the mean of ``y``'s rows over the training samples of each
    sample's group; the mean of all rows for a group without training samples (or none, 0)."""
    codes = np.unique(train_groups[train_groups > 0])
    means = {int(c): y[train_groups == c].mean(axis=0) for c in codes}
    overall = y.mean(axis=0)
    return np.stack([means.get(int(g), overall) for g in groups]) if len(groups) else y[:0]
