"""Seeded train / validation / test assignment of samples (one split, fold k of a K-fold
partition, or a nested fraction of a split's training samples), recorded as a TSV.

With ``groups`` (one label per sample: a subject, a study) every split keeps each group whole:
no group has samples on two sides (train/val/test, and in every fold), so a test score
measures predicting for new groups, not recognising a known one."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from aam.data.reconcile import preview, printable
from aam.errors import InputError
from aam.runtime.atomic import atomic_output

SPLITS = ("train", "val", "test")
# The label of the samples a learning-curve point leaves out (``nested_split``): read by every
# command, trained on and predicted by none.
UNUSED = "unused"
MIN_TRAIN = 2  # training samples a split must leave (the UniFrac loss and target scaling: pairs)
_HEADER = ("sample_id", "split")
_MAKE_SPLIT = "create it with `aam split`"
_LAYOUT = f"expected a header line sample_id<TAB>split, then one line per sample; {_MAKE_SPLIT}"


def make_split(
    sample_ids: Sequence[str],
    *,
    val_fraction: float,
    test_fraction: float,
    seed: int,
    groups: Sequence[str] | None = None,
    test_group: str | None = None,
    classes: Sequence[str] | None = None,
) -> pd.Series:
    """Split name per sample ID, from a seeded permutation (index: sample_id, name: split).

    With ``groups`` (a label per sample) whole groups are assigned (``grouped_labels``): the
    fractions are met as closely as whole groups allow, and with ``classes`` (a classifier's
    label per sample) each side's class balance as close to the whole's (stratified). With
    ``test_group`` too (leave one group out), that group's samples are the test samples and
    ``val_fraction`` of the others, whole groups, are validation samples (``test_fraction``
    is not used). Without ``groups`` the samples are permuted (``classes`` not used)."""
    for name, value in (("--val-fraction", val_fraction), ("--test-fraction", test_fraction)):
        if not 0.0 <= value < 1.0:
            raise InputError(f"{name} {value}: must be in [0, 1)")
    n = len(sample_ids)
    if test_group is not None and groups is None:
        raise InputError(f"--test-group {test_group}: needs --group-column, the groups' column")
    if test_group is not None:
        return _left_out(
            sample_ids, list(map(str, groups)), test_group, val_fraction, seed, classes
        )
    n_test = int(round(test_fraction * n))
    n_val = int(round(val_fraction * n))
    if n - n_test - n_val < 2:
        raise InputError(
            f"{n} samples leave {n - n_test - n_val} for training after the validation and test "
            "fractions; lower --val-fraction/--test-fraction or add samples"
        )
    if groups is not None:
        sizes = {"test": n_test, "val": n_val, "train": n - n_test - n_val}
        labels = grouped_labels(list(map(str, groups)), sizes, seed, classes)
    else:
        order = np.random.default_rng(seed).permutation(n)
        labels = np.empty(n, dtype=object)
        labels[order[:n_test]] = "test"
        labels[order[n_test : n_test + n_val]] = "val"
        labels[order[n_test + n_val :]] = "train"
    return pd.Series(labels, index=pd.Index(list(sample_ids), name="sample_id"), name="split")


def grouped_labels(
    groups: Sequence[str],
    sizes: Mapping[str, int],
    seed: int,
    classes: Sequence[str] | None = None,
) -> np.ndarray:
    """A part (a key of ``sizes``) per sample, each group's samples in one part: the groups in
    a seeded order, each to the part whose distance from its size (relative to that size) it
    shortens most, so the parts' sizes come close to ``sizes`` as whole groups allow.

    With ``classes`` (a label per sample) the distance is summed over the classes, from each
    part's share of each class, then shortened further by swapping groups between parts:
    every part's class balance comes close to the whole's as whole groups allow (stratified,
    like scikit-learn's StratifiedGroupKFold for parts of unequal sizes). Where that leaves a
    part empty, the draw by sizes alone is kept (a part then may hold one class).
    InputError where a part asked for samples gets none, or training fewer than MIN_TRAIN."""
    names, index = np.unique(np.asarray(groups, dtype=str), return_inverse=True)
    label_of = np.zeros(len(index), dtype=np.int64)
    if classes is not None:
        label_of = np.unique(np.asarray(classes, dtype=str), return_inverse=True)[1]
    counts = np.zeros((len(names), label_of.max(initial=0) + 1), dtype=np.int64)
    np.add.at(counts, (index, label_of), 1)  # samples per group and class
    parts = [part for part, size in sizes.items() if size > 0]
    wanted = np.array([sizes[part] for part in parts], dtype=np.float64)
    chosen = _assigned(counts, wanted, seed)
    if classes is not None:
        _swap(chosen, counts, wanted)
        if len(np.unique(chosen)) < len(parts):
            chosen = _assigned(counts.sum(axis=1, keepdims=True), wanted, seed)
    totals = np.bincount(chosen, counts.sum(axis=1), len(parts)).astype(int)
    got = dict(zip(parts, totals.tolist(), strict=True))
    empty = [part for part in parts if got[part] == 0]
    if empty or got.get("train", 0) < MIN_TRAIN:
        short = " and ".join(empty or ["enough train"])
        shown = ", ".join(f"{part} {n}" for part, n in got.items())
        raise InputError(
            f"{len(names)} group(s) of {len(groups)} samples cannot give {short} samples in "
            f"whole groups ({shown}); lower --val-fraction/--test-fraction, or group by a column "
            "with more groups"
        )
    return np.asarray(parts, dtype=object)[chosen][index]


def _target(counts: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Samples per part and class that parts of ``wanted`` sizes hold in the classes'
    proportions (``counts``: samples per group and class)."""
    return wanted[:, None] * counts.sum(axis=0) / counts.sum()


def _assigned(counts: np.ndarray, wanted: np.ndarray, seed: int) -> np.ndarray:
    """A part per group (``counts``: its samples per class): the groups in a seeded order, each
    to the part whose distance from ``_target`` (summed over the classes, relative to the
    part's ``wanted`` size) it shortens most."""
    target, filled = _target(counts, wanted), np.zeros((len(wanted), counts.shape[1]))
    chosen = np.empty(len(counts), dtype=np.int64)
    for group in np.random.default_rng(seed).permutation(len(counts)):
        left = target - filled
        gain = (np.abs(left - counts[group]) - np.abs(left)).sum(axis=1) / wanted
        chosen[group] = int(np.argmin(gain))
        filled[chosen[group]] += counts[group]
    return chosen


def _swap(chosen: np.ndarray, counts: np.ndarray, wanted: np.ndarray) -> None:
    """Swap groups between parts (``chosen``, a part per group, changed in place) while a swap
    shortens the parts' distance from ``_target``: the best swap first, of groups that differ
    in their samples per class (``counts``; the first group of equal ones)."""
    target, filled = _target(counts, wanted), np.zeros((len(wanted), counts.shape[1]))
    np.add.at(filled, chosen, counts)
    for _ in range(len(chosen)):
        best, pick = 0.0, None
        for p, q in combinations(range(len(wanted)), 2):
            here, there = np.flatnonzero(chosen == p), np.flatnonzero(chosen == q)
            kinds_p, first_p = np.unique(counts[here], axis=0, return_index=True)
            kinds_q, first_q = np.unique(counts[there], axis=0, return_index=True)
            moved = kinds_q[None, :, :] - kinds_p[:, None, :]  # what part p gains by a swap
            off_p, off_q = filled[p] - target[p], filled[q] - target[q]
            change = (np.abs(off_p + moved) - np.abs(off_p)).sum(axis=2) / wanted[p]
            change += (np.abs(off_q - moved) - np.abs(off_q)).sum(axis=2) / wanted[q]
            if change.size and change.min() < best - 1e-9:
                i, j = np.unravel_index(np.argmin(change), change.shape)
                best, pick = change[i, j], (here[first_p[i]], there[first_q[j]])
        if pick is None:
            return
        a, b = pick
        filled[chosen[a]] += counts[b] - counts[a]
        filled[chosen[b]] += counts[a] - counts[b]
        chosen[a], chosen[b] = chosen[b], chosen[a]


def _left_out(
    sample_ids: Sequence[str],
    groups: list[str],
    test_group: str,
    val_fraction: float,
    seed: int,
    classes: Sequence[str] | None,
) -> pd.Series:
    """Leave one group out: ``test_group``'s samples test, whole other groups val and train
    (stratified by ``classes`` where given)."""
    test = np.asarray(groups) == test_group
    if not test.any():
        known = ", ".join(sorted(set(groups))[:5])
        raise InputError(f"--test-group {test_group}: no sample of that group (groups: {known})")
    labels = np.full(len(groups), "test", dtype=object)
    rest = [g for g, t in zip(groups, test, strict=True) if not t]
    n_val = int(round(val_fraction * len(rest)))
    sizes = {"val": n_val, "train": len(rest) - n_val}
    kept = None if classes is None else np.asarray(classes, dtype=str)[~test]
    labels[~test] = grouped_labels(rest, sizes, seed, kept)
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
    groups: Sequence[str] | None = None,
) -> pd.Series:
    """Fold ``fold`` (1..``folds``) of a seeded K-fold partition as a split: that fold's samples
    ``test``, a seeded ``val_fraction`` of the others ``val``, the rest ``train``. The test
    parts of folds 1..K partition ``sample_ids``; with ``classes`` (one label per sample) every
    fold holds each class in proportion (stratified). With ``groups`` every group is whole in
    each fold's test, val and train (folds as many as the groups: leave one group out), and
    with ``classes`` too the val groups are drawn stratified (``grouped_labels``)."""
    from sklearn.model_selection import KFold, StratifiedKFold

    counts = None if classes is None else pd.Series(list(classes)).value_counts().to_dict()
    check_folds(folds, len(sample_ids), counts, "--folds")
    if not 1 <= fold <= folds:
        raise InputError(f"--fold {fold}: must be in 1..{folds} (--folds {folds})")
    if not 0.0 <= val_fraction < 1.0:
        raise InputError(f"--val-fraction {val_fraction}: must be in [0, 1)")
    if groups is not None:
        return _grouped_fold(sample_ids, folds, fold, val_fraction, seed, classes, groups)
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


def _grouped_fold(
    sample_ids: Sequence[str],
    folds: int,
    fold: int,
    val_fraction: float,
    seed: int,
    classes: Sequence[str] | None,
    groups: Sequence[str],
) -> pd.Series:
    """``make_fold_split`` keeping each group whole (scikit-learn's GroupKFold, or
    StratifiedGroupKFold for classes, shuffled by ``seed``; val: whole groups of the rest,
    stratified by classes too: ``grouped_labels``)."""
    from sklearn.model_selection import GroupKFold, StratifiedGroupKFold

    groups = np.asarray(list(map(str, groups)))
    n_groups = len(set(groups))
    if folds > n_groups:
        raise InputError(
            f"--folds {folds}: only {n_groups} group(s) (--group-column) and each fold's test "
            f"part is whole groups; {group_folds_fix(n_groups)}"
        )
    n = len(sample_ids)
    if classes is None:
        splitter = GroupKFold(folds, shuffle=True, random_state=seed)
        parts = splitter.split(np.zeros(n), groups=groups)
    else:
        splitter = StratifiedGroupKFold(folds, shuffle=True, random_state=seed)
        parts = splitter.split(np.zeros(n), list(classes), groups=groups)
    rest, test = list(parts)[fold - 1]
    n_val = int(round(val_fraction * len(rest)))
    sizes = {"val": n_val, "train": len(rest) - n_val}
    labels = np.full(n, "test", dtype=object)
    kept = None if classes is None else np.asarray(classes, dtype=str)[rest]
    labels[rest] = grouped_labels(groups[rest], sizes, seed + fold, kept)
    return pd.Series(labels, index=pd.Index(list(sample_ids), name="sample_id"), name="split")


def nested_split(split: pd.Series, *, fraction: float, seed: int) -> pd.Series:
    """A learning-curve point of ``split``: a seeded ``fraction`` of its ``train`` samples and
    of its ``val`` samples kept, the others ``unused``, ``test`` unchanged. Nested: with the same
    ``seed``, a smaller fraction keeps a subset of a larger one's samples (one seeded order per
    label, over the sample IDs sorted)."""
    if not 0.0 < fraction <= 1.0:
        raise InputError(f"--train-fraction {fraction}: must be in (0, 1]")
    nested = split.copy()
    for label in ("train", "val"):
        ids = np.sort(split.index[split == label].to_numpy(dtype=str))
        order = np.random.default_rng([seed, SPLITS.index(label)]).permutation(len(ids))
        kept = int(round(fraction * len(ids)))
        nested[ids[order[kept:]]] = UNUSED
    n_train = int((nested == "train").sum())
    if n_train < MIN_TRAIN:
        raise InputError(
            f"--train-fraction {fraction}: keeps {n_train} of the {int((split == 'train').sum())} "
            f"train samples; training needs at least {MIN_TRAIN}: use a larger fraction"
        )
    return nested


def new_study_split(
    split: pd.Series,
    *,
    size: int,
    pool_size: int,
    seed: int,
    pool_seed: int,
    val_fraction: float,
    groups: pd.Series | None = None,
) -> pd.Series:
    """A new-study point of a leave-one-group-out ``split``: its ``test`` samples (a study no
    model trained on) give ``size`` labelled samples, ``val_fraction`` of them ``val`` and the
    rest ``train``, drawn with ``seed`` from a pool of ``pool_size`` drawn with ``pool_seed``.
    The study's samples outside the pool stay ``test`` (the same for every size and seed); the
    pool's other samples and every other sample are ``unused``. Nested: with one ``seed`` a
    smaller size draws a subset of a larger one's samples. With ``groups`` (sample_id -> a
    subject) every draw takes whole groups, its size as close to the asked one as they allow,
    so no subject has samples on two sides.

    The test samples are fixed, so the labelled ones come from the pool alone: at ``size ==
    pool_size`` every seed labels the whole pool, and the seeds differ only in which of those
    samples validate (``[seed, size]``'s draw) and in what the caller seeds with them (the
    fine-tuning). Only a pool larger than the size redraws the labelled samples themselves,
    at the cost of test samples; `aam new-study` counts the distinct draws of each size."""
    if not 0 < size <= pool_size:
        raise InputError(f"--new-study-size {size}: must be in 1..--pool-size ({pool_size})")
    if not 0.0 < val_fraction < 1.0:
        raise InputError(f"--val-fraction {val_fraction}: must be in (0, 1) for a new study")
    study = split.index[split == "test"].to_numpy(dtype=str)
    labels = groups.reindex(study).astype(str).to_numpy() if groups is not None else study
    names, index = np.unique(labels, return_inverse=True)
    counts = np.bincount(index, minlength=len(names))
    pool = _closest(np.random.default_rng(pool_seed).permutation(len(names)), counts, pool_size)
    if len(pool) == len(names):
        raise InputError(
            f"--pool-size {pool_size}: the new study's {len(study)} samples ({len(names)} "
            "groups) leave none to test; lower --pool-size"
        )
    drawn = _closest(pool[np.random.default_rng(seed).permutation(len(pool))], counts, size)
    n_labelled = int(counts[drawn].sum())
    order = drawn[np.random.default_rng([seed, size]).permutation(len(drawn))]
    val = _closest(order, counts, max(1, int(round(val_fraction * n_labelled))))
    n_train = n_labelled - int(counts[val].sum())
    if len(val) == len(drawn) or n_train < MIN_TRAIN:
        raise InputError(
            f"--new-study-size {size}: {n_labelled} labelled samples in {len(drawn)} group(s) "
            f"cannot give validation and {MIN_TRAIN} train samples in whole groups; draw more"
        )
    point = pd.Series(UNUSED, index=split.index, name="split", dtype=object)
    in_pool = np.isin(index, pool)
    point[study[~in_pool]] = "test"
    point[study[np.isin(index, drawn)]] = "train"
    point[study[np.isin(index, val)]] = "val"
    return point


def _closest(order: np.ndarray, counts: np.ndarray, size: int) -> np.ndarray:
    """The shortest prefix of the groups ``order`` (at least one) whose samples (``counts``)
    come closest to ``size``."""
    totals = np.cumsum(counts[order])
    return order[: int(np.argmin(np.abs(totals - size))) + 1]


def write_split(path: str | Path, split: pd.Series) -> None:
    """Write ``sample_id<TAB>split`` atomically."""
    with atomic_output(path) as tmp:
        split.to_frame().to_csv(tmp, sep="\t")


def read_split(path: str | Path) -> pd.Series:
    """Read a ``sample_id<TAB>split`` file (``write_split``'s layout; cells are stripped, blank
    lines skipped). InputError, one line naming the file, the line and the fix, for a missing,
    unreadable or empty file, another header, a blank sample ID or label, a sample listed twice
    or a label other than train/val/test (or ``unused``: a learning-curve point's)."""
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "not found"
        raise InputError(f"{path}: split file {what}; {_MAKE_SPLIT}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        reason = " ".join(str(err).split())[:120]
        raise InputError(f"{path}: not a split table ({reason}); {_MAKE_SPLIT}") from None
    if not text.strip():
        raise InputError(f"{path}: not a split table (the file is empty); {_LAYOUT}")
    try:
        frame = pd.read_csv(
            io.StringIO(text),
            sep="\t",
            dtype=str,
            keep_default_na=False,  # a sample may be called NA
            skip_blank_lines=False,  # keeps row k on file line k + 2
            header=None,
        )
    except (pd.errors.ParserError, ValueError) as err:
        reason = " ".join(str(err).split())[:120]
        raise InputError(f"{path}: not a split table ({reason}); {_LAYOUT}") from None
    frame = frame.fillna("").apply(lambda column: column.str.strip())
    frame.index = frame.index + 1  # file line numbers
    frame = frame[(frame != "").any(axis=1)]
    header, rows = list(frame.iloc[0]), frame.iloc[1:]
    if header != list(_HEADER):
        if len(header) == 2 and header[1] in SPLITS:
            raise InputError(
                f"{path}: no header line (line {frame.index[0]} is a sample: "
                f"{printable(header[0])}, {header[1]}); add `sample_id<TAB>split` as the first "
                "line"
            )
        raise InputError(
            f"{path}: the header is {preview(header)}, not sample_id<TAB>split; fix the first "
            f"line, or {_MAKE_SPLIT}"
        )
    if rows.empty:
        raise InputError(
            f"{path}: no sample lines under the header; add one line sample_id<TAB>split per "
            f"sample (split: {', '.join(SPLITS)}), or {_MAKE_SPLIT}"
        )
    ids, labels = rows.iloc[:, 0], rows.iloc[:, 1]
    for problem, bad in (("a blank sample ID", ids == ""), ("a blank split", labels == "")):
        if bad.any():
            lines = rows.index[bad.to_numpy()]
            raise InputError(
                f"{path}: {len(lines)} line(s) with {problem} (line {preview(lines, 3)}); give "
                f"every line a sample ID and its split ({', '.join(SPLITS)}), or delete the line"
            )
    repeated = ids[ids.duplicated(keep=False)]
    if len(repeated):
        sample = repeated.iloc[0]
        lines = repeated.index[(repeated == sample).to_numpy()]
        raise InputError(
            f"{path}: sample {printable(sample)} is listed {len(lines)} times (lines "
            f"{preview(lines, 3)}; {repeated.nunique()} sample(s) repeated); keep one line per "
            "sample"
        )
    unknown = ~labels.isin([*SPLITS, UNUSED])
    if unknown.any():
        line = rows.index[unknown.to_numpy()][0]
        raise InputError(
            f"{path}: line {line}, sample {printable(ids[line])}: unknown split "
            f"{labels[line]!r} ({int(unknown.sum())} line(s) with an unknown split); use one of "
            f"{', '.join(SPLITS)}"
        )
    return pd.Series(
        labels.to_numpy(), index=pd.Index(ids.to_numpy(), name="sample_id"), name="split"
    )


def given_split(labels: pd.Series, sample_ids: Sequence[str], source: str) -> pd.Series:
    """A user's split of ``sample_ids`` from ``labels`` (sample_id -> train/val/test, or
    ``unused`` for a sample left out, e.g. a metadata column or a new-study point's split):
    InputError naming ``source`` for an unknown label, a sample without a label or no train
    sample. Labels of other samples are ignored."""
    labels = labels.dropna().astype(str).str.strip()
    unknown = sorted(set(labels) - {*SPLITS, UNUSED})
    if unknown:
        raise InputError(
            f"{source}: unknown split label(s) {unknown[:5]}; use {', '.join(SPLITS)} or {UNUSED}"
        )
    chosen = labels.reindex(list(sample_ids))
    missing = chosen.index[chosen.isna()]
    if len(missing):
        raise InputError(
            f"{source}: no split label for {len(missing)} of {len(chosen)} samples with a "
            f"target (e.g. {', '.join(map(str, missing[:3]))}); label every sample "
            f"{'/'.join(SPLITS)} (or {UNUSED} to leave it out)"
        )
    n_train = int((chosen == "train").sum())
    if n_train < MIN_TRAIN:
        some = "no sample is" if n_train == 0 else f"only {n_train} sample is"
        raise InputError(
            f"{source}: {some} labelled train ({split_counts(chosen)} of the {len(chosen)} "
            f"samples with a target); training needs at least {MIN_TRAIN}: label more samples "
            "train"
        )
    chosen.index.name, chosen.name = "sample_id", "split"
    return chosen


def group_folds_fix(n_groups: int) -> str:
    """The fix for more folds than ``n_groups`` groups: a fold count that can work (2 or
    more), or, with fewer than 2 groups, a column with more."""
    if n_groups >= 2:
        return f"use at most {n_groups} folds"
    return "group by a column with 2 or more groups (each fold's test part is one of them)"


def split_counts(labels: pd.Series) -> str:
    """``train N, val N, test N`` (and ``unused N`` where there are such): how many of
    ``labels`` are in each split."""
    names = [*SPLITS, UNUSED] if (labels == UNUSED).any() else SPLITS
    return ", ".join(f"{name} {int((labels == name).sum())}" for name in names)


def one_class_sides(split: pd.Series, classes: pd.Series) -> dict[str, tuple[str, int]]:
    """The sides of ``split`` (train, val, test) whose samples all have one class while the
    split's samples have several (``classes``: sample_id -> class label; samples without one
    are not counted): side -> (that class, the side's samples). Such a side's AUC is undefined
    and its accuracy scores one class."""
    labels = _side_classes(split, classes)
    if labels.nunique() < 2:
        return {}
    sides = {}
    for side, held in labels.groupby(split.reindex(labels.index), sort=False):
        if held.nunique() == 1:
            sides[str(side)] = (str(held.iloc[0]), len(held))
    return dict(sorted(sides.items(), key=lambda item: SPLITS.index(item[0])))


def one_class_warnings(
    split: pd.Series, classes: pd.Series, source: str, groups: pd.Series | None = None
) -> list[str]:
    """A line naming ``source`` (the split) per side ``one_class_sides`` finds, with its fix
    (``_one_class_fix``; ``groups``: sample_id -> group, where the split keeps groups whole)."""
    labels = _side_classes(split, classes)
    return [
        f"{source}: {side} holds one class ({label!r}, {n} samples) of the "
        f"{labels.nunique()} classes: its AUC is undefined and its accuracy scores that class "
        f"alone; {_one_class_fix(split, labels, side, label, groups)}"
        for side, (label, n) in one_class_sides(split, classes).items()
    ]


def _one_class_fix(
    split: pd.Series, labels: pd.Series, side: str, label: str, groups: pd.Series | None
) -> str:
    """What gives ``side`` (holding class ``label`` only) another class: more groups on it
    where it is one group, more groups of a class that has fewer groups than the split has
    sides (whole groups cannot put it on every side), else another draw or labelling."""
    if groups is not None:
        groups = groups.reindex(labels.index)
        sides = split.reindex(labels.index)
        held = groups[sides == side].unique()
        if len(held) == 1:
            return (
                f"it is one group ({held[0]}, --group-column): read its scores pooled with "
                "other groups' (cross-validation) or give it more groups"
            )
        spread = groups.groupby(labels).nunique()
        few = spread[(spread < sides.nunique()) & (spread.index != label)]
        if len(few):
            return (
                f"class {few.index[0]!r} has {few.iloc[0]} group(s) (--group-column) and whole "
                f"groups cannot put it on all {sides.nunique()} sides: add samples of more "
                "groups of that class"
            )
    return "draw another split (--seed, a larger fraction) or label samples of each class"


def _side_classes(split: pd.Series, classes: pd.Series) -> pd.Series:
    """The class label (str) of each sample of ``split`` that is train, val or test and has
    one in ``classes``."""
    labels = classes.reindex(split.index)
    return labels[split.isin(SPLITS) & labels.notna()].astype(str)
