"""`aam overview`: the landing page, every run's test metrics beside the baselines' with
intervals, AAM minus each baseline with its paired interval and a verdict, the run's figures
inline, a Methods paragraph and each stage's provenance, the config and every file of the work
directory (the page's folder), linked (``aam.analysis.overview``, ``aam.analysis.methods``,
``aam.analysis.workdir_index``)."""

from __future__ import annotations

import argparse
import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from aam.analysis.methods import methods_bibtex
from aam.analysis.overview import (
    Page,
    RunMetrics,
    ensemble_members,
    overview_html,
    software_versions,
)
from aam.analysis.search_section import search_summaries
from aam.analysis.workdir_index import (
    files_by_folder,
    run_figures,
    stage_records,
    training_cost,
)
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.errors import InputError
from aam.options import add_options, check_options, from_args, option
from aam.runtime.atomic import atomic_output

log = logging.getLogger(__name__)
TRAINING_DOCS = Path(__file__).resolve().parents[2] / "docs/training.md"  # in a checkout


@dataclass
class OverviewOptions:
    """The options of `aam overview`; a page not named *.html is refused here."""

    run: list[str] = option(
        None,
        "a run, its dataset and the metrics.json `aam predict` wrote for its test split",
        required=True,
        metavar="RUN=DATASET=METRICS",
    )
    output: Path = option(
        None,
        "HTML page to write, in the work directory whose files it lists and links",
        required=True,
    )
    config: list[Path] = option([], "the workflow's config file(s)")
    versions: Path | None = option(
        None, "TSV to write too: each software the stages ran, its version and how many stages"
    )
    citations: Path | None = option(
        None, "BibTeX file to write too: the references the page's Methods paragraph cites"
    )
    note: list[str] = option(
        [], "what the workflow left out and why (one line each), shown at the top"
    )

    def __post_init__(self) -> None:
        check_options(self)
        if self.output.suffix != ".html":
            raise InputError(f"--output {self.output}: name the page *.html")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam overview`."""
    add_options(parser, OverviewOptions)


def run(args: argparse.Namespace) -> None:
    """Write the page from each run's metrics.json and what the page's folder holds."""
    opts = from_args(OverviewOptions, args)
    if opts.versions is not None:
        check_output_file(opts.versions, TSV_SUFFIXES, "software versions table")
    if opts.citations is not None:
        check_output_file(opts.citations, (".bib",), "BibTeX file")
    work, results = opts.output.parent, []
    for item in opts.run:
        name, dataset, path = _run(item)
        try:
            metrics = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise InputError(
                f"--run {item}: cannot read {path} ({error}); rerun aam predict"
            ) from None
        members = ensemble_members(metrics) or [name]
        cost, searched = training_cost(work, members), search_summaries(work, name)
        results.append(RunMetrics(name, dataset, metrics, cost, searched, _samples(work, dataset)))
    configs = []
    for path in opts.config:
        try:
            configs.append((str(path), path.read_text()))
        except OSError as error:
            raise InputError(f"--config {path}: cannot read it ({error})") from None
    page = Page(
        runs=[(r, run_figures(work, r.run, r.dataset)) for r in results],
        stages=stage_records(work),
        configs=configs,
        files=files_by_folder(work),
        made=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        notes=opts.note,
        workdir=str(work),
        docs=_docs(work),
        citations="" if opts.citations is None else os.path.relpath(opts.citations, work),
    )
    rows = software_versions(page.stages)
    if opts.versions is not None:
        table = [("software", "version", "stages"), *rows]
        with atomic_output(opts.versions) as tmp:
            tmp.write_text("".join("\t".join(map(str, row)) + "\n" for row in table))
    if opts.citations is not None:
        with atomic_output(opts.citations) as tmp:
            tmp.write_text(methods_bibtex(rows), encoding="utf-8")
    with atomic_output(opts.output) as tmp:
        tmp.write_text(overview_html(page))
    log.info("wrote %s: %d run(s)", opts.output, len(results))


def _docs(work: Path) -> str:
    """docs/training.md of the checkout this aam runs from, relative to ``work`` (the page's
    folder); "" where there is none (an installed package)."""
    return os.path.relpath(TRAINING_DOCS, work.resolve()) if TRAINING_DOCS.is_file() else ""


def _run(item: str) -> list[str]:
    """(run, dataset, path) of ``--run RUN=DATASET=METRICS`` (the path may hold '=')."""
    values = item.split("=", 2)
    if len(values) != 3 or not all(values):
        raise InputError(f"--run {item}: expected RUN=DATASET=METRICS")
    return values


def _samples(work: Path, dataset: str) -> str | None:
    """The line of ``data/<dataset>/samples.json`` (rule check_data) under ``work``, if any."""
    path = work / "data" / dataset / "samples.json"
    try:
        return json.loads(path.read_text()).get("line") if path.is_file() else None
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: cannot read it ({error}); rerun rule check_data") from None
