"""A searched run's search on the landing page: the trials, the best cross-validated score
with its folds' spread beside the training median's on the same folds, the chosen values, and
the forest's search beside it (each ``search.json`` of `aam search-best` / `aam
search-forest`)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path

from aam.analysis.figures import METRIC_NAMES


def search_summaries(work: Path, run: str) -> dict[str, dict] | None:
    """``{"aam": ..., "forest": ...}``: the search.json files of ``run``'s search under
    ``work`` that exist; None when the run was not searched."""
    found = {}
    for model, path in (("aam", "search.json"), ("forest", "forest/search.json")):
        file = work / "runs" / run / "search" / path
        if file.is_file():
            found[model] = json.loads(file.read_text())
    return found or None


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _line(name: str, summary: Mapping) -> str:
    """One model's search in a sentence."""
    best, metric = summary["best"], METRIC_NAMES.get(summary["metric"], summary["metric"])
    states = ", ".join(f"{n} {state}" for state, n in sorted(summary["trials"].items()))
    folds = ", ".join(_score(s) for s in best["folds"])
    spread = f"; SD over folds {_score(best['fold_sd'])}" if best.get("fold_sd") is not None else ""
    values = ", ".join(
        f"{key} = {value:.4g}" if isinstance(value, float) else f"{key} = {value}"
        for key, value in sorted(best["values"].items())
    )
    text = (
        f"{name}: {states} trials (budget {summary['budget']}); best {metric} over the folds "
        f"{_score(best['score'])} (folds {folds}{spread}), trial {best['number']}; chosen: {values}"
    )
    if summary.get("median_baseline") is not None:
        verdict = "beats" if summary["beats_median"] else "does not beat"
        median = _score(summary["median_baseline"])
        text += f"; {verdict} the training median on the same folds ({median})"
    return text


def search_html(searches: Mapping[str, Mapping] | None) -> str:
    """The search block of a run's section (empty for a run not searched)."""
    if not searches:
        return ""
    items = []
    if "aam" in searches:
        items.append(_line("AAM", searches["aam"]))
    if "forest" in searches:
        items.append(_line("random forest", searches["forest"]))
    warn = ""
    aam = searches.get("aam")
    if aam and aam["best"].get("near_constant_folds"):
        warn = (
            f"<p class=warn>The best AAM trial was near-constant on "
            f"{aam['best']['near_constant_folds']} of its folds (scored "
            "no better than the training median there).</p>"
        )
    lines = "".join(f"<li>{html.escape(item)}</li>" for item in items)
    note = (
        "Options chosen by cross-validation on the training and validation samples only; the "
        "test split above was read once, by the run trained with them."
    )
    return f"<h3>Search</h3><ul>{lines}</ul>{warn}<p class=note>{html.escape(note)}</p>"
