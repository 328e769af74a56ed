"""A new study with few labels: each point's model fine-tuned on ``size`` labelled samples of a
study no model trained on (`aam split --new-study-size`), scored with the baselines fitted on
the same samples on the study's other samples, the same test samples for every point. A size's
error per test sample is averaged over its seeds (draws and fine-tunings), so sizes compare on
one footing; intervals resample the test subjects (``bootstrap_draws``). Each size says how many
distinct labelled sets its seeds drew (``draws``): at a size equal to the pool every seed labels
the whole pool, one draw whatever the seeds (``aam.data.split.new_study_split``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from aam.analysis.figures import metric_label, title
from aam.analysis.learning_curve import interval_lines
from aam.analysis.prediction_tables import SCRATCH, model_label, read_model_predictions
from aam.data.split import read_split
from aam.errors import InputError
from aam.runtime.figures import pyplot
from aam.training.bootstrap import bootstrap_draws

MODEL = "model"  # AAM fine-tuned from the encoder pretrained on the other studies
# (a, b) -> column a_minus_b: the comparisons a reader asks of a new study
PAIRS = (
    (MODEL, SCRATCH),
    (MODEL, "random_forest"),
    (MODEL, "random_forest_pooled"),
    (MODEL, "random_forest_embeddings"),
    (MODEL, "mean"),
    (MODEL, "median"),
)
FIRST_COLUMNS = ["size", "seeds", "draws", "n_train", "n_val", "n_test"]


def point_errors(
    split_path: Path,
    baselines_paths: Sequence[Path],
    predictions_path: Path,
    scratch_path: Path | None,
) -> tuple[pd.Series, dict[str, np.ndarray], dict[str, int], frozenset[str]]:
    """One point's test truth (sample_id -> target, sorted), each model's absolute errors on
    those samples (``model``, ``scratch`` where given, then the baselines of each file of
    ``baselines_paths``), its counts and its labelled (train and val) samples."""
    split = read_split(split_path)
    test = sorted(split.index[split == "test"])
    truth, predicted = _predictions(predictions_path, test)
    errors = {MODEL: np.abs(predicted - truth)}
    if scratch_path is not None:
        theirs, scratch = _predictions(scratch_path, test)
        if not np.array_equal(theirs, truth):
            raise InputError(f"{scratch_path}: other true targets than {predictions_path}")
        errors[SCRATCH] = np.abs(scratch - truth)
    for path in baselines_paths:
        for name, values in read_model_predictions(path, test, []).items():
            errors[name] = np.abs(values - truth)
    for name, values in errors.items():
        if not np.isfinite(values).all():
            raise InputError(f"{predictions_path}: a non-finite {name} error; rerun its point")
    counts = {k: int((split == k).sum()) for k in ("train", "val")}
    labelled = frozenset(split.index[split.isin(["train", "val"])])
    return pd.Series(truth, index=test), errors, counts, labelled


def _predictions(path: Path, test: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The true targets and AAM's predictions of ``test`` in an `aam predict` table."""
    table = pd.read_csv(path, sep="\t", dtype={"sample_id": str}).set_index("sample_id")
    missing = sorted(set(test) - set(table.index))
    if missing or not {"prediction", "true"} <= set(table.columns):
        raise InputError(
            f"{path}: no prediction and true target for {len(missing)} test sample(s) "
            f"(e.g. {', '.join(missing[:3])}); predict the point's test split (regression)"
        )
    rows = table.loc[test]
    return rows["true"].to_numpy(np.float64), rows["prediction"].to_numpy(np.float64)


def new_study_table(
    sizes: Sequence[int],
    seeds: Sequence[int],
    splits: Sequence[Path],
    baselines: Sequence[Path],
    predictions: Sequence[Path],
    scratch: Sequence[Path] = (),
    subjects: pd.Series | None = None,
    embedding_forests: Sequence[Path] = (),
) -> pd.DataFrame:
    """One row per size, ascending: ``size, seeds``, ``draws`` (the distinct labelled sets
    of its seeds: fewer than the seeds where draws coincide, one at a size equal to the pool),
    ``n_train, n_val`` (means over the seeds), ``n_test``; each model's MAE over the test
    samples of its errors averaged over the seeds (``<model>_mae``, ``_low``/``_high``: 95%
    bootstrap interval), and the paired differences of ``PAIRS`` (``<a>_minus_<b>``, same
    bounds); ``embedding_forests``: each point's `aam embedding-forest` predictions, more
    baselines. ``subjects`` (sample_id -> subject) makes the bootstrap draws resample whole
    subjects. InputError when the points' test samples, models or
    truths differ, or the inputs' counts do not match."""
    n = len(sizes)
    if not n == len(seeds) == len(splits) == len(baselines) == len(predictions) or not n:
        raise InputError(
            f"{len(sizes)} sizes, {len(seeds)} seeds, {len(splits)} splits, {len(baselines)} "
            f"baselines, {len(predictions)} predictions: give one of each per point"
        )
    for name, given in (("from-scratch", scratch), ("embedding-forest", embedding_forests)):
        if given and len(given) != n:
            raise InputError(f"{len(given)} {name} predictions for {n} points: give one each")
    points: dict[int, list] = {}
    truth = None
    for k in range(n):
        files = [baselines[k], *([embedding_forests[k]] if embedding_forests else [])]
        found, errors, counts, labelled = point_errors(
            splits[k], files, predictions[k], scratch[k] if scratch else None
        )
        if truth is None:
            truth = found
        elif not found.index.equals(truth.index) or not np.array_equal(found, truth):
            raise InputError(
                f"{splits[k]}: other test samples than {splits[0]}; every point of a new "
                "study is tested on the same samples (one pool, --pool-size and --pool-seed)"
            )
        points.setdefault(int(sizes[k]), []).append((errors, counts, labelled))
    clusters = None
    if subjects is not None:
        clusters = subjects.reindex(truth.index).astype(str).to_numpy()
    draws = bootstrap_draws(len(truth), clusters)
    rows = []
    for size in sorted(points):
        drawn = points[size]
        models = list(drawn[0][0])
        if any(list(errors) != models for errors, _, _ in drawn):
            raise InputError(f"size {size}: its points score other models; rerun them alike")
        mean_errors = {m: np.mean([e[m] for e, _, _ in drawn], axis=0) for m in models}
        row = {
            "size": size,
            "seeds": len(drawn),
            "draws": len({labelled for _, _, labelled in drawn}),
            "n_train": np.mean([c["train"] for _, c, _ in drawn]),
            "n_val": np.mean([c["val"] for _, c, _ in drawn]),
            "n_test": len(truth),
        }
        scored = {m: mean_errors[m] for m in models}
        scored |= {
            f"{a}_minus_{b}": mean_errors[a] - mean_errors[b]
            for a, b in PAIRS
            if a in mean_errors and b in mean_errors
        }
        for name, values in scored.items():
            key = name if "_minus_" in name else f"{name}_mae"
            row[key] = float(values.mean())
            row[f"{key}_low"], row[f"{key}_high"] = _interval(values, draws)
        rows.append(row)
    return pd.DataFrame(rows)


def _interval(values: np.ndarray, draws: list[np.ndarray]) -> tuple[float, float]:
    """The 95% percentile interval of the mean of ``values`` over ``draws``."""
    means = np.array([values[idx].mean() for idx in draws])
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def models_of(table: pd.DataFrame) -> list[str]:
    """The models of a new-study table, in its column order."""
    return [c.removesuffix("_mae") for c in table.columns if c.endswith("_mae")]


def new_study_figure(
    table: pd.DataFrame,
    target: str,
    unit: str | None = None,
    dataset: str | None = None,
    run: str | None = None,
):
    """Test MAE against the labelled samples (log scale), one line per model, 95% intervals."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    columns = {
        model_label(m if m in (MODEL, SCRATCH) else f"{m}_baseline"): f"{m}_mae"
        for m in models_of(table)
    }
    interval_lines(ax, table, "size", columns)
    ax.set_xlabel("labelled samples of the new study (log scale)")
    ax.set_ylabel(f"test {metric_label('mae', target, unit)}")
    seeds = int(table["seeds"].min())
    what = f"a new study ({int(table['n_test'].iloc[0])} test samples, {seeds} seeds, 95% CI)"
    ax.set_title(title(what, dataset, run))
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
