"""Up-front checks of a dataset, run by the workflow before any job is submitted."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from aam.data.metadata import load_metadata, numeric_column
from aam.data.split import check_folds, given_split, read_split
from aam.data.table import check_training_counts, load_table
from aam.errors import InputError
from aam.options import OptionError
from aam.training.config import CLASSIFIER_METRICS, REGRESSION_METRICS, check_best_metric
from aam.unifrac.shard_plan import check_shard_count


def check_dataset(
    name: str,
    table: Path,
    metadata: Path,
    target: str,
    categorical: list[str],
    tree: Path | None,
    split_column: str | None = None,
    split_file: Path | None = None,
    classifier: bool = False,
) -> pd.Series:
    """Files exist, the counts fit training's float32, the target and covariate columns exist,
    table and metadata share samples, and a user-given split (a metadata column or a file)
    labels every sample with a target and leaves enough of them for training; a regression
    target (not ``classifier``) holds numbers and is not declared categorical (``#q2:types``).
    Returns the target value of each shared sample that has one (index: sample ID)."""
    if split_column and split_file:
        raise InputError(f"datasets.{name}: split_column and split_file both set; keep one of them")
    files = (("table", table), ("metadata", metadata), ("tree", tree), ("split_file", split_file))
    for label, path in files:
        if path is not None and not Path(path).is_file():
            raise InputError(f"datasets.{name}.{label}: {path} not found; fix the path in config")
    columns = load_metadata(metadata)
    named = [target, *categorical, *([split_column] if split_column else [])]
    missing = [c for c in named if c not in columns.columns]
    if missing:
        raise InputError(
            f"datasets.{name}: {metadata} has no column(s) {missing} "
            f"(columns: {', '.join(map(str, columns.columns))}); "
            "fix target/categorical/split_column"
        )
    counts = load_table(table)
    check_training_counts(counts, f"datasets.{name}.table: {table}")
    shared = set(map(str, counts.ids())) & set(columns.index)
    if not shared:
        raise InputError(
            f"datasets.{name}: {table} and {metadata} share no sample IDs; "
            "check that both files describe the same samples"
        )
    if classifier:
        targets = columns[target].reindex(sorted(shared))
    else:  # numbers, as training reads them: text or a categorical declaration stop here
        source = f"datasets.{name}.metadata: {metadata}"
        targets = numeric_column(columns, target, source).reindex(sorted(shared))
    with_target = list(targets.index[targets.notna()])
    if split_column:
        source = f"datasets.{name}.split_column: {metadata} column {split_column!r}"
        given_split(columns[split_column], with_target, source)
    if split_file:
        given_split(
            read_split(split_file), with_target, f"datasets.{name}.split_file: {split_file}"
        )
    return targets.dropna()


def check_predict_on(run: str, spec: dict, name: str, datasets: dict) -> None:
    """Dataset ``name`` of ``runs.<run>.predict_on`` (run config ``spec``) can be predicted by
    the run's model: another configured dataset, a target of the same kind, the model's
    covariate columns."""
    if name not in datasets or name == spec["dataset"]:
        others = [d for d in datasets if d != spec["dataset"]]
        raise InputError(
            f"runs.{run}.predict_on: {name!r} is not a dataset other than the run's own "
            f"({spec['dataset']}); datasets: {', '.join(others) or 'none other'}"
        )
    own, other = datasets[spec["dataset"]], datasets[name]
    if other["classifier"] != own["classifier"]:
        kinds = {True: "classes", False: "numbers"}
        raise InputError(
            f"runs.{run}.predict_on: datasets.{name}.target holds {kinds[other['classifier']]}, "
            f"the run's model predicts {kinds[own['classifier']]}; set datasets.{name}.classifier "
            "to match or drop it from predict_on"
        )
    columns = load_metadata(other["metadata"]).columns
    missing = [c for c in own["categorical"] if c not in columns]
    if missing:
        raise InputError(
            f"runs.{run}.predict_on: {other['metadata']} (datasets.{name}) has no covariate "
            f"column(s) {missing} the model uses; add them (empty cells map to the unknown "
            "category)"
        )


def check_run_metric(run: str, spec: dict, classifier: bool) -> None:
    """``runs.<run>.finetune.best_metric`` (run config ``spec``) is measured for its dataset's
    target kind (``classifier``), as `aam finetune` checks it when its job starts."""
    name = (spec.get("finetune") or {}).get("best_metric")
    if name is None:
        return
    measured, kind = (
        (CLASSIFIER_METRICS, "a classifier") if classifier else (REGRESSION_METRICS, "a regression")
    )
    try:
        check_best_metric(name, measured, f"for {kind} target (datasets.{spec['dataset']})")
    except OptionError as err:
        raise InputError(
            f"config runs.{run}.finetune.best_metric: {err.value!r} {err.reason}"
        ) from None


def check_cv(run: str, plan: dict, data: dict, targets: pd.Series) -> None:
    """``runs.<run>.cv`` (expanded ``plan``) fits its dataset (config ``data``, samples with a
    target ``targets``): no split of the dataset's own, and folds that can partition them."""
    dataset = plan["dataset"]
    if data["split_column"] or data["split_file"]:
        given = "split_column" if data["split_column"] else "split_file"
        raise InputError(
            f"config runs.{run}.cv: dataset {dataset} has its own split ({given}); "
            f"cross-validation makes its own folds: give the run a dataset entry without {given}"
        )
    check_folds(
        plan["folds"],
        len(targets),
        targets.astype(str).value_counts().to_dict() if data["classifier"] else None,
        f"config runs.{run}.cv.folds (dataset {dataset}, samples with a target)",
    )


def check_unifrac_shards(unifrac: dict, datasets: dict, names: Iterable[str]) -> None:
    """``unifrac.shards`` (config section ``unifrac``) fits: shards run the built-in engine on
    the CPU, and each dataset in ``names`` (those with a UniFrac matrix) has a sample per shard."""
    shards = unifrac["shards"]
    if shards == 1:
        return
    if (unifrac["engine"], unifrac["device"]) != ("builtin", "cpu"):
        raise InputError(
            f"config unifrac.shards: {shards} shards run the builtin engine on the cpu, not "
            f"engine {unifrac['engine']} on {unifrac['device']}; set unifrac.engine: builtin "
            "and unifrac.device: cpu, or unifrac.shards: 1"
        )
    for name in sorted(set(names)):
        table = datasets[name]["table"]
        source = f"config unifrac.shards (dataset {name}, {table})"
        check_shard_count(shards, load_table(table).shape[1], source)
