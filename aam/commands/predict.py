"""`aam predict`: predictions in the target's own units, metrics when the truth is known."""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from aam.atomic import atomic_output, check_output_dir, write_json
from aam.data import load_metadata
from aam.data.split import SPLITS
from aam.errors import InputError, NonFiniteError
from aam.models.files import load_model_file
from aam.options import add_options
from aam.predictions import prediction_table, read_model_predictions
from aam.staging import localized
from aam.training.config import RuntimeConfig, StudyOptions
from aam.training.device import resolve_device
from aam.training.inference import predict
from aam.training.metrics import (
    BOOTSTRAP_RESAMPLES,
    bootstrap_intervals,
    classification_metrics,
    regression_metrics,
)
from aam.training.objective import TargetScale
from aam.training.study import load_study

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam predict`."""
    parser.add_argument("--model", required=True, type=Path, help="model.pt from `aam finetune`")
    parser.add_argument("--table", required=True, type=Path)
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument(
        "--metadata",
        type=Path,
        help="truth for metrics; needed by models with categorical covariates",
    )
    parser.add_argument("--split", type=Path, help="predict only one split of this split.tsv")
    parser.add_argument("--subset", default="test", choices=SPLITS)
    parser.add_argument(
        "--baselines",
        type=Path,
        help="`aam baselines` predictions, scored beside the model on the same samples",
    )
    parser.add_argument("--scratch", help="node-local dir to copy inputs to first")
    parser.add_argument("--batch-size", type=int, default=32)
    add_options(parser, StudyOptions, "predict")
    add_options(parser, RuntimeConfig, "predict")


def run(args: argparse.Namespace) -> None:
    """Write predictions.tsv, and metrics.json + predicted_vs_true.png when truth is known."""
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.batch_size < 1:
        raise InputError(f"--batch-size {args.batch_size}: must be at least 1")
    device = resolve_device(args.device)
    model, state = load_model_file(args.model, "predictor", ("target", "categorical"))
    target, categorical = state["target"], state["categorical"]
    if categorical["columns"] and args.metadata is None:
        raise InputError(
            f"{args.model}: the model uses covariates {categorical['columns']}; pass --metadata"
        )
    out_dir = check_output_dir(args.output_dir, "output")
    inputs = {"table": args.table, "metadata": args.metadata, "split": args.split}
    with localized(inputs, args.scratch) as local:
        study = load_study(
            local["table"],
            max_bp=model.config.max_bp,
            metadata_path=local.get("metadata"),
            categorical=categorical["columns"],
            category_levels=categorical["levels"],
            split_path=local.get("split"),
            val_fraction=0.0,
            rarefy_depth=args.rarefy_depth,
            allow_missing=args.allow_missing_samples,
        )
    positions = study.subset(args.subset) if args.split else np.arange(len(study.samples))
    if not len(positions):
        raise InputError(f"{args.split}: no samples in split {args.subset!r}")
    scale = None if target["classes"] else TargetScale(mean=target["mean"], std=target["std"])
    predicted = predict(
        model.to(device),
        study,
        positions,
        device,
        batch_size=args.batch_size,
        token_limit=model.config.token_limit,
        scale=scale,
    )
    _check_finite(predicted, args.model)
    ids = [study.samples.sample_ids[p] for p in positions]
    table = prediction_table(ids, predicted, target["classes"])
    baselines = {}
    if args.baselines:
        baselines = read_model_predictions(args.baselines, ids, target["classes"])
    truth = _truth(args.metadata, target, ids) if args.metadata else None
    metrics = None
    if truth is not None:
        table["true"] = truth
        models = {"model": predicted, **{f"{k}_baseline": v for k, v in baselines.items()}}
        metrics = _metrics(models, truth, target, args.metadata)
    with atomic_output(out_dir / "predictions.tsv") as tmp:
        table.to_csv(tmp, sep="\t", index=False, float_format="%.6g")
    if metrics is not None:
        _write_metrics(out_dir, metrics, models, truth, target)
    log.info("wrote %d predictions to %s", len(ids), out_dir / "predictions.tsv")


def _check_finite(predicted: np.ndarray, model_path: Path) -> None:
    """NonFiniteError (nothing written) when any prediction is NaN or infinite."""
    bad = ~np.isfinite(predicted).reshape(len(predicted), -1).all(axis=1)
    if bad.any():
        raise NonFiniteError(
            f"{model_path}: {int(bad.sum())} of {len(bad)} predictions are NaN or infinite; "
            "the model's weights or this table's inputs overflow: retrain the model (e.g. "
            "with a lower --lr) or check the table"
        )


def _truth(metadata_path: Path, target: dict, ids: list[str]) -> pd.Series | None:
    """Known target values for ``ids`` (None when the metadata lacks the column)."""
    metadata = load_metadata(metadata_path)
    if target["column"] not in metadata.columns:
        log.info("%s has no %s column: no metrics", metadata_path, target["column"])
        return None
    values = metadata[target["column"]].reindex(ids)
    if not target["classes"]:
        values = pd.to_numeric(values, errors="coerce")
        infinite = values.index[np.isinf(values.to_numpy(dtype=np.float64))]
        if len(infinite):
            raise InputError(
                f"{metadata_path}: column {target['column']!r} is infinite for "
                f"{', '.join(map(str, infinite[:5]))}; give finite values or leave them empty"
            )
    return values.reset_index(drop=True)


def _metrics(
    models: dict[str, np.ndarray], truth: pd.Series, target: dict, metadata_path: Path
) -> dict | None:
    """metrics.json content: each model's metrics on the samples with a known truth and their
    bootstrap intervals (None when no sample has a known truth); NonFiniteError when a metric
    is not finite."""
    known = truth.notna().to_numpy()
    lookup = {c: k for k, c in enumerate(target["classes"])}
    if lookup:
        known = known & truth.astype(str).map(lookup).notna().to_numpy()
    if not known.any():
        log.info("%s: no sample has a known %s: no metrics", metadata_path, target["column"])
        return None
    if lookup:
        y = truth[known].astype(str).map(lookup).to_numpy(dtype=np.int64)

        def score(values: np.ndarray, idx: np.ndarray) -> dict[str, float]:
            return classification_metrics(torch.from_numpy(values[idx]), y[idx])
    else:
        y = truth[known].to_numpy(dtype=np.float64)
        models.setdefault("mean_baseline", np.full(len(known), target["mean"]))

        def score(values: np.ndarray, idx: np.ndarray) -> dict[str, float]:
            return regression_metrics(values[idx], y[idx])

    everything = np.arange(len(y))
    metrics = {"n": int(known.sum()), "target": target["column"]}
    intervals = {}
    for name, values in models.items():
        metrics[name] = score(values[known], everything)
        _check_metrics(metrics[name], name, metadata_path, target["column"])
        intervals[name] = bootstrap_intervals(lambda idx, v=values[known]: score(v, idx), len(y))
    metrics["intervals"] = intervals
    metrics["interval_note"] = (
        f"95% percentile bootstrap over the {len(y)} samples ({BOOTSTRAP_RESAMPLES} resamples, "
        "the same for every model)"
    )
    metrics["baseline_note"] = (
        "baselines are fitted on the training samples: mean = the training mean (for classes, "
        "the training class frequencies), random_forest = a random forest on relative "
        "abundances (aam baselines)"
    )
    return metrics


def _check_metrics(metrics: dict, part: str, metadata_path: Path, column: str) -> None:
    """NonFiniteError for a non-finite metric. An undefined R^2 (every true value equal) or
    AUC (one class only) is allowed: metrics.json records it as null."""
    bad = [k for k, v in metrics.items() if not math.isfinite(v) and k not in ("r2", "auc")]
    if bad:
        raise NonFiniteError(
            f"{metadata_path}: {part} {', '.join(bad)} not finite (the {column!r} values or "
            "their errors overflow); rescale the column or check its values"
        )


def _write_metrics(
    out_dir: Path, metrics: dict, models: dict[str, np.ndarray], truth: pd.Series, target: dict
) -> None:
    """metrics.json, and predicted_vs_true.png (a panel per model) for a regression target."""
    write_json(out_dir / "metrics.json", metrics)
    if not target["classes"]:
        known = truth.notna().to_numpy()
        y = truth[known].to_numpy(dtype=np.float64)
        panels = {name: values[known] for name, values in models.items()}
        _plot(out_dir / "predicted_vs_true.png", y, panels, target["column"])


def _plot(path: Path, truth: np.ndarray, panels: dict[str, np.ndarray], column: str) -> None:
    """Predicted vs true, one panel per model, on shared axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1, len(panels), figsize=(4 * len(panels), 4.2), sharex=True, sharey=True, squeeze=False
    )
    values = np.concatenate([truth, *panels.values()])
    lo, hi = float(values.min()), float(values.max())
    for ax, (name, predicted) in zip(axes[0], panels.items(), strict=True):
        ax.scatter(truth, predicted, s=10, alpha=0.7)
        ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
        ax.set_xlabel(f"true {column}")
        mae = float(np.abs(truth - predicted).mean())
        ax.set_title(f"{name.removesuffix('_baseline')}: n={len(truth)}, MAE {mae:.2f}")
    axes[0][0].set_ylabel(f"predicted {column}")
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
