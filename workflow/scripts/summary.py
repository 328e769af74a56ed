"""Cross-run summary for the report: one TSV row per run, the model's test-split metrics beside
the baselines' (rule `summary`, run with `script:`).

Workflow glue only (standard library): it reads the metrics.json that `aam predict` wrote.
No `from __future__` import: Snakemake runs this file after a preamble of its own.
"""

import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

# The metrics.json sections tabulated -> their column prefixes (the model is AAM).
PARTS = {
    "model": "AAM",
    "mean_baseline": "mean_baseline",
    "median_baseline": "median_baseline",
    "random_forest_baseline": "random_forest_baseline",
    "random_forest_covariates_baseline": "random_forest_covariates_baseline",
    "group_mean_baseline": "group_mean_baseline",
}


def summary_table(runs: Iterable[Mapping]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the summary.

    Each run is ``{"run", "dataset", "target", "target_unit", "metrics"}`` (``target_unit``
    may be missing), ``metrics`` being the content of its metrics.json. Columns: run, dataset,
    target, target_unit, n, then per metric (in first-seen order) ``AAM_<metric>`` and, when
    any run has them, the baselines' (``mean_baseline_<metric>``,
    ``median_baseline_<metric>``, ``random_forest_baseline_<metric>``,
    ``random_forest_covariates_baseline_<metric>``, ``group_mean_baseline_<metric>``), each
    followed by its 95% interval's ``_low`` and ``_high`` (metrics.json ``intervals``) when any
    run has one. Headers are names without spaces; the metrics in the target's unit (MAE,
    RMSE) are in each row's ``target_unit``. An undefined R^2 or AUC is null in metrics.json,
    and a run may lack a section or an interval: such cells are ``NA``.
    """
    runs, parts_of = list(runs), list(PARTS)
    sections = [[run["metrics"].get(part) or {} for part in parts_of] for run in runs]
    bounds = [
        [(run["metrics"].get("intervals") or {}).get(p) or {} for p in parts_of] for run in runs
    ]
    metrics = list(dict.fromkeys(m for parts in sections for part in parts for m in part))
    columns = [
        (i, metric)
        for metric in metrics
        for i in range(len(parts_of))
        if any(metric in parts[i] for parts in sections)
    ]
    header, cells = ["run", "dataset", "target", "target_unit", "n"], []
    for i, metric in columns:
        name = f"{PARTS[parts_of[i]]}_{metric}"
        header.append(name)
        cells.append(lambda parts, _, i=i, m=metric: parts[i].get(m))
        if any(bound[i].get(metric) for bound in bounds):
            header += [f"{name}_low", f"{name}_high"]
            cells.append(lambda _, bound, i=i, m=metric: (bound[i].get(m) or [None, None])[0])
            cells.append(lambda _, bound, i=i, m=metric: (bound[i].get(m) or [None, None])[1])
    rows = [
        [
            str(run["run"]),
            str(run["dataset"]),
            str(run["target"]),
            _cell(run.get("target_unit")),
            _cell(run["metrics"].get("n")),
            *(_cell(cell(parts, bound)) for cell in cells),
        ]
        for run, parts, bound in zip(runs, sections, bounds, strict=True)
    ]
    return header, rows


def _cell(value) -> str:
    if value is None:
        return "NA"
    if isinstance(value, float):
        return format(value, ".6g")
    return str(value)


def write_summary(
    runs: Sequence[Mapping],
    metrics_files: Sequence[Path],
    output: Path,
) -> int:
    """Read each run's metrics.json (same order as ``runs``) and write the TSV; rows written."""
    if len(runs) != len(metrics_files):
        raise ValueError(f"{len(runs)} runs but {len(metrics_files)} metrics files")
    loaded = [
        {**run, "metrics": json.loads(Path(path).read_text()) or {}}
        for run, path in zip(runs, metrics_files, strict=True)
    ]
    header, rows = summary_table(loaded)
    with open(output, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return len(rows)


if __name__ == "__main__":  # under Snakemake's script: directive, which defines `snakemake`
    smk = globals()["snakemake"]
    count = write_summary(smk.params.runs, list(smk.input.metrics), Path(smk.output[0]))
    Path(smk.log[0]).write_text(f"summary of {count} run(s) in {smk.output[0]}\n")
