"""Simple baselines fitted on a study's training samples: the mean predictor (the majority
class's frequencies for categorical targets) and a random forest on relative abundances.

Predictions take the form of the model's: target units for regression, log-probabilities over
``study.classes`` for classes, so the same metrics apply to all of them.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from aam.data.batching import SampleSet
from aam.predictions import LOG_FLOOR
from aam.training.study import Study

BASELINES = ("mean", "random_forest")


def relative_abundances(samples: SampleSet, positions: np.ndarray) -> sp.csr_matrix:
    """(len(positions), n_asvs) reads / sample total of the chosen samples."""
    lengths = np.diff(samples.asv_ptr)
    totals = np.add.reduceat(samples.counts, samples.asv_ptr[:-1]).astype(np.float64)
    matrix = sp.csr_matrix(
        (samples.counts / np.repeat(totals, lengths), samples.asv_idx, samples.asv_ptr),
        shape=(len(samples), len(samples.tokens)),
    )
    return matrix[positions]


def fit_predict(
    study: Study,
    train: np.ndarray,
    positions: np.ndarray,
    *,
    trees: int = 500,
    seed: int = 42,
    threads: int = 1,
) -> dict[str, np.ndarray]:
    """Each baseline fitted on ``train`` positions, predicting ``positions``."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    y = study.targets[train]
    x_train = relative_abundances(study.samples, train)
    x = relative_abundances(study.samples, positions)
    options = dict(n_estimators=trees, random_state=seed, n_jobs=threads)
    if not study.classes:
        forest = RandomForestRegressor(**options).fit(x_train, y)
        return {
            "mean": np.full(len(positions), float(np.mean(y))),
            "random_forest": forest.predict(x),
        }
    n_classes = len(study.classes)
    labels = y.astype(np.int64)
    prior = np.bincount(labels, minlength=n_classes) / len(labels)
    forest = RandomForestClassifier(**options).fit(x_train, labels)
    probs = np.zeros((len(positions), n_classes))
    probs[:, forest.classes_] = forest.predict_proba(x)  # classes absent from train stay 0
    return {
        "mean": np.log(np.maximum(np.tile(prior, (len(positions), 1)), LOG_FLOOR)),
        "random_forest": np.log(np.maximum(probs, LOG_FLOOR)),
    }
