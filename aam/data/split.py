"""Seeded train / validation / test assignment of samples (one split, or fold k of a K-fold
partition), recorded as a TSV."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from aam.atomic import atomic_output
from aam.errors import InputError

SPLITS = ("train", "val", "test")


def make_split(
    sample_ids: Sequence[str], *, val_fraction: float, test_fraction: float, seed: int
) -> pd.Series:
    """Split name per sample ID, from a seeded permutation (index: sample_id, name: split)."""
    for name, value in (("--val-fraction", val_fraction), ("--test-fraction", test_fraction)):
        if not 0.0 <= value < 1.0:
            raise InputError(f"{name} {value}: must be in [0, 1)")
    n = len(sample_ids)
    n_test = int(round(test_fraction * n))
    n_val = int(round(val_fraction * n))
    if n - n_test - n_val < 2:
        raise InputError(
            f"{n} samples leave {n - n_test - n_val} for training after the validation and test "
            "fractions; lower --val-fraction/--test-fraction or add samples"
        )
    order = np.random.default_rng(seed).permutation(n)
    labels = np.empty(n, dtype=object)
    labels[order[:n_test]] = "test"
    labels[order[n_test : n_test + n_val]] = "val"
    labels[order[n_test + n_val :]] = "train"
    return pd.Series(labels, index=pd.Index(list(sample_ids), name="sample_id"), name="split")


def check_folds(
    folds: int, n_samples: int, class_counts: Mapping[str, int] | None, where: str
) -> None:
    """InputError naming ``where`` when ``folds`` cannot partition the samples: fewer than 2,
    more than the samples, or (classes) more than the samples of the smallest class, which
    would leave a fold's test part without that class."""
    if folds < 2:
        raise InputError(f"{where}: {folds} folds; cross-validation needs at least 2")
    if folds > n_samples:
        raise InputError(
            f"{where}: {folds} folds but only {n_samples} samples; use at most {n_samples} folds"
        )
    if class_counts:
        label, count = min(class_counts.items(), key=lambda item: (item[1], item[0]))
        if folds > count:
            fix = f"use at most {count} folds" if count >= 2 else "drop that class"
            raise InputError(
                f"{where}: {folds} folds but class {label!r} has only {count} sample(s) (every "
                f"fold's test part needs every class); {fix} or merge the rare classes"
            )


def make_fold_split(
    sample_ids: Sequence[str],
    *,
    folds: int,
    fold: int,
    val_fraction: float,
    seed: int,
    classes: Sequence[str] | None = None,
) -> pd.Series:
    """Fold ``fold`` (1..``folds``) of a seeded K-fold partition as a split: that fold's samples
    ``test``, a seeded ``val_fraction`` of the others ``val``, the rest ``train``. The test
    parts of folds 1..K partition ``sample_ids``; with ``classes`` (one label per sample) every
    fold holds each class in proportion (stratified)."""
    from sklearn.model_selection import KFold, StratifiedKFold

    counts = None if classes is None else pd.Series(list(classes)).value_counts().to_dict()
    check_folds(folds, len(sample_ids), counts, "--folds")
    if not 1 <= fold <= folds:
        raise InputError(f"--fold {fold}: must be in 1..{folds} (--folds {folds})")
    if not 0.0 <= val_fraction < 1.0:
        raise InputError(f"--val-fraction {val_fraction}: must be in [0, 1)")
    n = len(sample_ids)
    if classes is None:
        parts = KFold(folds, shuffle=True, random_state=seed).split(np.zeros(n))
    else:
        parts = StratifiedKFold(folds, shuffle=True, random_state=seed).split(
            np.zeros(n), list(classes)
        )
    rest, test = list(parts)[fold - 1]
    n_val = int(round(val_fraction * len(rest)))
    if len(rest) - n_val < 2:
        raise InputError(
            f"fold {fold} of {folds}: {len(rest) - n_val} training samples after the validation "
            "fraction; lower --val-fraction or --folds, or add samples"
        )
    val = np.random.default_rng([seed, fold]).permutation(rest)[:n_val]
    labels = np.full(n, "train", dtype=object)
    labels[val] = "val"
    labels[test] = "test"
    return pd.Series(labels, index=pd.Index(list(sample_ids), name="sample_id"), name="split")


def write_split(path: str | Path, split: pd.Series) -> None:
    """Write ``sample_id<TAB>split`` atomically."""
    with atomic_output(path) as tmp:
        split.to_frame().to_csv(tmp, sep="\t")


def read_split(path: str | Path) -> pd.Series:
    """Read a file written by ``write_split``; unknown split names are an error."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: split file not found; create it with `aam split`")
    frame = pd.read_csv(path, sep="\t", dtype=str)
    if list(frame.columns) != ["sample_id", "split"]:
        raise InputError(
            f"{path}: columns are {list(frame.columns)}, expected ['sample_id', 'split']; "
            "create it with `aam split`"
        )
    bad = sorted(set(frame["split"]) - set(SPLITS))
    if bad:
        raise InputError(f"{path}: unknown split name(s) {bad}; use {', '.join(SPLITS)}")
    return frame.set_index("sample_id")["split"]


def given_split(labels: pd.Series, sample_ids: Sequence[str], source: str) -> pd.Series:
    """A user's split of ``sample_ids`` from ``labels`` (sample_id -> train/val/test, e.g. a
    metadata column): InputError naming ``source`` for an unknown label, a sample without a
    label or no train sample. Labels of other samples are ignored."""
    labels = labels.dropna().astype(str).str.strip()
    unknown = sorted(set(labels) - set(SPLITS))
    if unknown:
        raise InputError(f"{source}: unknown split label(s) {unknown[:5]}; use {', '.join(SPLITS)}")
    chosen = labels.reindex(list(sample_ids))
    missing = chosen.index[chosen.isna()]
    if len(missing):
        raise InputError(
            f"{source}: no split label for {len(missing)} of {len(chosen)} samples with a "
            f"target (e.g. {', '.join(map(str, missing[:3]))}); label every sample "
            f"{'/'.join(SPLITS)}"
        )
    if not (chosen == "train").any():
        raise InputError(f"{source}: no sample is labelled train; label the training samples")
    chosen.index.name, chosen.name = "sample_id", "split"
    return chosen
