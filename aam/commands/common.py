"""Arguments and set-up shared by `aam pretrain` and `aam finetune`."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import torch

from aam.data.split import write_split
from aam.errors import InputError
from aam.models import ModelConfig
from aam.models.config import LAYERS_HELP
from aam.options import add_options, checked, from_args, given_options
from aam.profiling.probe import memory_curve
from aam.runtime.atomic import (
    atomic_output,
    check_output_dir,
    check_output_path,
    remove_stale_temporaries,
    write_json,
)
from aam.runtime.run_lock import RunLocks, lock_directories
from aam.runtime.threads import usable_threads
from aam.training.auto_batch import resolve_batch_size
from aam.training.batches import TrainBatches
from aam.training.config import RuntimeConfig, StudyOptions, TrainConfig, UniFracOptions
from aam.training.device import compiled_graphs, maybe_compile, resolve_device
from aam.training.distributed import (
    DistContext,
    broadcast_from_main,
    init_distributed,
    pair_group,
)
from aam.training.fsdp import shard_model
from aam.training.metrics import write_history
from aam.training.objective import Objective
from aam.training.orphan import stop_with_workflow
from aam.training.study import Study, describe
from aam.training.trainer import Preempted, Trainer, TrainResult

log = logging.getLogger(__name__)
MODEL_GROUP = "model (ModelConfig)"  # its options are the workflow config's runs.*.model

RUN_FILES = ("history.tsv", "split.tsv", "summary.json")  # written next to the model file


@dataclass
class RunPaths:
    """Inputs and outputs every training command has."""

    table: Path
    tree: Path | None
    unifrac: Path | None
    output_dir: Path
    checkpoint_dir: Path | None
    split: Path | None
    scratch: str | None


@dataclass
class TrainingOptions:
    """The typed arguments of a training command (`aam pretrain`, `aam finetune`)."""

    paths: RunPaths
    study: StudyOptions
    distances: UniFracOptions
    model: dict[str, Any]  # the model options given (ModelConfig.from_options)
    train: TrainConfig
    runtime: RuntimeConfig

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TrainingOptions:
        return cls(
            paths=RunPaths(*(getattr(args, f.name) for f in fields(RunPaths))),
            study=from_args(StudyOptions, args),
            distances=from_args(UniFracOptions, args),
            model=model_options(args),
            train=from_args(TrainConfig, args),
            runtime=from_args(RuntimeConfig, args),
        )


def add_common_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """Inputs, data, model, training and run options of a training ``command``."""
    io = parser.add_argument_group("inputs and outputs")
    io.add_argument("--table", required=True, type=Path, help="BIOM table (IDs = sequences)")
    source = io.add_mutually_exclusive_group()
    source.add_argument(
        "--tree",
        type=Path,
        help="rooted newick tree of the table's ASVs: each batch's UniFrac is computed from "
        "its reads (the default way; nothing N x N)",
    )
    source.add_argument(
        "--unifrac",
        type=Path,
        help="a precomputed UniFrac matrix instead (`aam unifrac`, QIIME 2 or ssu; .h5 or "
        "lsmat .tsv), read by rows",
    )
    io.add_argument(
        "--output-dir", required=True, type=Path, help="run directory (checkpoints, history)"
    )
    io.add_argument(
        "--checkpoint-dir",
        type=Path,
        help="latest.pt / best.pt for resuming (default: OUTPUT_DIR/checkpoints)",
    )
    io.add_argument("--split", type=Path, help="sample_id -> train/val/test TSV (`aam split`)")
    io.add_argument(
        "--scratch",
        help="node-local dir to copy inputs to first (env vars expand, "
        "e.g. '/scratch/$USER/job_$SLURM_JOB_ID'; default $TMPDIR if set)",
    )
    add_options(parser.add_argument_group("samples"), StudyOptions, command)
    add_options(
        parser.add_argument_group("UniFrac of a batch (with --tree)"), UniFracOptions, command
    )
    add_model_options(parser.add_argument_group(MODEL_GROUP))
    add_options(parser.add_argument_group("training (TrainConfig)"), TrainConfig, command)
    add_options(parser.add_argument_group("device and run"), RuntimeConfig, command)


def add_model_options(group: argparse._ArgumentGroup) -> None:
    """The ModelConfig options (unset ones stay unset: a pretrained base may fix them)."""
    add_options(group, ModelConfig, keep_unset=True)
    layers = checked(int, minimum=0)  # like the stacks it sets
    group.add_argument("--layers", type=layers, default=argparse.SUPPRESS, help=LAYERS_HELP)


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """The model options given on the command line (``layers`` included)."""
    given = given_options(ModelConfig, args)
    return {**given, "layers": args.layers} if hasattr(args, "layers") else given


def setup_run(runtime: RuntimeConfig) -> tuple[torch.device, DistContext]:
    """Threads, device and (under torchrun) the process group; under the workflow, a watch that
    stops this process when the workflow is gone (``aam.training.orphan``)."""
    stop_with_workflow()
    if runtime.threads:
        torch.set_num_threads(usable_threads(runtime.threads))
    on_gpu = runtime.device.startswith("cuda") or (
        runtime.device == "auto" and torch.cuda.is_available()
    )
    ctx = init_distributed("cuda" if on_gpu else "cpu")
    device = resolve_device(runtime.device, ctx.local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device, ctx


def train_batches(
    study: Study,
    objective: Objective,
    cfg: TrainConfig,
    token_limit: int,
    ctx: DistContext,
    asv_embeddings: torch.Tensor | None = None,
) -> TrainBatches:
    """The batches ``objective`` trains on: ``study``'s samples as the model reads them (with
    the global batch's UniFrac when the objective fits it)."""
    return TrainBatches(
        study,
        token_limit,
        cfg.asv_sampling,
        ctx,
        distances=objective.use_unifrac,
        asv_embeddings=asv_embeddings,
    )


def resolve_auto_batch(
    model: torch.nn.Module,
    objective: Objective,
    batches: TrainBatches,
    cfg: TrainConfig,
    device: torch.device,
) -> None:
    """Replace ``--batch-size auto`` in ``cfg`` by the number it stands for on ``device``
    (before the config a checkpoint records is taken)."""
    if cfg.batch_size == "auto":
        cfg.batch_size = resolve_batch_size(model, objective, batches, cfg, device, memory_curve)


def checkpoint_dir(paths: RunPaths) -> Path:
    """--checkpoint-dir, by default OUTPUT_DIR/checkpoints."""
    return paths.checkpoint_dir or paths.output_dir / "checkpoints"


def prepare_outputs(paths: RunPaths, ctx: DistContext, name: str, command: str) -> RunLocks:
    """Before any work: fail if the output or checkpoint directory cannot be written or another
    process writes this run (``aam.runtime.run_lock``), and remove the temporary files a killed
    run left next to ``name`` and the run files. Returns the run's locks (held by rank 0;
    release them, e.g. ``with prepare_outputs(...):``, when the run ends)."""
    check_output_dir(paths.output_dir, "output")
    checkpoints = checkpoint_dir(paths)
    if checkpoints.exists():
        check_output_dir(checkpoints, "checkpoint")
    else:  # created at the first save: an empty OUTPUT_DIR stays empty if the inputs are bad
        check_output_path(checkpoints, "checkpoint")
    locks = lock_run((paths.output_dir, checkpoints), ctx, command)
    if ctx.is_main:
        remove_stale_temporaries(paths.output_dir, (name, *RUN_FILES))
    return locks


def lock_run(directories: tuple[Path, ...], ctx: DistContext, command: str) -> RunLocks:
    """Lock the run's directories for ``command`` in the process that writes them (rank 0);
    under torchrun every rank learns rank 0's refusal and fails with it (instead of waiting in
    the next collective for a rank that has exited)."""
    locks, refusal = RunLocks([]), None
    if ctx.is_main:
        try:
            locks = lock_directories(directories, command)
        except InputError as err:
            refusal = str(err)
    refusal = broadcast_from_main(refusal, ctx)
    if refusal is not None:
        raise InputError(refusal)
    return locks


def show_progress(runtime: RuntimeConfig) -> bool:
    return sys.stderr.isatty() if runtime.progress is None else runtime.progress


def parallelize(
    model: torch.nn.Module, runtime: RuntimeConfig, ctx: DistContext, device: torch.device
) -> torch.nn.Module:
    """The model as it trains: sharded (--fsdp) or replicated (DDP) under torchrun, then
    compiled if asked."""
    if runtime.fsdp and not ctx.enabled:
        log.info("--fsdp: one process, nothing to shard; training as without it")
    if runtime.fsdp and ctx.enabled:
        log.info("--fsdp: sharding the model over %d processes", ctx.world_size)
        return maybe_compile(shard_model(model, device, ctx.world_size), runtime.compile)
    model = maybe_compile(model, runtime.compile)
    if not ctx.enabled:
        return model
    ids = [device.index] if device.type == "cuda" else None
    # Heads a stage does not use (e.g. the nucleotide head without masking) get no grad.
    return torch.nn.parallel.DistributedDataParallel(
        model, device_ids=ids, find_unused_parameters=True
    )


def run_training(
    model: torch.nn.Module,
    objective: Objective,
    batches: TrainBatches,
    ctx: DistContext,
    opts: TrainingOptions,
    device: torch.device,
    resume_config: dict,
) -> TrainResult:
    """Train (resuming if possible); exit status 75 after a SLURM signal so the job reruns."""
    model = parallelize(model.to(device), opts.runtime, ctx, device)
    log.info("%s; device %s", describe(batches.study), device)
    study, where = batches.study, opts.distances
    if batches.distances and study.distances is not None:  # on its engine, ranks sharing pairs
        share = (ctx.rank, ctx.world_size)
        engine = study.distances.on(where.unifrac_engine, where.unifrac_threads, device, share)
        batches = replace(batches, study=replace(study, distances=engine))
        batches.pair_group = pair_group(ctx)
    trainer = Trainer(
        model,
        objective,
        batches,
        opts.train,
        ctx,
        checkpoint_dir(opts.paths),
        device,
        resume_config,
        progress=show_progress(opts.runtime),
    )
    try:
        result = trainer.fit()
        if opts.runtime.compile:
            log.info("torch.compile: %d graph(s) compiled", compiled_graphs())
        return result
    except Preempted as stop:
        log.warning("preempted: %s", stop)
        raise SystemExit(75) from None


def training_inputs(paths: RunPaths, **more: Path | None) -> dict[str, Path | None]:
    """The input files of a training command (``localized`` copies them to ``--scratch``)."""
    return {
        "table": paths.table,
        "tree": paths.tree,
        "unifrac": paths.unifrac,
        "split": paths.split,
        **more,
    }


def resume_config(opts: TrainingOptions, study: Study, model: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint must share with this run to be resumed: architecture, optimisation,
    samples, and how their reads and distances are made."""
    config = {"model": model, "train": opts.train.resume_dict(), "samples": study.fingerprint()}
    if opts.paths.tree is not None:
        config["unifrac"] = opts.distances.to_dict()
    if opts.study.rarefy_each_epoch:
        config["rarefy_each_epoch"] = opts.study.rarefy_depth
    return config


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
    with atomic_output(path, what="model") as tmp, open(tmp, "wb") as handle:
        torch.save(payload, handle)  # to a handle: a full disk keeps its errno
    best = {"best_epoch": result.best_epoch, **result.best_metrics}
    write_json(out_dir / "summary.json", {**best, **(summary or {})})
    return path
