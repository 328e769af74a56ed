"""The predict stage (`aam predict`, rules predict and ensemble): a fine-tuned model's (or an
ensemble's) predictions in the target's own units, metrics beside the baselines when the truth
is known, and with the model's training table and split a domain-shift report of this table.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from aam.analysis.class_report import class_balance, one_class_splits
from aam.analysis.domain_shift import domain_shift_report
from aam.analysis.prediction_metrics import metrics_lines, score_predictions
from aam.analysis.prediction_plots import plot_predictions
from aam.analysis.prediction_tables import (
    MICROBIOME,
    prediction_table,
    read_model_inputs,
    read_model_predictions,
)
from aam.analysis.split_groups import split_groups
from aam.analysis.spread import near_constant_notes
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
from aam.training.config import RuntimeConfig
from aam.training.device import resolve_device
from aam.training.inputs.study import Labels, Study, load_study
from aam.training.inputs.study_options import StudyOptions
from aam.training.inputs.target_scale import TargetScale, check_scalable

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
        scored = score_predictions(models, truth, target, opts.metadata, ids, groups, clusters)
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
