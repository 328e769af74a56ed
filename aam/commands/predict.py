"""`aam predict`: predictions in the target's own units, metrics when the truth is known."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from aam.atomic import atomic_output
from aam.data import load_metadata
from aam.errors import InputError
from aam.models.files import load_model_file
from aam.staging import inputs_on_scratch
from aam.training.config import TrainConfig
from aam.training.device import resolve_device
from aam.training.metrics import classification_metrics, regression_metrics
from aam.training.objective import Objective, TargetScale
from aam.training.study import load_study

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam predict`."""
    parser.add_argument("--model", required=True, type=Path, help="model.pt from `aam train`")
    parser.add_argument("--table", required=True, type=Path)
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument(
        "--metadata",
        type=Path,
        help="truth for metrics; needed by models with categorical covariates",
    )
    parser.add_argument("--split", type=Path, help="predict only one split of this split.tsv")
    parser.add_argument("--subset", default="test", choices=["train", "val", "test"])
    parser.add_argument("--rarefy-depth", type=int)
    parser.add_argument("--scratch", help="node-local dir to copy inputs to first (as in train)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--allow-missing-samples", action="store_true")
    # fmt: on


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
        raise InputError(f"{args.model}: the model uses covariates {categorical['columns']}; "
                         "pass --metadata")  # fmt: skip
    with inputs_on_scratch(args, "table", "metadata", "split"):
        study = load_study(
            args.table, max_bp=model.config.max_bp, metadata_path=args.metadata,
            categorical=categorical["columns"], category_levels=categorical["levels"],
            split_path=args.split, val_fraction=0.0, rarefy_depth=args.rarefy_depth,
            allow_missing=args.allow_missing_samples,
        )  # fmt: skip
    positions = study.subset(args.subset) if args.split else np.arange(len(study.samples))
    if not len(positions):
        raise InputError(f"{args.split}: no samples in split {args.subset!r}")
    cfg = TrainConfig(batch_size=args.batch_size)
    scale = TargetScale(mean=target["mean"], std=target["std"])
    objective = Objective(cfg, predictor=True, study=study, token_limit=model.config.token_limit,
                          scale=scale)  # fmt: skip
    model.to(device)
    predicted = objective.predictions(model, positions, device)
    ids = [study.samples.sample_ids[p] for p in positions]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    table = _prediction_table(ids, predicted, target["classes"])
    truth = _truth(args.metadata, target, ids) if args.metadata else None
    if truth is not None:
        table["true"] = truth
    with atomic_output(args.output_dir / "predictions.tsv") as tmp:
        table.to_csv(tmp, sep="\t", index=False, float_format="%.6g")
    if truth is not None:
        _write_metrics(args.output_dir, table, predicted, truth, target)
    log.info("wrote %d predictions to %s", len(ids), args.output_dir / "predictions.tsv")


def _prediction_table(ids: list[str], predicted: np.ndarray, classes: list[str]) -> pd.DataFrame:
    if not classes:
        return pd.DataFrame({"sample_id": ids, "prediction": predicted})
    probs = np.exp(predicted)
    table = pd.DataFrame({"sample_id": ids, "prediction": [classes[k] for k in probs.argmax(1)]})
    for k, label in enumerate(classes):
        table[f"prob_{label}"] = probs[:, k]
    return table


def _truth(metadata_path: Path, target: dict, ids: list[str]) -> pd.Series | None:
    """Known target values for ``ids`` (None when the metadata lacks the column)."""
    metadata = load_metadata(metadata_path)
    if target["column"] not in metadata.columns:
        log.info("%s has no %s column: no metrics", metadata_path, target["column"])
        return None
    values = metadata[target["column"]].reindex(ids)
    if not target["classes"]:
        values = pd.to_numeric(values, errors="coerce")
    return values.reset_index(drop=True)


def _write_metrics(out_dir: Path, table, predicted, truth: pd.Series, target: dict) -> None:
    known = truth.notna().to_numpy()
    if target["classes"]:
        lookup = {c: k for k, c in enumerate(target["classes"])}
        y = truth[known].astype(str).map(lookup)
        ok = y.notna().to_numpy()
        model_metrics = classification_metrics(
            torch.from_numpy(predicted[known][ok]), y[ok].to_numpy(dtype=np.int64)
        )
        metrics = {"n": int(ok.sum()), "model": model_metrics}
    else:
        y = truth[known].to_numpy(dtype=np.float64)
        baseline = regression_metrics(np.full(len(y), target["mean"]), y)
        metrics = {"n": int(known.sum()), "target": target["column"],
                   "model": regression_metrics(predicted[known], y),
                   "mean_baseline": baseline,
                   "baseline_note": "predicts the training-set mean for every sample"}  # fmt: skip
        _plot(out_dir / "predicted_vs_true.png", y, predicted[known], target["column"])
    with atomic_output(out_dir / "metrics.json") as tmp:
        tmp.write_text(json.dumps(metrics, indent=2) + "\n")


def _plot(path: Path, truth: np.ndarray, predicted: np.ndarray, column: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.scatter(truth, predicted, s=10, alpha=0.7)
    lo, hi = float(min(truth.min(), predicted.min())), float(max(truth.max(), predicted.max()))
    ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
    ax.set_xlabel(f"true {column}")
    ax.set_ylabel(f"predicted {column}")
    mae = float(np.abs(truth - predicted).mean())
    ax.set_title(f"n={len(truth)}, MAE {mae:.2f}")
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
