"""Arguments and set-up shared by `aam pretrain` and `aam train`."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch

from aam.atomic import (
    atomic_output,
    check_output_dir,
    check_output_path,
    remove_stale_temporaries,
    write_json,
)
from aam.data.split import write_split
from aam.errors import InputError
from aam.models import ModelConfig
from aam.models.config import BASE_FIELDS
from aam.training.config import PRECISIONS, TrainConfig
from aam.training.device import maybe_compile, resolve_device
from aam.training.distributed import DistContext, init_distributed
from aam.training.metrics import write_history
from aam.training.study import Study, describe
from aam.training.trainer import Preempted, Trainer, TrainResult

log = logging.getLogger(__name__)

# CLI flag -> ModelConfig field; "layers" sets every stack of the model at once.
MODEL_FLAGS = {
    "embedding_dim": int, "attention_heads": int, "layers": int, "max_bp": int,
    "token_limit": int, "dropout": float, "attention_dropout": float, "count_embedding": str,
}  # fmt: skip
LAYER_FIELDS = ("asv_layers", "sample_layers", "encoder_layers", "count_layers", "target_layers")
RUN_FILES = ("history.tsv", "split.tsv", "summary.json")  # written next to the model file


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Inputs, model shape, optimisation and run options of both training stages."""
    io = parser.add_argument_group("inputs and outputs")
    io.add_argument("--table", required=True, type=Path, help="BIOM table (IDs = sequences)")
    io.add_argument("--output-dir", required=True, type=Path)
    io.add_argument(
        "--checkpoint-dir", type=Path,
        help="latest.pt / best.pt for resuming (default: OUTPUT_DIR/checkpoints)",
    )  # fmt: skip
    io.add_argument("--split", type=Path, help="sample_id -> train/val/test TSV (`aam split`)")
    io.add_argument("--val-fraction", type=float, default=0.1, help="without --split")
    io.add_argument("--rarefy-depth", type=int, help="rarefy to this many reads first")
    io.add_argument(
        "--scratch",
        help="node-local dir to copy inputs to first (env vars expand, "
        "e.g. '/scratch/$USER/job_$SLURM_JOB_ID'; default $TMPDIR if set)",
    )
    io.add_argument("--allow-missing-samples", action="store_true",
                    help="use the samples shared by all inputs instead of failing")  # fmt: skip

    model = parser.add_argument_group("model (defaults: aam.models.ModelConfig)")
    model.add_argument("--embedding-dim", type=int)
    model.add_argument("--attention-heads", type=int)
    model.add_argument("--layers", type=int, help="transformer layers in every stack")
    model.add_argument("--max-bp", type=int, help="nucleotides read per ASV")
    model.add_argument("--token-limit", type=int, help="most ASVs per sample")
    model.add_argument("--dropout", type=float, help="residual and feed-forward dropout")
    model.add_argument(
        "--attention-dropout",
        type=float,
        help="dropout on attention weights (default 0: keeps fused SDPA kernels)",
    )
    model.add_argument("--count-embedding", choices=["none", "add", "concat"])

    opt = parser.add_argument_group("optimisation (defaults: aam.training.config.TrainConfig)")
    defaults = TrainConfig()
    opt.add_argument("--epochs", type=int, default=defaults.epochs)
    opt.add_argument("--batch-size", type=int, default=defaults.batch_size,
                     help="global batch (split over processes under torchrun)")  # fmt: skip
    opt.add_argument("--lr", type=float, default=defaults.lr)
    opt.add_argument("--weight-decay", type=float, default=defaults.weight_decay)
    opt.add_argument("--warmup-fraction", type=float, default=defaults.warmup_fraction)
    opt.add_argument("--max-grad-norm", type=float, default=defaults.max_grad_norm)
    opt.add_argument("--grad-accum", type=int, default=defaults.grad_accum)
    opt.add_argument(
        "--patience",
        type=int,
        default=defaults.patience,
        help="early stop after this many epochs without improvement (0: off)",
    )
    opt.add_argument("--best-metric", default=defaults.best_metric)
    opt.add_argument("--seed", type=int, default=defaults.seed)
    opt.add_argument("--asv-sampling", choices=["first", "abundance", "random"],
                     default=defaults.asv_sampling)  # fmt: skip
    opt.add_argument("--mask-rate", type=float, default=defaults.mask_rate)
    opt.add_argument("--unifrac-weight", type=float, default=defaults.unifrac_weight)
    opt.add_argument("--nuc-weight", type=float, default=defaults.nuc_weight)

    run = parser.add_argument_group("device and run")
    run.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (ROCm: cuda)")
    run.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=defaults.precision,
        help="auto: bf16 autocast on GPUs that support it, fp32 on CPU",
    )
    run.add_argument("--attn-implementation", choices=["auto", "math", "mem_efficient", "flash"])
    run.add_argument("--gradient-checkpointing", action="store_true")
    run.add_argument("--compile", action="store_true", help="torch.compile (skipped on ROCm)")
    run.add_argument("--threads", type=int, help="CPU threads for torch")
    run.add_argument("--checkpoint-every-minutes", type=float,
                     default=defaults.checkpoint_every_minutes)  # fmt: skip
    run.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None)
    # fmt: on


def train_config(args: argparse.Namespace, **overrides: Any) -> TrainConfig:
    """TrainConfig from the parsed flags (fields the parser does not have keep defaults)."""
    values = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if hasattr(args, f.name)}
    values.update(overrides)
    for name in ("epochs", "batch_size", "grad_accum"):
        if values.get(name, 1) < 1:
            raise InputError(f"--{name.replace('_', '-')} {values[name]}: must be at least 1")
    return TrainConfig(**values)


def model_config(args: argparse.Namespace, base: dict | None = None, **extra: Any) -> ModelConfig:
    """ModelConfig from flags. With a pretrained ``base`` config its architecture is kept: a
    flag that contradicts it is an error, and ``--layers`` then sets the head stacks only."""
    values: dict[str, Any] = dict(base or {})
    for flag in MODEL_FLAGS:
        given = getattr(args, flag)
        if given is None:
            continue
        for name in LAYER_FIELDS if flag == "layers" else (flag,):
            if base is not None and name in BASE_FIELDS and base.get(name) != given:
                if flag == "layers":
                    continue
                raise InputError(
                    f"--{flag.replace('_', '-')} {given}: the pretrained encoder has "
                    f"{name}={base.get(name)}; drop the flag or pretrain again"
                )
            values[name] = given
    if args.attn_implementation:
        values["attn_implementation"] = args.attn_implementation
    values["gradient_checkpointing"] = bool(args.gradient_checkpointing)
    values.update(extra)
    return ModelConfig.from_dict(values)


def setup_run(args: argparse.Namespace) -> tuple[torch.device, DistContext]:
    """Threads, device and (under torchrun) the process group."""
    if args.threads:
        torch.set_num_threads(args.threads)
    ctx = init_distributed("cuda" if args.device.startswith("cuda") or (
        args.device == "auto" and torch.cuda.is_available()) else "cpu")  # fmt: skip
    device = resolve_device(args.device, ctx.local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device, ctx


def checkpoint_dir(args: argparse.Namespace) -> Path:
    """--checkpoint-dir, by default OUTPUT_DIR/checkpoints."""
    return args.checkpoint_dir or args.output_dir / "checkpoints"


def prepare_outputs(args: argparse.Namespace, ctx: DistContext, name: str) -> None:
    """Before any work: fail if the output or checkpoint directory cannot be written, and
    remove the temporary files a killed run left next to ``name`` and the run files."""
    check_output_dir(args.output_dir, "output")
    checkpoints = checkpoint_dir(args)
    if checkpoints.exists():
        check_output_dir(checkpoints, "checkpoint")
    else:  # created at the first save: an empty OUTPUT_DIR stays empty if the inputs are bad
        check_output_path(checkpoints, "checkpoint")
    if ctx.is_main:
        remove_stale_temporaries(args.output_dir, (name, *RUN_FILES))


def show_progress(args: argparse.Namespace) -> bool:
    return sys.stderr.isatty() if args.progress is None else args.progress


def run_training(
    model: torch.nn.Module, objective, cfg: TrainConfig, args, device, resume_config: dict
) -> TrainResult:
    """Train (resuming if possible); exit status 75 after a SLURM signal so the job reruns."""
    model = maybe_compile(model.to(device), args.compile)
    if objective.ctx.enabled:
        ids = [device.index] if device.type == "cuda" else None
        # Heads a stage does not use (e.g. the nucleotide head without masking) get no grad.
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=ids, find_unused_parameters=True
        )
    log.info("%s; device %s", describe(objective.study), device)
    trainer = Trainer(model, objective, cfg, checkpoint_dir(args), device, resume_config,
                      progress=show_progress(args))  # fmt: skip
    try:
        return trainer.fit()
    except Preempted as stop:
        log.warning("preempted: %s", stop)
        raise SystemExit(75) from None


def write_outputs(
    out_dir: Path,
    name: str,
    payload: dict,
    result: TrainResult,
    study: Study,
    summary: dict | None = None,
) -> Path:
    """Final model file, history, split and summary.json (best epoch, its metrics and
    ``summary``), each written once and atomically."""
    write_history(out_dir / "history.tsv", result.history)
    write_split(out_dir / "split.tsv", study.split)
    path = out_dir / name
    with atomic_output(path) as tmp:
        torch.save(payload, tmp)
    best = {"best_epoch": result.best_epoch, **result.best_metrics}
    write_json(out_dir / "summary.json", {**best, **(summary or {})})
    return path
