"""What a workflow's work directory holds, for its landing page (`aam overview`): each run's
figures, each stage's provenance record, and every file, by folder.

Only what exists is listed: the page is made last (rule `overview` waits for every other
target), so a folder the run never made (a leaderboard without sweeps, cv/ without folds) does
not appear.
"""

from __future__ import annotations

import base64
import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aam.errors import InputError
from aam.runtime.figures import FORMATS

# A run's figures, by title: paths relative to the work directory, without the format suffix.
RUN_FIGURES = {
    "predicted vs true (test split)": "runs/{run}/predict/predicted_vs_true",
    "its ensemble's predicted vs true (test split)": "runs/{run}/ensemble/predicted_vs_true",
    "fine-tuning history": "runs/{run}/finetune/history",
    "pretraining history": "runs/{run}/pretrain/history",
    "ASV importance": "runs/{run}/importance/importance",
    "learning curve": "learning_curve/{run}",
    "hyperparameter search (cross-validated on train and val)": "runs/{run}/search/search",
}
PCOA = "unifrac/{dataset}.*.pcoa/pcoa"
MEDIA_TYPES = {"png": "image/png", "svg": "image/svg+xml"}  # what an <img> shows inline


def _skipped(relative: Path) -> bool:
    """Hidden paths (Snakemake's .snakemake/, the run lock, an atomic write's temporary):
    state, not outputs."""
    return any(part.startswith(".") for part in relative.parts)


@dataclass(frozen=True)
class Figure:
    """A figure file: its title, its path relative to the work directory, and a data URI when
    a browser shows it inline (PDF: a link only)."""

    title: str
    path: str
    data_uri: str | None


def _figure(work: Path, title: str, stem: str) -> Figure | None:
    """The figure ``stem`` (a glob without suffix) in the first format found, or None."""
    for fmt in FORMATS:
        for found in sorted(work.glob(f"{stem}.{fmt}")):
            media = MEDIA_TYPES.get(fmt)
            uri = None
            if media:
                uri = f"data:{media};base64,{base64.b64encode(found.read_bytes()).decode()}"
            return Figure(title, found.relative_to(work).as_posix(), uri)
    return None


def run_figures(work: Path, run: str, dataset: str) -> list[Figure]:
    """The figures of ``run`` (and its dataset's PCoA) that exist under ``work``."""
    stems = {title: stem.format(run=run) for title, stem in RUN_FIGURES.items()}
    stems[f"PCoA of {dataset}"] = PCOA.format(dataset=dataset)
    found = (_figure(work, title, stem) for title, stem in stems.items())
    return [figure for figure in found if figure is not None]


@dataclass(frozen=True)
class StageRecord:
    """One provenance record (``aam --provenance``) and where it lies."""

    path: str  # relative to the work directory
    record: dict


def stage_records(work: Path) -> list[StageRecord]:
    """Every provenance record under ``work`` (each stage's command line, code, software,
    device), in path order."""
    records = []
    for path in sorted(work.rglob("*provenance.json")):
        relative = path.relative_to(work)
        if _skipped(relative):
            continue
        try:
            record = json.loads(path.read_text())
        except ValueError as error:
            raise InputError(f"{path}: not JSON ({error}); rerun the stage that wrote it") from None
        records.append(StageRecord(relative.as_posix(), record))
    return records


TRAINING_STAGES = ("pretrain", "finetune")


def training_cost(work: Path, runs: Sequence[str]) -> dict[str, float] | None:
    """The wall and CPU seconds (``wall_s``, ``cpu_s``) and the jobs (``jobs``) of the
    training stages of ``runs`` (an ensemble's members), from Snakemake's benchmark files
    ``benchmarks/<stage>/<run>.tsv``; a pretraining a run reuses counts where it ran. None when
    no benchmark exists."""
    wall = cpu = 0.0
    jobs = 0
    for stage in TRAINING_STAGES:
        for run in runs:
            path = work / "benchmarks" / stage / f"{run}.tsv"
            if not path.is_file():
                continue
            rows = list(csv.DictReader(path.open(), delimiter="\t"))
            try:
                wall += sum(float(row["s"]) for row in rows)
                cpu += sum(float(row["cpu_time"]) for row in rows)
            except (KeyError, ValueError) as error:
                raise InputError(
                    f"{path}: not a Snakemake benchmark ({error}); rerun the job that wrote it"
                ) from None
            jobs += len(rows)
    return {"wall_s": wall, "cpu_s": cpu, "jobs": jobs} if jobs else None


def files_by_folder(work: Path) -> dict[str, list[str]]:
    """Every file under ``work`` (relative POSIX paths), by top folder ("." for the top)."""
    folders: dict[str, list[str]] = {}
    for path in sorted(p for p in work.rglob("*") if p.is_file()):
        relative = path.relative_to(work)
        if _skipped(relative):
            continue
        top = relative.parts[0] if len(relative.parts) > 1 else "."
        folders.setdefault(top, []).append(relative.as_posix())
    return folders
