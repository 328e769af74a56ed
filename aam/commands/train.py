"""`aam train`: fine-tune on a metadata target, optionally from a pretrained encoder."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import torch

from aam.commands.common import (
    add_common_arguments,
    model_config,
    prepare_outputs,
    run_training,
    setup_run,
    train_config,
    write_outputs,
)
from aam.commands.pretrain import architecture
from aam.errors import InputError
from aam.models import ModelConfig, SequencePredictor
from aam.models.files import load_model_file
from aam.staging import inputs_on_scratch
from aam.training.config import TrainConfig
from aam.training.inference import encode_table_asvs
from aam.training.losses import REGRESSION_LOSSES
from aam.training.metrics import baseline_metrics
from aam.training.objective import Objective, TargetScale, fit_target_scale
from aam.training.study import load_study

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam train`."""
    target = parser.add_argument_group("target")
    target.add_argument("--metadata", required=True, type=Path, help="sample metadata TSV")
    target.add_argument("--target-column", required=True, help="metadata column to predict")
    target.add_argument("--classifier", action="store_true", help="the target is categorical")
    target.add_argument("--categorical-columns", default="",
                        help="comma-separated metadata columns used as covariates")  # fmt: skip
    target.add_argument("--categorical-fusion", choices=["concat", "add"], default="concat")
    target.add_argument("--pretrained-encoder", type=Path, help="encoder.pt from aam pretrain")
    target.add_argument(
        "--freeze-base",
        action="store_true",
        help="train the heads only (the base's ASV embeddings are cached)",
    )
    target.add_argument("--unifrac", type=Path, help="UniFrac matrix for the regulariser")
    target.add_argument("--test-fraction", type=float, default=0.0, help="without --split")
    defaults = TrainConfig()
    target.add_argument("--loss", choices=REGRESSION_LOSSES, default=defaults.loss)
    target.add_argument("--target-weight", type=float, default=defaults.target_weight)
    target.add_argument("--count-weight", type=float, default=defaults.count_weight)
    add_common_arguments(parser)
    # fmt: on


def run(args: argparse.Namespace) -> None:
    """Fine-tune a SequencePredictor and write OUTPUT_DIR/model.pt (+ history, split)."""
    device, ctx = setup_run(args)
    prepare_outputs(args, ctx, "model.pt")
    encoder = None
    if args.pretrained_encoder:
        encoder = load_model_file(args.pretrained_encoder, "encoder")[1]
    categorical = [c for c in args.categorical_columns.split(",") if c]
    cfg = train_config(args)
    if cfg.freeze_base and encoder is None:
        raise InputError("--freeze-base: needs --pretrained-encoder (a random base is useless)")
    with inputs_on_scratch(args, "table", "metadata", "unifrac", "split"):
        study = load_study(
            args.table, max_bp=_max_bp(args, encoder),
            unifrac_path=args.unifrac, metadata_path=args.metadata, target=args.target_column,
            classifier=args.classifier, categorical=categorical, split_path=args.split,
            val_fraction=args.val_fraction, test_fraction=args.test_fraction, seed=cfg.seed,
            rarefy_depth=args.rarefy_depth, allow_missing=args.allow_missing_samples,
        )  # fmt: skip
    cards = [len(study.category_levels[c]) + 1 for c in categorical]
    mcfg = model_config(
        args, base=encoder["config"] if encoder else None,
        out_dim=len(study.classes) if args.classifier else 1, classifier=args.classifier,
        categorical_cardinalities=cards, categorical_fusion=args.categorical_fusion,
    )  # fmt: skip
    torch.manual_seed(cfg.seed)
    model = SequencePredictor(mcfg)
    if encoder is not None:
        model.base.load_state_dict(encoder["model"])
    if cfg.freeze_base:
        model.freeze_base()
    train = study.subset("train")
    scale = TargetScale()
    if not study.classes:
        scale = fit_target_scale(study.targets, train, args.metadata, args.target_column)
    frozen = encode_table_asvs(model.to(device), study.samples, device) if cfg.freeze_base else None
    objective = Objective(cfg, predictor=True, study=study, token_limit=mcfg.token_limit,
                          ctx=ctx, scale=scale, asv_embeddings=frozen)  # fmt: skip
    resume = {"model": architecture(mcfg.to_dict()), "train": cfg.resume_dict(),
              "samples": study.fingerprint(),
              "target": {"column": args.target_column, "classes": study.classes,
                         "categorical": categorical}}  # fmt: skip
    result = run_training(model, objective, cfg, args, device, resume)
    if not ctx.is_main:
        return
    target = {"column": args.target_column, "classes": study.classes,
              "mean": scale.mean, "std": scale.std}  # fmt: skip
    payload = {
        "kind": "predictor", "config": mcfg.to_dict(), "model": result.state_dict,
        "target": target, "categorical": {"columns": categorical, "levels": study.category_levels},
        "train_config": cfg.to_dict(),
    }  # fmt: skip
    summary = {}
    if not study.classes and len(study.subset("val")):
        val = study.targets[study.subset("val")]
        baseline = {"val_" + k: v for k, v in baseline_metrics(study.targets[train], val).items()}
        summary["mean_baseline"] = baseline
    path = write_outputs(args.output_dir, "model.pt", payload, result, study, summary)
    log.info("wrote %s (best epoch %d)", path, result.best_epoch)


def _max_bp(args: argparse.Namespace, encoder: dict | None) -> int:
    """Nucleotides per ASV: the encoder's, else the flag, else the model default."""
    if encoder is not None:
        return encoder["config"]["max_bp"]
    return args.max_bp or ModelConfig().max_bp
