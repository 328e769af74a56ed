"""What a classifier's test score rests on (`aam predict`'s metrics.json): each class's
precision, recall and F1 (the macro F1 is the mean of the F1s), how many samples of each class
every split holds, and, where the split kept groups whole (people), how every model did on each
test group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from aam.data.split import SPLITS
from aam.training.bootstrap import bootstrap_intervals

CLASS_METRICS = {"precision": "precision", "recall": "recall", "f1": "F1"}  # key: a reader's name


def class_scores(log_probs: np.ndarray, truth: np.ndarray, n_classes: int) -> dict[str, float]:
    """Each class's precision, recall and F1 of the most probable class, keyed
    ``<metric>.<class index>``; NaN where undefined (precision of a class never predicted,
    recall of one absent, F1 of one neither)."""
    predicted = log_probs.argmax(axis=1)
    hits = np.bincount(truth[predicted == truth], minlength=n_classes).astype(np.float64)
    called = np.bincount(predicted, minlength=n_classes).astype(np.float64)
    present = np.bincount(truth, minlength=n_classes).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = {
            "precision": hits / called,
            "recall": hits / present,
            "f1": 2 * hits / (called + present),
        }
    return {f"{m}.{k}": float(values[m][k]) for m in CLASS_METRICS for k in range(n_classes)}


def per_class(
    models: Mapping[str, np.ndarray],
    truth: np.ndarray,
    classes: Sequence[str],
    units: np.ndarray | None = None,
) -> list[dict]:
    """metrics.json ``per_class``: per class (most test samples first) its test samples ``n``,
    each model's precision, recall and F1 (``models``: log-probabilities of the scored samples;
    ``truth``: their class indices) and their 95% bootstrap intervals over the draws of the
    headline metrics (whole ``units`` where given)."""
    k = len(classes)
    scored, intervals = {}, {}
    for name, values in models.items():
        scored[name] = class_scores(values, truth, k)
        intervals[name] = bootstrap_intervals(
            lambda idx, v=values: class_scores(v[idx], truth[idx], k), len(truth), units
        )
    counts = np.bincount(truth, minlength=k)
    return [
        {
            "class": classes[c],
            "n": int(counts[c]),
            **{name: {m: scored[name][f"{m}.{c}"] for m in CLASS_METRICS} for name in models},
            "intervals": {
                name: {m: intervals[name][f"{m}.{c}"] for m in CLASS_METRICS} for name in models
            },
        }
        for c in sorted(range(k), key=lambda c: (-counts[c], c))
    ]


def class_balance(split: pd.Series, truth: pd.Series, classes: Sequence[str]) -> dict:
    """metrics.json ``class_balance``: the samples of each class in each split (``split`` and
    ``truth``: by sample; the model's ``classes`` first, then any other, each split's zeros
    kept), train, val and test in that order; samples without a class are not counted."""
    labels = truth.reindex(split.index)
    known = labels.notna()
    others = sorted(set(labels[known].astype(str)) - set(classes))
    order = [*classes, *others]
    names = [s for s in SPLITS if (split == s).any()]
    names += sorted(set(split.dropna().astype(str)) - set(SPLITS))
    return {
        name: {
            c: int(v)
            for c, v in labels[known & (split == name)]
            .astype(str)
            .value_counts()
            .reindex(order, fill_value=0)
            .items()
        }
        for name in names
    }


def one_class_splits(balance: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The validation and test splits of ``class_balance`` whose samples are all of one
    class: their accuracy says little and their AUC is undefined."""
    return [
        name
        for name in ("val", "test")
        if name in balance and sum(n > 0 for n in balance[name].values()) == 1
    ]


def by_test_group(
    models: Mapping[str, np.ndarray], truth: np.ndarray, groups: np.ndarray, classes: Sequence[str]
) -> list[dict]:
    """metrics.json ``by_test_group``: per test group (``groups``: a label per scored sample),
    its samples ``n``, their true classes (``true``: class -> samples) and each model's
    accuracy and mean probability of the true class (``models``: log-probabilities), groups by
    their main true class, then name."""
    rows = []
    for group in sorted(set(groups.tolist())):
        idx = np.flatnonzero(groups == group)
        counts = np.bincount(truth[idx], minlength=len(classes))
        scores = {
            name: {
                "accuracy": float((values[idx].argmax(axis=1) == truth[idx]).mean()),
                "true_class_probability": float(np.exp(values[idx, truth[idx]]).mean()),
            }
            for name, values in models.items()
        }
        true = {classes[c]: int(counts[c]) for c in np.argsort(-counts, kind="stable") if counts[c]}
        rows.append({"group": group, "n": len(idx), "true": true, **scores})
    return sorted(rows, key=lambda r: (classes.index(next(iter(r["true"]))), r["group"]))
