"""The predict stage (`aam predict`, rules predict and ensemble): a fine-tuned model's (or an
ensemble's) predictions in the target's own units, metrics beside the baselines when the truth
is known, and with the model's training table and split a domain-shift report of this table.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from aam.analysis.baselines import CONSTANTS
from aam.analysis.class_report import by_test_group, class_balance, one_class_splits, per_class
from aam.analysis.domain_shift import domain_shift_report
from aam.analysis.prediction_plots import plot_predictions
from aam.analysis.predictions import (
    MICROBIOME,
    model_label,
    prediction_table,
    read_model_inputs,
    read_model_predictions,
    resampled_text,
    scores_classes,
)
from aam.analysis.split_groups import split_groups
from aam.analysis.spread import near_constant_notes, one_class_predictions, prediction_spread
from aam.data.metadata import column_hint, load_metadata, numeric_column
from aam.data.novelty import NOVELTY_WARNING, novelty
from aam.data.samples import SampleSet
from aam.errors import InputError, NonFiniteError
from aam.models.files import load_model_file
from aam.runtime.atomic import atomic_output, check_output_dir, write_json
from aam.runtime.figures import figure_name
from aam.runtime.staging import localized
from aam.runtime.threads import usable_threads
from aam.training import inference
from aam.training.bootstrap import BOOTSTRAP_RESAMPLES, bootstrap_intervals, paired_differences
from aam.training.config import RuntimeConfig
from aam.training.data.study import Labels, Study, load_study
from aam.training.data.study_options import StudyOptions
from aam.training.data.target_scale import TargetScale, check_scalable
from aam.training.device import resolve_device
from aam.training.metrics import classification_metrics, regression_metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PredictOptions:
    """What `aam predict` was asked, typed (its flags: ``aam.commands.predict``)."""

    model: list[Path]  # model.pt files; several: an ensemble
    table: Path
    output_dir: Path
    metadata: Path | None
    split: Path | None
    subset: str  # the split predicted with ``split``
    baselines: list[Path]
    group_column: str | None
    split_group_column: str | None
    target_column: str | None
    training_table: Path | None
    training_split: Path | None
    dataset: str | None
    run: str | None
    target_unit: str | None
    figure_format: str
    scratch: str | None
    batch_size: int
    reading: StudyOptions
    runtime: RuntimeConfig


def predict(opts: PredictOptions) -> None:
    """Write predictions.tsv; with --metadata metrics.json and predicted_vs_true (scatter
    panels, confusion matrices for classes, or why nothing is scored); domain_shift.json with
    --training-table."""
    if opts.runtime.threads:
        torch.set_num_threads(usable_threads(opts.runtime.threads))
    device = resolve_device(opts.runtime.device)
    members = [load_model_file(path, "predictor", ("target", "categorical")) for path in opts.model]
    _check_members(opts.model, members)
    model, state = members[0]
    target, categorical = state["target"], state["categorical"]
    if categorical["columns"] and opts.metadata is None:
        raise InputError(
            f"{opts.model[0]}: the model uses covariates {categorical['columns']}; pass --metadata"
        )
    if (opts.training_table is None) != (opts.training_split is None):
        raise InputError("--training-table and --training-split: give both or neither")
    target = {**target, "column": opts.target_column or target["column"]}
    out_dir = check_output_dir(opts.output_dir, "output")
    study, shift = _read_inputs(opts, model.config, categorical)
    positions = study.subset(opts.subset) if opts.split else np.arange(len(study.samples))
    if not len(positions):
        raise InputError(f"{opts.split}: no samples in split {opts.subset!r}")
    ids = [study.samples.sample_ids[p] for p in positions]
    seen = _novelty(study.samples, positions, state, opts.table)
    # The truth and the groups are input: checked before the model runs.
    asked = opts.target_column is not None
    truth = _truth(opts.metadata, target, ids, asked) if opts.metadata is not None else None
    groups = _groups(opts.metadata, opts.group_column, ids) if opts.group_column else None
    if opts.split_group_column and not opts.split:
        raise InputError(
            f"--split-group-column {opts.split_group_column}: needs --split (the split that "
            "kept those groups whole); add --split or leave --split-group-column out"
        )
    flag = "--split-group-column" if opts.split_group_column else "--group-column"
    split_column = (opts.split_group_column or opts.group_column) if opts.split else None
    tested = _groups(opts.metadata, split_column, ids, flag) if split_column else None
    each = [
        _member_predictions(path, member, study, positions, device, opts.batch_size)
        for path, member in zip(opts.model, members, strict=True)
    ]
    predicted = ensemble_mean(each, bool(target["classes"]))
    table = prediction_table(ids, predicted, target["classes"])
    baselines, theirs = _baselines(opts.baselines, ids, target["classes"])
    models = {"model": predicted, **{f"{k}_baseline": v for k, v in baselines.items()}}
    metrics = None
    if opts.metadata is not None:
        # a split that kept groups whole: intervals resample those groups, not samples
        clusters = tested if opts.split_group_column else None
        scored = _metrics(models, truth, target, opts.metadata, ids, groups, clusters)
        metrics = {**scored, "novelty": seen}
        metrics["inputs"] = {
            "model": [MICROBIOME, *categorical["columns"]],
            **{f"{k}_baseline": theirs[k] for k in baselines},
        }
        if opts.target_unit:
            metrics["target_unit"] = opts.target_unit
        if len(opts.model) > 1:
            metrics["ensemble"] = [str(path) for path in opts.model]
        if tested is not None:
            train = [study.samples.sample_ids[p] for p in study.subset("train")]
            trained = _groups(opts.metadata, split_column, train, flag)
            metrics["split_groups"] = split_groups(tested, trained)
        if opts.split and "per_class" in metrics:
            metrics["class_balance"] = _class_balance(opts.metadata, study, target)
    if truth is not None:
        table["true"] = truth
    with atomic_output(out_dir / "predictions.tsv") as tmp:
        table.to_csv(tmp, sep="\t", index=False, float_format="%.6g")
    if shift is not None:
        write_json(out_dir / "domain_shift.json", shift)
    if metrics is not None:
        write_json(out_dir / "metrics.json", metrics)
        plot = out_dir / figure_name("predicted_vs_true", opts.figure_format)
        no_metrics = metrics.get("no_metrics")
        labels = {"unit": opts.target_unit, "dataset": opts.dataset, "run": opts.run}
        plot_predictions(plot, models, truth, target, no_metrics, groups, **labels)
    log.info("wrote %d predictions to %s", len(ids), out_dir / "predictions.tsv")
    for line in metrics_lines(metrics or {}):
        log.info("%s", line)
    for note in near_constant_notes(metrics or {}, (metrics or {}).get("group_column")):
        log.warning("%s", note)


def _read_inputs(opts: PredictOptions, config, categorical: dict) -> tuple[Study, dict | None]:
    """The study of the table to predict (copied to ``scratch`` first, if given) and, with a
    training table and split, its domain-shift report against them."""
    inputs = {
        "table": opts.table,
        "metadata": opts.metadata,
        "split": opts.split,
        "training_table": opts.training_table,
        "training_split": opts.training_split,
    }
    with localized(inputs, opts.scratch) as local:
        study = load_study(
            local["table"],
            max_bp=config.max_bp,
            labels=Labels.of(
                local.get("metadata"),
                categorical=categorical["columns"],
                levels=categorical["levels"],
            ),
            split_path=local.get("split"),
            reading=opts.reading,
            training=False,
        )
        if opts.training_table is None:
            return study, None
        shift = domain_shift_report(
            local["table"],
            local.get("metadata"),
            local["training_table"],
            local["training_split"],
            study.samples,
            categorical["levels"],
            config.token_limit,
            opts.reading.rarefy_depth,
        )
    return study, shift


def _member_predictions(
    path: Path,
    member: tuple,
    study: Study,
    positions: np.ndarray,
    device: torch.device,
    batch_size: int,
) -> np.ndarray:
    """One model's predictions of ``positions`` in the target's units (class probabilities
    for classes), on ``device`` and then back on the CPU; NonFiniteError for a NaN."""
    model, state = member
    scaled = state["target"]
    scale = None if scaled["classes"] else TargetScale(mean=scaled["mean"], std=scaled["std"])
    predicted = inference.predict(
        model.to(device),
        study,
        positions,
        device,
        batch_size=batch_size,
        token_limit=model.config.token_limit,
        scale=scale,
    )
    _check_finite(predicted, path)
    model.cpu()
    return predicted


def _baselines(paths: list[Path], ids: list[str], classes) -> tuple[dict, dict]:
    """The baselines' predictions of ``ids`` by model name, and each one's inputs."""
    baselines, theirs = {}, {}
    for path in paths:
        found = read_model_predictions(path, ids, classes)
        clash = sorted(set(found) & set(baselines))
        if clash:
            raise InputError(f"{path}: model(s) {clash} also in another --baselines file")
        baselines |= found
        theirs |= read_model_inputs(path)
    return baselines, theirs


def metrics_lines(metrics: dict) -> list[str]:
    """metrics.json as a few lines: each scored model (AAM first, then the baselines) with
    its metrics and their 95% intervals, then AAM minus each baseline with its paired
    interval; none without metrics."""
    names = [k for k in metrics if k == "model" or k.endswith("_baseline")]
    if not names:
        return []
    group, classifier = metrics.get("group_column"), scores_classes(metrics.get("model", {}))
    width = max(len(model_label(name, group, classifier)) for name in names)
    lines = [f"metrics of {metrics['n']} samples ({metrics['target']}), 95% bootstrap intervals:"]
    for name in names:
        cells = []
        for key, value in metrics[name].items():
            low, high = metrics["intervals"][name].get(key) or (None, None)
            interval = "" if low is None else f" [{low:.3g}, {high:.3g}]"
            cells.append(f"{key} {_number(value)}{interval}")
        lines.append(f"  {model_label(name, group, classifier):<{width}}  " + ", ".join(cells))
    for name, differences in metrics.get("differences", {}).items():
        cells = []
        for key, difference in differences.items():
            value, (low, high) = difference["value"], difference["interval"]
            interval = "" if low is None else f" [{low:+.3g}, {high:+.3g}]"
            cells.append(f"{key} {'undefined' if value is None else f'{value:+.3g}'}{interval}")
        lines.append(f"  AAM - {model_label(name, group, classifier)}: " + ", ".join(cells))
    return lines


def _number(value: float | None) -> str:
    return "undefined" if value is None or not math.isfinite(value) else f"{value:.3g}"


def _novelty(samples: SampleSet, positions: np.ndarray, state: dict, table: Path) -> dict | None:
    """What of the predicted samples the model never saw (``aam.data.novelty``), logged, with
    a warning line above the threshold; None (logged) for a model file that lacks its
    training ASVs."""
    if "training_asvs" not in state:
        log.info("the model file records no training ASVs (an older aam wrote it): novelty unknown")
        return None
    found = novelty(samples, positions, state["training_asvs"].numpy())
    log.info(
        "novelty: %d of %d ASVs (%.1f%% of the reads) of %s were in no training sample",
        found["unseen_asvs"],
        found["asvs"],
        100 * found["unseen_read_fraction"],
        table,
    )
    if found["none_shared"]:
        log.warning(
            "%s shares no ASV with the model's training samples: the predictions rest on "
            "sequence similarity alone; check that the table is the same gene region and "
            "ASV method (metrics.json: novelty.none_shared)",
            table,
        )
    elif found["warning"]:
        log.warning(
            "%.0f%% of the reads of %s are on ASVs the model never saw in training (warning "
            "above %.0f%%): read its metrics as those of a new domain",
            100 * found["unseen_read_fraction"],
            table,
            100 * NOVELTY_WARNING,
        )
    return found


def ensemble_mean(predictions: list[np.ndarray], classes: bool) -> np.ndarray:
    """The ensemble's prediction: the members' mean (of probabilities for ``classes``, whose
    predictions are log-probabilities: the log of their mean is returned)."""
    if len(predictions) == 1:
        return predictions[0]
    stacked = np.stack(predictions)
    if not classes:
        return stacked.mean(axis=0)
    return np.logaddexp.reduce(stacked, axis=0) - np.log(len(predictions))


def _check_members(paths: list[Path], members: list[tuple]) -> None:
    """InputError naming the file when the models of an ensemble predict different targets,
    read other covariates or nucleotide lengths."""
    first = members[0][1]
    for path, (model, state) in zip(paths[1:], members[1:], strict=True):
        for what, mine, theirs in (
            ("target", state["target"]["column"], first["target"]["column"]),
            ("classes", state["target"]["classes"], first["target"]["classes"]),
            ("covariates", state["categorical"], first["categorical"]),
            ("max_bp", model.config.max_bp, members[0][0].config.max_bp),
        ):
            if mine != theirs:
                raise InputError(
                    f"{path}: its {what} ({mine}) differ from {paths[0]}'s ({theirs}); an "
                    "ensemble averages models of one target, trained on the same inputs"
                )


def _check_finite(predicted: np.ndarray, model_path: Path) -> None:
    """NonFiniteError (nothing written) when any prediction is NaN or infinite."""
    bad = ~np.isfinite(predicted).reshape(len(predicted), -1).all(axis=1)
    if bad.any():
        raise NonFiniteError(
            f"{model_path}: {int(bad.sum())} of {len(bad)} predictions are NaN or infinite; "
            "the model's weights or this table's inputs overflow: retrain the model (e.g. "
            "with a lower --lr) or check the table"
        )


def _truth(metadata_path: Path, target: dict, ids: list[str], asked: bool) -> pd.Series | None:
    """Known target values for ``ids``; None when the metadata lacks the model's target column
    (predictions without metrics), an InputError when it lacks the one ``--target-column``
    (``asked``) names."""
    metadata = load_metadata(metadata_path)
    if target["column"] not in metadata.columns:
        if asked:
            raise InputError(
                f"{metadata_path}: no column {target['column']!r} for --target-column "
                f"({column_hint(target['column'], metadata.columns)}); name the column that "
                "holds the truth, or leave the flag out to predict without it"
            )
        log.info("%s has no %s column: no metrics", metadata_path, target["column"])
        return None
    if target["classes"]:
        values = metadata[target["column"]].reindex(ids)
    else:  # as training reads it: empty cells missing, any other non-number refused
        values = numeric_column(metadata, target["column"], metadata_path).reindex(ids)
        scale = TargetScale(mean=target["mean"], std=target["std"])
        check_scalable(values.to_numpy(np.float64), scale, metadata_path, target["column"])
    return values.reset_index(drop=True)


def _class_balance(metadata_path: Path, study: Study, target: dict) -> dict:
    """``class_balance`` of the study's split (``aam.analysis.class_report``), with a warning
    line for a validation or test split of one class."""
    ids = list(study.samples.sample_ids)
    labels = load_metadata(metadata_path)[target["column"]].reindex(ids)
    balance = class_balance(study.split.reindex(ids), labels, target["classes"])
    for name in one_class_splits(balance):
        log.warning(
            "the %s split holds one class only (%s): its accuracy says little and its AUC is "
            "undefined (metrics.json: class_balance)",
            name,
            ", ".join(f"{c} {n}" for c, n in balance[name].items()),
        )
    return balance


def _groups(
    metadata_path: Path | None, column: str, ids: list[str], flag: str = "--group-column"
) -> pd.Series:
    """The ``column`` value (``flag``'s) of each of ``ids`` as text (a missing one:
    "unknown")."""
    if metadata_path is None:
        raise InputError(f"{flag} {column}: needs --metadata")
    metadata = load_metadata(metadata_path)
    if column not in metadata.columns:
        raise InputError(
            f"{metadata_path}: no column {column!r} for {flag} "
            f"(columns: {', '.join(map(str, metadata.columns))})"
        )
    values = metadata[column].reindex(ids)
    labels = values.astype(str).where(values.notna(), "unknown")
    return labels.reset_index(drop=True).rename(column)


def _metrics(
    models: dict[str, np.ndarray],
    truth: pd.Series | None,
    target: dict,
    metadata_path: Path,
    ids: list[str],
    groups: pd.Series | None = None,
    clusters: pd.Series | None = None,
) -> dict:
    """metrics.json content: each model's metrics on the samples with a known truth and their
    bootstrap intervals (over whole ``clusters`` where given: the groups a split kept whole),
    AAM minus each baseline (paired intervals), for a regression how much each model's
    predictions vary beside the target (``spread``, ``aam.analysis.spread``), for a classifier
    each class's scores (``per_class``) and with ``clusters`` each test group's
    (``by_test_group``, ``aam.analysis.class_report``), with ``groups``
    each model's metrics per group (``by_group``), and which samples were left out and why
    (``excluded``); without any known truth ``no_metrics`` says why. NonFiniteError when a
    metric is not finite."""
    column = target["column"]
    if truth is None:
        reason = f"{metadata_path} has no column {column!r}"
        return {"n": 0, "target": column, "no_metrics": reason, "excluded": {}}
    lookup = {c: k for k, c in enumerate(target["classes"])}
    known, excluded = _scorable(truth, lookup, ids)
    if not known.any():
        log.info("%s: no sample has a known %s: no metrics", metadata_path, column)
        reason = f"no predicted sample has a {column!r} value the model can be scored on"
        return {"n": 0, "target": column, "no_metrics": reason, "excluded": excluded}
    if lookup:
        y = truth[known].astype(str).map(lookup).to_numpy(dtype=np.int64)

        def score(values: np.ndarray, idx: np.ndarray) -> dict[str, float]:
            return classification_metrics(torch.from_numpy(values[idx]), y[idx])
    else:
        y = truth[known].to_numpy(dtype=np.float64)
        for constant in CONSTANTS:  # without --baselines, those the model file records
            if constant in target:
                models.setdefault(f"{constant}_baseline", np.full(len(known), target[constant]))

        def score(values: np.ndarray, idx: np.ndarray) -> dict[str, float]:
            return regression_metrics(values[idx], y[idx])

    everything = np.arange(len(y))
    metrics = {"n": int(known.sum()), "target": column, "excluded": excluded}
    units = None if clusters is None else clusters[known].to_numpy()
    intervals = {}
    for name, values in models.items():
        metrics[name] = score(values[known], everything)
        _check_metrics(metrics[name], name, metadata_path, column)
        intervals[name] = bootstrap_intervals(
            lambda idx, v=values[known]: score(v, idx), len(y), units
        )
    metrics["intervals"] = intervals
    if units is not None:
        metrics["interval_groups"] = {"column": clusters.name, "n": len(set(units.tolist()))}
    whole = " (the split kept them whole)" if units is not None else ""
    metrics["interval_note"] = (
        f"95% percentile bootstrap over {resampled_text(len(y), metrics.get('interval_groups'))}"
        f"{whole} ({BOOTSTRAP_RESAMPLES} resamples, the same for every model)"
    )
    baselines = {name: v[known] for name, v in models.items() if name != "model"}
    metrics["differences"] = paired_differences(
        score, models["model"][known], baselines, len(y), units
    )
    metrics["difference_note"] = (
        "AAM minus each baseline on the same samples, with the 95% interval of the difference "
        "over the same bootstrap draws (paired): an interval that excludes 0 is a difference"
    )
    if lookup:
        scored = {name: v[known] for name, v in models.items()}
        metrics["per_class"] = per_class(scored, y, target["classes"], units)
        constants = {f"{name}_baseline" for name in CONSTANTS}
        varying = {k: v for k, v in scored.items() if k not in constants}
        metrics["one_class"] = one_class_predictions(varying, target["classes"])
        if units is not None:
            metrics["by_test_group"] = by_test_group(scored, y, units, target["classes"])
    else:  # how much each model's predictions vary, but the constants'
        constants = {f"{name}_baseline" for name in CONSTANTS}
        varying = {k: v[known] for k, v in models.items() if k not in constants}
        metrics["spread"] = prediction_spread(varying, y)
    if groups is not None:
        metrics["group_column"] = groups.name
        metrics["by_group"] = _by_group(score, models, known, groups[known].to_numpy())
    fitted = (
        "mean = the majority class (the training class frequencies: its prediction is the "
        "most frequent training class)"
        if lookup
        else "mean = the training mean, median = the training median"
    )
    metrics["baseline_note"] = (
        f"baselines are fitted on the training samples: {fitted}, random_forest = a random "
        "forest on relative abundances (aam baselines)"
    )
    return metrics


def _scorable(truth: pd.Series, lookup: dict[str, int], ids: list[str]) -> tuple[np.ndarray, dict]:
    """Which samples can be scored (a truth value; for a classifier, a class the model knows)
    and, by reason, the IDs of those that cannot."""
    known = truth.notna().to_numpy()
    excluded = {}
    if not known.all():
        excluded["no_target_value"] = [ids[k] for k in np.flatnonzero(~known)]
    if lookup:
        unseen = known & truth.astype(str).map(lookup).isna().to_numpy()
        if unseen.any():
            labels = truth.astype(str).to_numpy()
            excluded["class_not_in_training"] = {
                label: [ids[k] for k in np.flatnonzero(unseen & (labels == label))]
                for label in sorted(set(labels[unseen]))
            }
        known = known & ~unseen
    return known, excluded


def _by_group(
    score: Callable, models: dict[str, np.ndarray], known: np.ndarray, labels: np.ndarray
) -> list[dict]:
    """Each model's metrics per group of the scored samples (``labels``: their groups),
    largest group first."""
    return [
        {
            "group": group,
            "n": int((labels == group).sum()),
            **{
                name: score(v[known], np.flatnonzero(labels == group)) for name, v in models.items()
            },
        }
        for group in sorted(set(labels), key=lambda g: (-(labels == g).sum(), g))
    ]


def _check_metrics(metrics: dict, part: str, metadata_path: Path, column: str) -> None:
    """NonFiniteError for a non-finite metric. An undefined R^2 (every true value equal) or
    AUC (one class only) is allowed: metrics.json records it as null."""
    bad = [k for k, v in metrics.items() if not math.isfinite(v) and k not in ("r2", "auc")]
    if bad:
        raise NonFiniteError(
            f"{metadata_path}: {part} {', '.join(bad)} not finite (the {column!r} values or "
            "their errors overflow); rescale the column or check its values"
        )
