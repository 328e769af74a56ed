"""`aam pretrain`: self-supervised base (UniFrac distances + masked nucleotides)."""

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
from aam.models import SequenceEncoder
from aam.staging import inputs_on_scratch
from aam.training.objective import Objective
from aam.training.study import load_study

log = logging.getLogger(__name__)
RUNTIME_FIELDS = ("attn_implementation", "gradient_checkpointing")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam pretrain`."""
    parser.add_argument(
        "--unifrac", required=True, type=Path, help="UniFrac matrix from `aam unifrac`"
    )
    add_common_arguments(parser)


def architecture(config: dict) -> dict:
    """The config fields a resumed run must share (runtime switches may change)."""
    return {k: v for k, v in config.items() if k not in RUNTIME_FIELDS}


def run(args: argparse.Namespace) -> None:
    """Pretrain a SequenceEncoder and write OUTPUT_DIR/encoder.pt (+ history, split)."""
    device, ctx = setup_run(args)
    prepare_outputs(args, ctx, "encoder.pt")
    mcfg, cfg = model_config(args), train_config(args)
    with inputs_on_scratch(args, "table", "unifrac", "split"):
        study = load_study(
            args.table, max_bp=mcfg.max_bp, unifrac_path=args.unifrac, split_path=args.split,
            val_fraction=args.val_fraction, seed=cfg.seed, rarefy_depth=args.rarefy_depth,
            allow_missing=args.allow_missing_samples,
        )  # fmt: skip
    torch.manual_seed(cfg.seed)
    model = SequenceEncoder(mcfg)
    objective = Objective(cfg, predictor=False, study=study, token_limit=mcfg.token_limit, ctx=ctx)
    resume = {"model": architecture(mcfg.to_dict()), "train": cfg.resume_dict(),
              "samples": study.fingerprint()}  # fmt: skip
    result = run_training(model, objective, cfg, args, device, resume)
    if ctx.is_main:
        payload = {"kind": "encoder", "config": mcfg.to_dict(), "model": result.state_dict,
                   "train_config": cfg.to_dict()}  # fmt: skip
        path = write_outputs(args.output_dir, "encoder.pt", payload, result, study)
        log.info("wrote %s (best epoch %d)", path, result.best_epoch)
