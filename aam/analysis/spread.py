"""How much a model's predictions vary beside the truth (metrics.json ``spread``; for a
classifier ``one_class``).

A model that predicts about one value for every sample (a collapsed fine-tuning, a forest that
found nothing) can still score an MAE near the baselines' where the target varies little; its
predictions' standard deviation beside the target's shows it. Below ``NEAR_CONSTANT`` of the
target's, the model is marked ``near_constant``. A classifier's analogue: a model whose most
probable class is the same for every scored sample (``one_class``), a constant however its
probabilities vary. Either way `aam predict` logs a warning line and the landing page shows it
beside the run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from aam.analysis.prediction_tables import model_label

# A model whose predictions' SD is below this share of the target's SD (on the same samples)
# is near-constant.
NEAR_CONSTANT = 0.1


def prediction_spread(models: Mapping[str, np.ndarray], truth: np.ndarray) -> dict:
    """metrics.json ``spread``: ``target_sd`` (the sample standard deviation, n - 1, of
    ``truth``), ``near_constant_below`` (``NEAR_CONSTANT``) and per model (``models``: name ->
    its predictions of the same samples) ``prediction_sd``, ``sd_ratio`` (prediction_sd /
    target_sd) and ``near_constant`` (sd_ratio below NEAR_CONSTANT). null where undefined:
    an SD of one sample; a ratio, and whether it is near-constant, where the target does not
    vary."""
    target_sd = _sd(truth)
    spread = {"target_sd": target_sd, "near_constant_below": NEAR_CONSTANT, "models": {}}
    for name, values in models.items():
        sd = _sd(values)
        ratio = None if sd is None or not target_sd else sd / target_sd
        spread["models"][name] = {
            "prediction_sd": sd,
            "sd_ratio": ratio,
            "near_constant": None if ratio is None else ratio < NEAR_CONSTANT,
        }
    return spread


def one_class_predictions(models: Mapping[str, np.ndarray], classes: list[str]) -> dict:
    """metrics.json ``one_class``: model -> the class it predicts (its most probable one) for
    every scored sample, for each model of ``models`` (name -> log-probabilities over
    ``classes``) that predicts a single class; empty where every model predicts two or more."""
    found = {}
    for name, values in models.items():
        predicted = np.unique(np.asarray(values).argmax(axis=1))
        if len(values) > 1 and len(predicted) == 1:
            found[name] = classes[int(predicted[0])]
    return found


def _sd(values: np.ndarray) -> float | None:
    """The sample standard deviation of ``values``; None for fewer than two or an overflow."""
    if len(values) < 2:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        sd = float(np.std(np.asarray(values, dtype=np.float64), ddof=1))
    return sd if math.isfinite(sd) else None


def near_constant_notes(metrics: Mapping, group: str | None = None) -> list[str]:
    """One sentence per model that metrics.json's ``spread`` marks near-constant, or that its
    ``one_class`` names (a classifier's; none for an older file)."""
    spread = metrics.get("spread") or {}
    notes = [
        f"{model_label(name, group, classifier=True)} predicts one class ({label}) for every one "
        f"of the {metrics.get('n', 'scored')} scored samples: it is a constant, however its "
        "probabilities vary; read its metrics beside the majority class's (metrics.json: "
        "one_class)."
        for name, label in (metrics.get("one_class") or {}).items()
    ]
    for name, found in (spread.get("models") or {}).items():
        if not found.get("near_constant"):
            continue
        notes.append(
            f"{model_label(name, group)} is near-constant: its predictions' SD "
            f"({found['prediction_sd']:.3g}) is {100 * found['sd_ratio']:.1f}% of the target's "
            f"({spread['target_sd']:.3g}) on the {metrics.get('n', 'scored')} scored samples "
            f"(below {100 * spread['near_constant_below']:.0f}%): it predicts nearly one value "
            "for every sample; read its metrics beside the training mean's and median's "
            "(metrics.json: spread)."
        )
    return notes
