"""`aam search-best`: the result of a run's search, once its workers used the budget: the best
values as an options file (best.yaml, which the run's pretraining and fine-tuning read),
every trial (trials.tsv), the search at a glance (search.json) and a figure (history and
importances)."""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from aam.analysis.figures import title
from aam.analysis.search import (
    best_summary,
    chosen_options,
    importances,
    load_study,
    plot_search,
    trials_table,
)
from aam.errors import InputError
from aam.options import add_options, check_options, from_args, option
from aam.runtime.atomic import atomic_output, check_output_dir, write_json
from aam.runtime.figures import add_format_argument, figure_name
from aam.workflow.options_file import write_options_file

log = logging.getLogger(__name__)


@dataclass
class SearchBestOptions:
    """The options of `aam search-best` (its figures' format: ``add_format_argument``)."""

    search_dir: Path = option(None, "the search's journal", required=True)
    workers: list[Path] = option(None, "the workers' records (JSON)", required=True)
    spec: str = option(None, "the search as JSON (Flags.search_worker)", required=True)
    output_dir: Path = option(None, "best.yaml and the rest", required=True)
    run: str | None = option(None, "the run's name, for the figure's title")

    def __post_init__(self) -> None:
        check_options(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam search-best`."""
    add_options(parser, SearchBestOptions)
    add_format_argument(parser)


def run(args: argparse.Namespace) -> None:
    """Write best.yaml, trials.tsv, search.json and the search figure."""
    opts = from_args(SearchBestOptions, args)
    spec = json.loads(opts.spec)
    name = spec["studies"]["aam"]
    for path in opts.workers:
        ran = json.loads(path.read_text())["study"]
        if ran != name:
            raise InputError(
                f"{path}: the worker ran study {ran}, not this search's {name}; rerun the "
                "search's workers (its config or code changed since)"
            )
    out = check_output_dir(opts.output_dir)
    study = load_study(opts.search_dir, name)
    summary = best_summary(study, spec)
    table = trials_table(study, spec["folds"])
    weights = importances(study)
    summary["importances"] = weights
    best = summary["best"]
    note = (
        f"aam search-best: trial {best['number']} of {study.study_name}, {spec['metric']} "
        f"{best['score']:.4g} over {spec['folds']} folds of the train and val samples"
    )
    write_options_file(out / "best.yaml", chosen_options(best["values"]), note)
    with atomic_output(out / "trials.tsv") as tmp:
        table.to_csv(tmp, sep="\t", index=False, float_format="%.6g")
    write_json(out / "search.json", summary)
    figure = out / figure_name("search", args.figure_format)
    plot_search(table, summary, weights, figure, title("search", run=opts.run))
    log.info("%s", note)
    log.info("trials: %s; best values: %s", summary["trials"], best["values"])
    if summary["beats_median"] is False:
        log.warning(
            "the best trial (%s %.4g) does not beat the training median (%.4g) on the folds",
            spec["metric"],
            best["score"],
            summary["median_baseline"],
        )
