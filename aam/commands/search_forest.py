"""`aam search-forest`: the random forest's own search on a run's scoring folds (its space over
trees, features per split, leaf size and depth, its own budget), then the best forest fitted on
the run's training samples, predicting every sample as `aam baselines` does (model
``searched_forest``), so the run's metrics compare the best of each model."""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aam.analysis.baselines import relative_abundances
from aam.analysis.prediction_tables import MICROBIOME, baseline_table
from aam.analysis.search import (
    Worker,
    ask_within_budget,
    best_summary,
    open_study,
    suggest,
    trials_table,
)
from aam.commands.search_worker import check_folds
from aam.data.split import read_split
from aam.errors import InputError
from aam.options import SEED, add_options, check_options, from_args, option
from aam.runtime.atomic import atomic_output, check_output_dir, write_json
from aam.runtime.threads import usable_threads
from aam.training.inputs.study import Labels, Study, load_study
from aam.training.metrics import classification_metrics, regression_metrics
from aam.workflow.search_config import FOREST_OPTIONS

log = logging.getLogger(__name__)
SEARCHED_FOREST = "searched_forest"  # its model name in the baselines table and metrics.json


@dataclass
class SearchForestOptions:
    """The options of `aam search-forest`."""

    table: Path = option(None, "BIOM table of the run", required=True)
    metadata: Path = option(None, "metadata TSV (the target)", required=True)
    split: Path = option(None, "the run's split: the best forest fits its train", required=True)
    folds: list[Path] = option(None, "the scoring folds' split files", required=True)
    search_dir: Path = option(None, "the search's journal", required=True)
    spec: str = option(None, "the search as JSON (Flags.search_worker)", required=True)
    seed: int = option(42, "seed of every forest", **SEED)
    threads: int = option(1, "CPU threads of each forest")
    output_dir: Path = option(None, "trials.tsv, search.json, predictions.tsv", required=True)

    def __post_init__(self) -> None:
        check_options(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam search-forest`."""
    add_options(parser, SearchForestOptions)


def run(args: argparse.Namespace) -> None:
    """Search the forest until its budget is used; fit the best on the run's training samples."""
    opts = from_args(SearchForestOptions, args)
    spec = json.loads(opts.spec)
    forest = spec["forest"]
    if forest is None:
        raise InputError("--spec: the search has no forest; add runs.<run>.search.forest")
    check_folds(opts.split, opts.folds)
    out = check_output_dir(opts.output_dir)
    study = load_study(
        opts.table,
        max_bp=1,
        labels=Labels(opts.metadata, spec["target"], spec["classifier"], []),
        split_path=opts.split,
    )
    index = {sample: k for k, sample in enumerate(study.samples.sample_ids)}
    folds = [_positions(read_split(path), index) for path in opts.folds]
    spec = {**spec, "space": forest["space"], "trials": forest["trials"]}
    name = spec["studies"]["forest"]
    searched = open_study(opts.search_dir, name, spec["direction"], spec["seed"])
    worker = Worker(opts.search_dir, "forest")
    trials_dir = opts.search_dir / "trials" / name
    with worker.alive():
        while (
            trial := ask_within_budget(
                searched, spec["trials"], worker, opts.search_dir, trials_dir
            )
        ) is not None:
            started = time.monotonic()
            values = suggest(trial, spec["space"])
            scores = [
                _fold_score(study, fold, values, spec, opts.seed, opts.threads) for fold in folds
            ]
            trial.set_user_attr("folds", [{"score": s, "model": s} for s in scores])
            trial.set_user_attr("seconds", round(time.monotonic() - started, 1))
            searched.tell(trial, float(np.mean(scores)))
    summary = best_summary(searched, spec)
    with atomic_output(out / "trials.tsv") as tmp:
        trials_table(searched, len(folds)).to_csv(tmp, sep="\t", index=False, float_format="%.6g")
    write_json(out / "search.json", summary)
    best = summary["best"]["values"]
    train = study.subset("train")
    model = _forest(spec["classifier"], best, opts.seed, opts.threads)
    model.fit(relative_abundances(study.samples, train), _y(study, train))
    ids = list(study.samples.sample_ids)
    predicted = _predict(model, relative_abundances(study.samples, np.arange(len(ids))), study)
    table = baseline_table(
        ids,
        study.split.reindex(ids).to_numpy(),
        {SEARCHED_FOREST: predicted},
        {SEARCHED_FOREST: [MICROBIOME]},
        study.classes,
    )
    with atomic_output(out / "predictions.tsv") as tmp:
        table.to_csv(tmp, sep="\t", index=False)
    log.info(
        "best forest %s: %s %.4g over the folds", best, spec["metric"], summary["best"]["score"]
    )


def _positions(split, index: dict[str, int]) -> dict[str, np.ndarray]:
    """A fold's train and test positions in the study."""
    return {
        part: np.array([index[s] for s in split[split == part].index if s in index], dtype=int)
        for part in ("train", "test")
    }


def _forest(classifier: bool, values: dict, seed: int, threads: int):
    """The scikit-learn forest of a trial's ``values`` (FOREST_OPTIONS' names)."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    options = {FOREST_OPTIONS[key]: value for key, value in values.items()}
    options.update(random_state=seed, n_jobs=usable_threads(threads))
    return (RandomForestClassifier if classifier else RandomForestRegressor)(**options)


def _y(study: Study, positions: np.ndarray) -> np.ndarray:
    """The targets of ``positions`` (class indices for a classifier)."""
    y = study.targets[positions]
    return y.astype(np.int64) if study.classes else y


def _predict(model, features, study: Study) -> np.ndarray:
    """Values, or log-probabilities over every class of the study."""
    if not study.classes:
        return model.predict(features)
    probs = np.zeros((features.shape[0], len(study.classes)))
    probs[:, model.classes_] = model.predict_proba(features)
    return np.log(np.clip(probs, 1e-12, None))


def _fold_score(study: Study, fold, values: dict, spec: dict, seed: int, threads: int) -> float:
    """The metric of a forest of ``values`` fitted on ``fold``'s train samples, on its test."""
    model = _forest(spec["classifier"], values, seed, threads)
    model.fit(relative_abundances(study.samples, fold["train"]), _y(study, fold["train"]))
    predicted = _predict(model, relative_abundances(study.samples, fold["test"]), study)
    truth = _y(study, fold["test"])
    if not study.classes:
        return regression_metrics(predicted, truth)[spec["metric"]]
    import torch

    return classification_metrics(torch.from_numpy(predicted), truth)[spec["metric"]]
