"""`aam finetune`: fine-tune on a metadata target, optionally from a pretrained encoder."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from aam.commands.common import (
    TrainingOptions,
    add_common_arguments,
    prepare_outputs,
    resolve_auto_batch,
    resume_config,
    run_training,
    setup_run,
    train_batches,
    training_inputs,
    write_outputs,
)
from aam.commands.pretrain import architecture
from aam.data.novelty import sample_asvs
from aam.errors import InputError
from aam.models import ModelConfig, SequencePredictor
from aam.models.files import load_model_file
from aam.runtime.staging import localized
from aam.training.config import CLASSIFIER_METRICS, REGRESSION_METRICS, check_best_metric
from aam.training.distributed import DistContext
from aam.training.inference import encode_table_asvs
from aam.training.metrics import baseline_metrics
from aam.training.objective import Objective
from aam.training.study import load_study
from aam.training.target_scale import TargetScale, fit_target_scale

log = logging.getLogger(__name__)


@dataclass
class Target:
    """What `aam finetune` learns: a metadata column, with covariates and a pretrained base."""

    metadata: Path
    column: str
    classifier: bool
    categorical: list[str]
    encoder: Path | None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam finetune`."""
    target = parser.add_argument_group("target")
    target.add_argument("--metadata", required=True, type=Path, help="sample metadata TSV")
    target.add_argument("--target-column", required=True, help="metadata column to predict")
    target.add_argument("--classifier", action="store_true", help="the target is categorical")
    target.add_argument(
        "--categorical-columns",
        default="",
        help="comma-separated metadata columns used as covariates",
    )
    target.add_argument("--pretrained-encoder", type=Path, help="encoder.pt from aam pretrain")
    add_common_arguments(parser, "finetune")


def run(args: argparse.Namespace) -> None:
    """Fine-tune a SequencePredictor and write OUTPUT_DIR/model.pt (+ history, split)."""
    if args.classifier:
        check_best_metric(args.best_metric, CLASSIFIER_METRICS, "for a classifier")
    else:
        check_best_metric(args.best_metric, REGRESSION_METRICS, "for a regression target")
    target = Target(
        metadata=args.metadata,
        column=args.target_column,
        classifier=args.classifier,
        categorical=[c for c in args.categorical_columns.split(",") if c],
        encoder=args.pretrained_encoder,
    )
    finetune(TrainingOptions.from_args(args), target)


def finetune(opts: TrainingOptions, target: Target) -> None:
    """`aam finetune` with typed options (one writer per output directory:
    ``aam.runtime.run_lock``)."""
    device, ctx = setup_run(opts.runtime)
    with prepare_outputs(opts.paths, ctx, "model.pt", "aam finetune"):
        _finetune(opts, target, device, ctx)


def _finetune(
    opts: TrainingOptions, target: Target, device: torch.device, ctx: DistContext
) -> None:
    paths, cfg = opts.paths, opts.train
    encoder = load_model_file(target.encoder, "encoder")[1] if target.encoder else None
    if cfg.freeze_base and encoder is None:
        raise InputError("--freeze-base: needs --pretrained-encoder (a random base is useless)")
    base = encoder["config"] if encoder else None
    max_bp = ModelConfig.from_options(opts.model, base).max_bp
    inputs = training_inputs(paths, metadata=target.metadata)
    # Inside the block: a --unifrac matrix is read by rows (from --scratch) while training runs.
    with localized(inputs, paths.scratch) as local:
        study = load_study(
            local["table"],
            max_bp=max_bp,
            tree_path=local.get("tree"),
            unifrac_options=opts.distances,
            unifrac_path=local.get("unifrac"),
            metadata_path=local["metadata"],
            target=target.column,
            classifier=target.classifier,
            categorical=target.categorical,
            split_path=local.get("split"),
            val_fraction=opts.study.val_fraction,
            test_fraction=opts.study.test_fraction,
            seed=cfg.seed,
            rarefy_depth=opts.study.rarefy_depth,
            rarefy_each_epoch=opts.study.rarefy_each_epoch,
            allow_missing=opts.study.allow_missing_samples,
        )
        mcfg = ModelConfig.from_options(
            opts.model,
            base,
            out_dim=len(study.classes) if target.classifier else 1,
            classifier=target.classifier,
            categorical_cardinalities=[
                len(study.category_levels[c]) + 1 for c in target.categorical
            ],
        )
        torch.manual_seed(cfg.seed)
        model = SequencePredictor(mcfg)
        if encoder is not None:
            model.base.load_state_dict(encoder["model"])
        if cfg.freeze_base:
            model.freeze_base()
        train = study.subset("train")
        scale = TargetScale()
        if not study.classes:
            scale = fit_target_scale(study.targets, train, target.metadata, target.column)
        frozen = None
        if cfg.freeze_base:  # the base's ASV embeddings, computed once
            frozen = encode_table_asvs(model.to(device), study.samples, device)
        objective = Objective.of(cfg, predictor=True, study=study, ctx=ctx, scale=scale)
        batches = train_batches(study, objective, cfg, mcfg.token_limit, ctx, frozen)
        resolve_auto_batch(model, objective, batches, cfg, device)
        resume = resume_config(opts, study, architecture(mcfg.to_dict()))
        resume["target"] = {
            "column": target.column,
            "classes": study.classes,
            "categorical": target.categorical,
        }
        result = run_training(model, objective, batches, ctx, opts, device, resume)
    if not ctx.is_main:
        return
    payload = {
        "kind": "predictor",
        "config": mcfg.to_dict(),
        "model": result.state_dict,
        "target": {
            "column": target.column,
            "classes": study.classes,
            "mean": scale.mean,
            "std": scale.std,
        },
        "categorical": {"columns": target.categorical, "levels": study.category_levels},
        "train_config": cfg.to_dict(),
        "training_asvs": torch.from_numpy(sample_asvs(study.samples, train)),
    }
    summary = {}
    if not study.classes and len(study.subset("val")):
        val = study.targets[study.subset("val")]
        baseline = {"val_" + k: v for k, v in baseline_metrics(study.targets[train], val).items()}
        summary["mean_baseline"] = baseline
    path = write_outputs(paths.output_dir, "model.pt", payload, result, study, summary)
    log.info("wrote %s (best epoch %d)", path, result.best_epoch)
