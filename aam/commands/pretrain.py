"""`aam pretrain`: self-supervised base (UniFrac distances + masked nucleotides)."""

from __future__ import annotations

import argparse
import logging

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
from aam.errors import InputError
from aam.models import ModelConfig, SequenceEncoder
from aam.runtime.staging import localized
from aam.training.distributed import DistContext
from aam.training.objective import Objective
from aam.training.study import load_study

log = logging.getLogger(__name__)
RUNTIME_FIELDS = ("attn_implementation", "gradient_checkpointing")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam pretrain`."""
    add_common_arguments(parser, "pretrain")


def architecture(config: dict) -> dict:
    """The config fields a resumed run must share (runtime switches may change)."""
    return {k: v for k, v in config.items() if k not in RUNTIME_FIELDS}


def run(args: argparse.Namespace) -> None:
    """Pretrain a SequenceEncoder and write OUTPUT_DIR/encoder.pt (+ history, split)."""
    pretrain(TrainingOptions.from_args(args))


def pretrain(opts: TrainingOptions) -> None:
    """`aam pretrain` with typed options (one writer per output directory:
    ``aam.runtime.run_lock``)."""
    paths = opts.paths
    if paths.tree is None and paths.unifrac is None:
        raise InputError(
            "aam pretrain: pass --tree TREE (each batch's UniFrac computed from the table) or "
            "--unifrac FILE (a precomputed matrix)"
        )
    device, ctx = setup_run(opts.runtime)
    with prepare_outputs(paths, ctx, "encoder.pt", "aam pretrain"):
        _pretrain(opts, device, ctx)


def _pretrain(opts: TrainingOptions, device: torch.device, ctx: DistContext) -> None:
    paths, cfg = opts.paths, opts.train
    mcfg = ModelConfig.from_options(opts.model)
    # Inside the block: a --unifrac matrix is read by rows (from --scratch) while training runs.
    with localized(training_inputs(paths), paths.scratch) as local:
        study = load_study(
            local["table"],
            max_bp=mcfg.max_bp,
            tree_path=local.get("tree"),
            unifrac_options=opts.distances,
            unifrac_path=local.get("unifrac"),
            split_path=local.get("split"),
            val_fraction=opts.study.val_fraction,
            seed=cfg.seed,
            rarefy_depth=opts.study.rarefy_depth,
            rarefy_each_epoch=opts.study.rarefy_each_epoch,
            allow_missing=opts.study.allow_missing_samples,
        )
        torch.manual_seed(cfg.seed)
        model = SequenceEncoder(mcfg)
        objective = Objective.of(cfg, predictor=False, study=study, ctx=ctx)
        batches = train_batches(study, objective, cfg, mcfg.token_limit, ctx)
        resolve_auto_batch(model, objective, batches, cfg, device)
        resume = resume_config(opts, study, architecture(mcfg.to_dict()))
        result = run_training(model, objective, batches, ctx, opts, device, resume)
    if ctx.is_main:
        payload = {
            "kind": "encoder",
            "config": mcfg.to_dict(),
            "model": result.state_dict,
            "train_config": cfg.to_dict(),
        }
        path = write_outputs(paths.output_dir, "encoder.pt", payload, result, study)
        log.info("wrote %s (best epoch %d)", path, result.best_epoch)
