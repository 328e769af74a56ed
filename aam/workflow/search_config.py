"""A run's ``search:`` (the config's hyperparameter search) checked and planned at parse time:
its space over run options, its budget, workers, folds and metric, its forest's space, and the
identity of its Optuna study (standard library only: the Snakefile imports this on a login
node; the study itself is ``aam.analysis.search``).

The searched run keeps its config minus the searched keys; its pretraining and fine-tuning
read the chosen values from ``runs/<run>/search/best.yaml`` (``--options-file``). Its trials
score each point by K-fold cross-validation on the run's train and val samples only.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from aam.workflow.suggest import did_you_mean

# A run's ``pretrain:`` as a choice of the space: a random initialisation, or its section.
PRETRAIN_KEY = "pretrain"
PRETRAIN_CHOICES = ("none", "pretrained")
# What a trial may be scored by (metrics.json's keys) and which way is better.
MINIMIZED = ("mae", "rmse")
MAXIMIZED = ("r2", "auc", "accuracy", "f1")
REGRESSION_SCORES = ("mae", "rmse", "r2")
CLASSIFIER_SCORES = ("auc", "accuracy", "f1")
DEFAULT_METRIC = {False: "mae", True: "auc"}  # by ``classifier``
DEFAULT_FOLDS = 3
# The forest's options a forest search may vary (scikit-learn's names in parentheses), and the
# space it searches when the config gives none.
FOREST_OPTIONS = {
    "trees": "n_estimators",
    "max_features": "max_features",
    "min_samples_leaf": "min_samples_leaf",
    "max_depth": "max_depth",
}
DEFAULT_FOREST_SPACE = {
    "trees": {"low": 100, "high": 1000, "log": True},
    "max_features": {"choices": ["sqrt", 0.05, 0.1, 0.2, 0.33, 0.5, 1.0]},
    "min_samples_leaf": {"low": 1, "high": 10},
}
CLASHES = ("sweep", "cv", "learning_curve", "new_study", "ensemble", "encoder_from")


def search_dir(work: Path, run: str) -> Path:
    """Where run ``run``'s search lives: its journal, workers, trials and results."""
    return work / "runs" / run / "search"


def expand_searches(
    runs: Mapping[str, Mapping[str, Any]],
    options: Mapping[str, Collection[str]],
    schema_file: str | os.PathLike[str],
    datasets: Mapping[str, Mapping[str, Any]],
    default_seed: int,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Runs with each searched key taken out of its section (``best.yaml`` gives it), and the
    searches: ``{run: {"dataset", "space", "trials", "workers", "seed", "folds", "metric",
    "direction", "forest", "base", "key"}}``; ``base`` holds the run's model, pretrain and
    finetune sections as configured (each trial lays its values over them), ``key`` the
    study's identity (a changed search starts a new study). ``options``: each run section's
    option names; ValueError (one line naming the key) for an unknown option, an empty range, a
    value its option refuses, a budget below the workers, a metric of the other kind of target
    or a search beside a sweep, cv, learning curve, new study, ensemble or encoder_from."""
    sections = json.loads(Path(schema_file).read_text())["$defs"]
    expanded: dict[str, dict[str, Any]] = {}
    searches: dict[str, dict[str, Any]] = {}
    for name, spec in runs.items():
        search = spec.get("search")
        run = copy.deepcopy({key: value for key, value in spec.items() if key != "search"})
        expanded[name] = run
        if not search:
            continue
        where = f"config runs.{name}.search"
        for clash in CLASHES:
            if spec.get(clash):
                raise ValueError(
                    f"config runs.{name}.{clash}: not with search; the search chooses one "
                    "setting by cross-validation: give the other design a run of its own"
                )
        classifier = bool(datasets.get(spec["dataset"], {}).get("classifier"))
        space = {
            key: _checked_range(f"{where}.space.{key}", value)
            for key, value in search["space"].items()
        }
        for key, values in space.items():
            _check_key(where, key, values, run, options, sections)
        trials, workers = search["trials"], search.get("workers", 1)
        if trials < workers:
            raise ValueError(
                f"{where}.trials: {trials} is below workers ({workers}); a worker would have no "
                "trial: raise trials or lower workers"
            )
        metric = search.get("metric") or DEFAULT_METRIC[classifier]
        allowed = CLASSIFIER_SCORES if classifier else REGRESSION_SCORES
        if metric not in allowed:
            kind = "a classifier" if classifier else "a regression target"
            raise ValueError(
                f"{where}.metric: {metric} does not score {kind}; use one of {', '.join(allowed)}"
            )
        forest = _forest(where, search.get("forest"))
        base = {section: copy.deepcopy(run.get(section) or {}) for section in ("model", "finetune")}
        base["pretrain"] = copy.deepcopy(run.get("pretrain", {}))
        for key in space:
            section, _, option = key.partition(".")
            if option and isinstance(run.get(section), dict):
                run[section].pop(option, None)
        plan = {
            "dataset": spec["dataset"],
            "space": space,
            "trials": trials,
            "workers": workers,
            "seed": search.get("seed", default_seed),
            "folds": search.get("folds", DEFAULT_FOLDS),
            "metric": metric,
            "direction": "minimize" if metric in MINIMIZED else "maximize",
            "forest": forest,
            "base": base,
        }
        plan["key"] = study_key(plan)
        searches[name] = plan
    return expanded, searches


def study_key(plan: Mapping[str, Any]) -> str:
    """The identity of a search's Optuna study: a hash of everything its trials depend on in
    the config (space, seed, folds, metric, the run's dataset and base options). Not the
    budget or the workers: a raised ``trials`` continues the study. The workers' code is in
    their rule's params: a code change reruns them, and they open the study of this key and
    of their code's fingerprint."""
    keyed = {key: plan[key] for key in ("dataset", "space", "seed", "folds", "metric", "base")}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:12]


def study_names(plan: Mapping[str, Any], worker_code: str, forest_code: str) -> dict[str, str]:
    """The Optuna studies of a search (``{"aam": ..., "forest": ...}``): its config key and the
    fingerprint of the code its workers (``worker_code``) and its forest's job
    (``forest_code``) run, as the workflow computed them when it planned the jobs, so every
    worker of one run of the DAG shares one study, and changed code starts a new one."""
    forest = json.dumps([plan["key"], plan["forest"]], sort_keys=True).encode()
    return {
        "aam": f"aam-{plan['key']}-{worker_code[:12]}",
        "forest": f"forest-{hashlib.sha256(forest).hexdigest()[:12]}-{forest_code[:12]}",
    }


def _checked_range(where: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """A space entry as given (``{low, high[, log]}`` or ``{choices}``), checked: a range with
    low below high (above 0 on a log scale), choices not empty and not repeated."""
    if "choices" in value:
        choices = list(value["choices"])
        if not choices:
            raise ValueError(f"{where}.choices: empty; list at least one value")
        if len({json.dumps(c) for c in choices}) < len(choices):
            raise ValueError(f"{where}.choices: a value is listed twice; list each once")
        return {"choices": choices}
    low, high, log = value["low"], value["high"], bool(value.get("log", False))
    if not low < high:
        raise ValueError(f"{where}: empty range (low {low} is not below high {high}); widen it")
    if log and low <= 0:
        raise ValueError(f"{where}: a log range needs low above 0 (low {low}); raise low")
    integer = isinstance(low, int) and isinstance(high, int)
    return {"low": low, "high": high, "log": log, "integer": integer}


def _check_key(
    where: str,
    key: str,
    space: Mapping[str, Any],
    run: Mapping[str, Any],
    options: Mapping[str, Collection[str]],
    sections: Mapping[str, Any],
) -> None:
    """ValueError (one line) for a space key that is not ``pretrain`` or a run option
    (``section.option``), a value its option's schema refuses, or a pretraining option of a
    run that never pretrains."""
    if key == PRETRAIN_KEY:
        bad = [c for c in space.get("choices", [None]) if c not in PRETRAIN_CHOICES]
        if bad or "choices" not in space:
            raise ValueError(
                f"{where}.space.pretrain: choices are {' and '.join(PRETRAIN_CHOICES)} "
                "(from a random initialisation, or pretrained with the run's pretrain section)"
            )
        if run.get("pretrain") == "none":
            raise ValueError(
                f"{where}.space.pretrain: the run has pretrain: none; give it a pretrain section "
                "(the options used when pretraining is chosen)"
            )
        return
    section, _, option = key.partition(".")
    if option not in options.get(section, ()):
        known = [PRETRAIN_KEY] + [f"{s}.{o}" for s, names in options.items() for o in names]
        raise ValueError(
            f"{where}.space.{key}: not a run option{did_you_mean(key, known)}; use "
            "<section>.<option> with a section of model, pretrain, finetune, or pretrain itself"
        )
    if section == "pretrain" and run.get("pretrain") == "none":
        raise ValueError(
            f"{where}.space.{key}: the run has pretrain: none; search model or finetune options, "
            "or give the run a pretrain section"
        )
    from jsonschema import Draft202012Validator  # Snakemake's dependency: no torch

    schema = sections[section]["properties"][option]
    values = space["choices"] if "choices" in space else [space["low"], space["high"]]
    for value in values:
        error = next(Draft202012Validator(schema).iter_errors(value), None)
        if error is not None:
            message = " ".join(error.message.split())
            raise ValueError(f"{where}.space.{key}: {message}; fix the value")


def _forest(where: str, forest: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The forest's search (``{trials, space}``, its space by default DEFAULT_FOREST_SPACE),
    checked; None without one."""
    if not forest:
        return None
    given = forest.get("space") or DEFAULT_FOREST_SPACE
    space = {}
    for key, value in given.items():
        if key not in FOREST_OPTIONS:
            raise ValueError(
                f"{where}.forest.space.{key}: not a forest option"
                f"{did_you_mean(key, FOREST_OPTIONS)}; use one of "
                f"{', '.join(FOREST_OPTIONS)}"
            )
        space[key] = _checked_range(f"{where}.forest.space.{key}", value)
    return {"trials": forest["trials"], "space": space}
