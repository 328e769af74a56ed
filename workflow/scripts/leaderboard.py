"""Sweep leaderboard for the report: each sweep's runs ranked by their validation metric, the
best marked, the test metric beside it for reference (rule `leaderboard`, run with `script:`).

Workflow glue only (standard library): it reads each run's finetune/summary.json (best epoch's
validation metrics) and predict/metrics.json. The test split never chooses: ranks come from
validation alone. No `from __future__` import: Snakemake runs this file after a preamble.
"""

import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path

# Validation metric that ranks the runs, by target kind: (metric, higher is better).
CHOICE = {"regression": ("mae", False), "classes": ("accuracy", True)}


def leaderboard(
    sweeps: Mapping[str, Mapping[str, Mapping]],
    summaries: Mapping[str, Mapping],
    metrics: Mapping[str, Mapping],
) -> tuple[list[str], list[list[str]]]:
    """Header and rows: per sweep, its runs by rank (runs without the validation metric last).

    ``sweeps`` is ``{sweep: {run: {"section.option": value}}}``; ``summaries`` and ``metrics``
    hold each run's summary.json and metrics.json content.
    """
    keys = list(
        dict.fromkeys(k for members in sweeps.values() for p in members.values() for k in p)
    )
    header = ["sweep", "rank", "best", "run", *keys, "val_metric", "val_value", "test_value"]
    rows = []
    for sweep, members in sweeps.items():
        kind = "regression" if any("val_mae" in summaries[r] for r in members) else "classes"
        metric, higher = CHOICE[kind]

        def order(run: str, metric=metric, higher=higher) -> float:
            value = summaries[run].get(f"val_{metric}")
            if value is None or not math.isfinite(value):
                return math.inf
            return -value if higher else value

        ranked = sorted(members, key=order)
        for rank, run in enumerate(ranked, start=1):
            chosen = rank == 1 and order(run) != math.inf
            rows.append(
                [
                    sweep,
                    str(rank),
                    "yes" if chosen else "",
                    run,
                    *(_cell(members[run].get(k)) for k in keys),
                    f"val_{metric}",
                    _cell(summaries[run].get(f"val_{metric}")),
                    _cell((metrics[run].get("model") or {}).get(metric)),
                ]
            )
    return header, rows


def _cell(value) -> str:
    if value is None:
        return "NA"
    if isinstance(value, float):
        return format(value, ".6g")
    return str(value)


def write_leaderboard(
    sweeps: Mapping, runs: list[str], summary_files: list, metrics_files: list, output: Path
) -> int:
    """Read the runs' files (same order as ``runs``) and write the TSV; rows written."""
    if not len(runs) == len(summary_files) == len(metrics_files):
        raise ValueError(f"{len(runs)} runs, {len(summary_files)} summaries, {len(metrics_files)}")
    summaries = {
        r: json.loads(Path(p).read_text()) for r, p in zip(runs, summary_files, strict=True)
    }
    metrics = {
        r: json.loads(Path(p).read_text()) or {} for r, p in zip(runs, metrics_files, strict=True)
    }
    header, rows = leaderboard(sweeps, summaries, metrics)
    with open(output, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return len(rows)


if __name__ == "__main__":  # under Snakemake's script: directive, which defines `snakemake`
    smk = globals()["snakemake"]
    count = write_leaderboard(
        smk.params.sweeps,
        list(smk.params.runs),
        list(smk.input.summaries),
        list(smk.input.metrics),
        Path(smk.output[0]),
    )
    Path(smk.log[0]).write_text(f"leaderboard of {count} run(s) in {smk.output[0]}\n")
