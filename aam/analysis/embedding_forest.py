"""Forests on AAM's sample embeddings: the random forest of `aam baselines`, reading the
pretrained base's sample embedding of each sample instead of (or beside) its relative
abundances."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from aam.analysis.baselines import fit_forest, forest_outputs, relative_abundances
from aam.training.inputs.study import Study

EMBEDDING = "AAM embedding"  # the input the forests on embeddings read (inputs column)


def embedding_forests(
    study: Study,
    train: np.ndarray,
    embeddings: np.ndarray,
    *,
    trees: int = 500,
    seed: int = 42,
    threads: int = 1,
) -> dict[str, np.ndarray]:
    """``random_forest_embeddings`` (on ``embeddings``, a row per study sample) and
    ``random_forest_embeddings_abundances`` (on them beside the relative abundances), fitted
    on the ``train`` positions, each predicting every study sample (values, or
    log-probabilities over the classes)."""
    abundances = relative_abundances(study.samples, np.arange(len(embeddings)))
    features = {
        "random_forest_embeddings": embeddings,
        "random_forest_embeddings_abundances": sp.hstack(
            [sp.csr_matrix(embeddings), abundances], format="csr"
        ),
    }
    out = {}
    for name, x in features.items():
        forest = fit_forest(study, train, trees=trees, seed=seed, threads=threads, features=x)
        out[name] = forest_outputs(study, forest, x)
    return out
