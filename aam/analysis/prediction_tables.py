"""Prediction tables: what `aam predict` and `aam baselines` write, and reading them back.

A regression prediction is a value in the target's units; a classifier's is the predicted label
with one ``prob_<label>`` column per class. `aam baselines` writes one row per (sample, model)
with a ``model`` column and an ``inputs`` column (what the model read, ``inputs_text``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from aam.errors import InputError
from aam.training.config import VALIDATION_METRICS

LOG_FLOOR = 1e-12  # probabilities are floored before the log: a log-probability stays finite
MICROBIOME = "microbiome"  # the input every sequence model and the forest read


SCRATCH = "scratch"  # a learning curve's AAM fine-tuned from a random initialisation


def model_label(section: str, group_column: str | None = None, classifier: bool = False) -> str:
    """A reader's name of a model of metrics.json (``model``, ``<baseline>_baseline``); for a
    ``classifier`` the constant baselines by what they predict (``mean_baseline`` keeps its key:
    the training class frequencies, whose most likely class is the training majority)."""
    if classifier and section in ("mean_baseline", "group_mean_baseline"):
        each = f" of each {group_column or 'group'}" if section == "group_mean_baseline" else ""
        return f"majority class{each}"
    names = {
        "model": "AAM",
        SCRATCH: "AAM from scratch",
        "mean_baseline": "training mean",
        "median_baseline": "training median",
        "random_forest_baseline": "random forest",
        "random_forest_covariates_baseline": "random forest + covariates",
        "random_forest_pooled_baseline": "random forest, other studies' labels too",
        "searched_forest_baseline": "random forest, searched",
        "random_forest_embeddings_baseline": "random forest on AAM's embeddings",
        "random_forest_embeddings_abundances_baseline": "random forest on AAM's embeddings + "
        "abundances",
        "group_mean_baseline": f"mean of each {group_column or 'group'}",
    }
    return names.get(section, section.removesuffix("_baseline"))


def scores_classes(keys: Iterable[str]) -> bool:
    """Whether metrics of these keys (metrics.json's of a model) score a classifier."""
    return not set(VALIDATION_METRICS["classifier"]).isdisjoint(keys)


def resampled_text(n: int, groups: Mapping | None = None) -> str:
    """What a run's bootstrap draws (metrics.json ``n`` and ``interval_groups``): ``the 80
    samples``, or ``the 6 host_subject_id groups of the 80 samples, each drawn whole``."""
    if not groups:
        return f"the {n} samples"
    return f"the {groups['n']} {groups['column']} groups of the {n} samples, each drawn whole"


INPUTS_JOIN = " + "


def inputs_text(inputs: Sequence[str]) -> str:
    """A model's inputs in words: ``microbiome + site``, or ``none``."""
    return INPUTS_JOIN.join(inputs) or "none"


def read_model_inputs(path: Path) -> dict[str, list[str]]:
    """Each model's inputs of a `aam baselines` table (its ``inputs`` column, ``inputs_text``
    read back); InputError naming the file when the column is missing."""
    table = pd.read_csv(path, sep="\t", dtype=str, usecols=lambda c: c in ("model", "inputs"))
    if "inputs" not in table.columns:
        raise InputError(f"{path}: no column 'inputs'; rerun `aam baselines` to write it")
    first = table.drop_duplicates("model").set_index("model")["inputs"].fillna("none")
    return {m: [] if text == "none" else text.split(INPUTS_JOIN) for m, text in first.items()}


def prediction_table(ids: list[str], predicted: np.ndarray, classes: list[str]) -> pd.DataFrame:
    """``sample_id``, ``prediction`` (and ``prob_<label>`` for log-probabilities over classes)."""
    if not classes:
        return pd.DataFrame({"sample_id": ids, "prediction": predicted})
    probs = np.exp(predicted)
    table = pd.DataFrame({"sample_id": ids, "prediction": [classes[k] for k in probs.argmax(1)]})
    for k, label in enumerate(classes):
        table[f"prob_{label}"] = probs[:, k]
    return table


def baseline_table(
    ids: list[str],
    split: np.ndarray,
    predicted: dict[str, np.ndarray],
    inputs: dict[str, list[str]],
    classes: list[str],
) -> pd.DataFrame:
    """`aam baselines`' layout: a row per (model, sample), ``sample_id, split, model, inputs``
    and the prediction (``prediction_table``), models in the order of ``predicted``."""
    tables = []
    for model, values in predicted.items():
        table = prediction_table(ids, values, classes)
        table.insert(1, "split", split)
        table.insert(2, "model", model)
        table.insert(3, "inputs", inputs_text(inputs[model]))
        tables.append(table)
    return pd.concat(tables)


def read_model_predictions(path: Path, ids: list[str], classes: list[str]) -> dict[str, np.ndarray]:
    """Each model's predictions of a `aam baselines` table for ``ids``, in that order (values, or
    log-probabilities over ``classes``); InputError naming the file when one is missing."""
    table = pd.read_csv(path, sep="\t", dtype={"sample_id": str, "model": str})
    columns = ["prediction"] if not classes else [f"prob_{label}" for label in classes]
    missing = sorted({"sample_id", "model", *columns} - set(table.columns))
    if missing:
        raise InputError(
            f"{path}: no column(s) {missing}; write it with `aam baselines` for this target"
        )
    out = {}
    for model, rows in table.groupby("model", sort=False):
        rows = rows.set_index("sample_id").reindex(ids)
        absent = rows.index[rows[columns[0]].isna()]
        if len(absent):
            raise InputError(
                f"{path}: model {model!r} has no prediction for {len(absent)} sample(s) "
                f"(e.g. {', '.join(absent[:3])}); rerun `aam baselines` with the same split"
            )
        values = rows[columns].to_numpy(dtype=np.float64)
        out[model] = values[:, 0] if not classes else np.log(np.maximum(values, LOG_FLOOR))
    return out
