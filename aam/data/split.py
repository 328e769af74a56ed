"""Seeded train / validation / test assignment of samples, recorded as a TSV."""

from __future__ import annotations

from collections.abc import Sequence
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
