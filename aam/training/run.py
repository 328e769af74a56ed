"""A training run from its typed options (``TrainingOptions``): the one place that starts
pretraining or fine-tuning. In order: threads, device and process group; the run's directories
checked and locked; inputs staged; the study (samples, split, distances); the model (from a
pretrained encoder for fine-tuning); the objective and its batches; the batch size; then the
Trainer, whose Checkpointer resumes the run if it can; finally the model file and the run's
files, once, by rank 0. `aam pretrain` and `aam finetune` parse their flags and call
``pretrain`` or ``finetune``."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from aam.data.novelty import sample_asvs
from aam.data.split import write_split
from aam.errors import InputError
from aam.models import SequenceEncoder, SequencePredictor
from aam.models.files import load_model_file
from aam.runtime.atomic import (
    atomic_output,
    check_output_dir,
    check_output_path,
    remove_stale_temporaries,
    write_json,
)
from aam.runtime.run_lock import RunLocks, lock_directories
from aam.runtime.staging import localized
from aam.runtime.threads import usable_threads
from aam.training.auto_batch import resolve_batch_size
from aam.training.checkpointing.orphan import stop_with_workflow
from aam.training.compiling import (
    COMPILED,
    compile_as,
    compile_mode,
    compile_summary,
    compiled_graphs,
)
from aam.training.config import RunPaths, RuntimeConfig, TrainConfig, TrainingOptions
from aam.training.device import resolve_device
from aam.training.inference import encode_table_asvs
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import Labels, Study, UniFracSource, describe, load_study
from aam.training.inputs.target_scale import TargetScale, fit_target_scale
from aam.training.meters.events import EVENTS_DIR
from aam.training.metrics import baseline_metrics, write_history
from aam.training.model_size import sized_for
from aam.training.objective import Objective
from aam.training.parallel.distributed import (
    DistContext,
    bind_rank_cpus,
    broadcast_from_main,
    init_distributed,
    pair_group,
)
from aam.training.parallel.fsdp import shard_model
from aam.training.trainer import Preempted, Trainer, TrainResult

log = logging.getLogger(__name__)
RUN_FILES = ("history.tsv", "split.tsv", "summary.json")  # written next to the model file
RUNTIME_FIELDS = ("attn_implementation", "gradient_checkpointing")  # may change on resume
MemoryCurve = Callable[..., Any]  # ``aam.profiling.probe.memory_curve``: --batch-size auto
EXIT_PREEMPTED = 75  # latest.pt saved after a signal: rerun to resume (EX_TEMPFAIL)
EXIT_INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C where nothing could be saved


@dataclass
class Target:
    """What fine-tuning learns: a metadata column, with covariates and a pretrained base."""

    metadata: Path
    column: str
    classifier: bool
    categorical: list[str]
    encoder: Path | None

    def labels(self, metadata: Path) -> Labels:
        """What the study reads from ``metadata`` (the staged copy of ``self.metadata``)."""
        return Labels(metadata, self.column, self.classifier, self.categorical)


def pretrain(opts: TrainingOptions, memory_curve: MemoryCurve) -> None:
    """Pretrain a SequenceEncoder and write OUTPUT_DIR/encoder.pt (+ history, split, summary)."""
    paths = opts.paths
    if paths.tree is None and paths.unifrac is None:
        raise InputError(
            "aam pretrain: pass --tree TREE (each batch's UniFrac computed from the table) or "
            "--unifrac FILE (a precomputed matrix)"
        )
    cfg = opts.train
    if cfg.unifrac_weight == 0 and (cfg.mask_rate == 0 or cfg.nuc_weight == 0):
        raise InputError(
            "aam pretrain: --unifrac-weight 0 and no masked nucleotides (--mask-rate "
            f"{cfg.mask_rate:g}, --nuc-weight {cfg.nuc_weight:g}) leave no loss to learn from; "
            "set --unifrac-weight or both of the others above 0"
        )
    with sigint_exits():
        device, ctx = setup_run(opts.runtime)
        opts = replace(opts, model=sized_for(opts.model, device, say=ctx.is_main))
        with prepare_outputs(paths, ctx, "encoder.pt", "aam pretrain"):
            _pretrain(opts, device, ctx, memory_curve)


@contextmanager
def sigint_exits() -> Iterator[None]:
    """Ctrl-C (SIGINT) outside the training steps, where nothing can be saved (loading the
    data, writing the outputs): one line and exit status EXIT_INTERRUPTED, no traceback.
    (During them it saves latest.pt: ``aam.training.checkpointing.preemption``.)"""
    try:
        yield
    except KeyboardInterrupt:
        log.warning("stopped by SIGINT, nothing saved; a rerun resumes from the last latest.pt")
        raise SystemExit(EXIT_INTERRUPTED) from None


def _pretrain(opts: TrainingOptions, device, ctx: DistContext, memory_curve: MemoryCurve) -> None:
    paths, cfg = opts.paths, opts.train
    mcfg = opts.model.config()
    # Inside the block: a --unifrac matrix is read by rows (from --scratch) while training runs.
    with localized(training_inputs(paths), paths.scratch) as local:
        study = load_study(
            local["table"],
            max_bp=mcfg.max_bp,
            unifrac=UniFracSource(local.get("tree"), local.get("unifrac"), opts.distances),
            split_path=local.get("split"),
            reading=opts.study,
            seed=cfg.seed,
        )
        torch.manual_seed(cfg.seed)
        model = SequenceEncoder(mcfg)
        objective = Objective.of(cfg, predictor=False, study=study, ctx=ctx)
        batches = train_batches(study, objective, cfg, mcfg.token_limit, ctx)
        resolve_auto_batch(model, objective, batches, cfg, device, memory_curve)
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


def finetune(opts: TrainingOptions, target: Target, memory_curve: MemoryCurve) -> None:
    """Fine-tune a SequencePredictor (from a pretrained encoder, if given) and write
    OUTPUT_DIR/model.pt (+ history, split, summary)."""
    with sigint_exits():
        device, ctx = setup_run(opts.runtime)
        with prepare_outputs(opts.paths, ctx, "model.pt", "aam finetune"):
            _finetune(opts, target, device, ctx, memory_curve)


def _finetune(
    opts: TrainingOptions,
    target: Target,
    device: torch.device,
    ctx: DistContext,
    memory_curve: MemoryCurve,
) -> None:
    paths, cfg = opts.paths, opts.train
    encoder = load_model_file(target.encoder, "encoder")[1] if target.encoder else None
    if cfg.freeze_base and encoder is None:
        raise InputError("--freeze-base: needs --pretrained-encoder (a random base is useless)")
    base = encoder["config"] if encoder else None
    opts = replace(opts, model=sized_for(opts.model, device, base, say=ctx.is_main))
    max_bp = opts.model.config(base).max_bp
    inputs = training_inputs(paths, metadata=target.metadata)
    # Inside: a --unifrac matrix is read by rows (from --scratch) while training runs.
    with localized(inputs, paths.scratch) as local:
        study = load_study(
            local["table"],
            max_bp=max_bp,
            unifrac=UniFracSource(local.get("tree"), local.get("unifrac"), opts.distances),
            labels=target.labels(local["metadata"]),
            split_path=local.get("split"),
            reading=opts.study,
            seed=cfg.seed,
        )
        mcfg = opts.model.config(
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
        resolve_auto_batch(model, objective, batches, cfg, device, memory_curve)
        resume = resume_config(opts, study, architecture(mcfg.to_dict()))
        resume["target"] = {
            "column": target.column,
            "classes": study.classes,
            "categorical": target.categorical,
        }
        result = run_training(model, objective, batches, ctx, opts, device, resume)
    if ctx.is_main:
        _write_predictor(opts, target, study, mcfg.to_dict(), scale, result)


def _write_predictor(opts, target, study, config, scale, result) -> None:
    """model.pt (with the target's scale and training median, covariate levels and training
    ASVs) and the run's files; summary.json gets the training mean's validation metrics beside
    the model's."""
    train = study.subset("train")
    payload = {
        "kind": "predictor",
        "config": config,
        "model": result.state_dict,
        "target": {
            "column": target.column,
            "classes": study.classes,
            "mean": scale.mean,
            "std": scale.std,
            # the training median: `aam predict` scores it beside the mean without --baselines
            **({} if study.classes else {"median": float(np.median(study.targets[train]))}),
        },
        "categorical": {"columns": target.categorical, "levels": study.category_levels},
        "train_config": opts.train.to_dict(),
        "training_asvs": torch.from_numpy(sample_asvs(study.samples, train)),
    }
    summary = {}
    if not study.classes and len(study.subset("val")):
        val = study.targets[study.subset("val")]
        baseline = {"val_" + k: v for k, v in baseline_metrics(study.targets[train], val).items()}
        summary["mean_baseline"] = baseline
    path = write_outputs(opts.paths.output_dir, "model.pt", payload, result, study, summary)
    log.info("wrote %s (best epoch %d)", path, result.best_epoch)


def architecture(config: dict) -> dict:
    """The config fields a resumed run must share (runtime switches may change)."""
    return {k: v for k, v in config.items() if k not in RUNTIME_FIELDS}


def setup_run(runtime: RuntimeConfig) -> tuple[torch.device, DistContext]:
    """Threads, device and (under torchrun) the process group; under the workflow, a watch that
    stops this process when the workflow is gone (``aam.training.checkpointing.orphan``)."""
    stop_with_workflow()
    on_gpu = runtime.device.startswith("cuda") or (
        runtime.device == "auto" and torch.cuda.is_available()
    )
    bound = bind_rank_cpus(on_gpu)  # each rank its own CPUs, before threads are sized
    if bound:
        log.info("%s", bound)
    if runtime.threads:
        torch.set_num_threads(usable_threads(runtime.threads))
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
    memory_curve: MemoryCurve,
) -> None:
    """Replace ``--batch-size auto`` in ``cfg`` by the number it stands for on ``device``
    (before the config a checkpoint records is taken)."""
    if cfg.batch_size == "auto":
        cfg.batch_size = resolve_batch_size(model, objective, batches, cfg, device, memory_curve)


def prepare_outputs(paths: RunPaths, ctx: DistContext, name: str, command: str) -> RunLocks:
    """Before any work, in the process that writes the run (rank 0): fail if the output or
    checkpoint directory cannot be written or another process writes this run
    (``aam.runtime.run_lock``), and remove the temporary files a killed run left next to
    ``name`` and the run files. Under torchrun every rank learns rank 0's refusal and fails with
    it (instead of waiting in the next collective for a rank that has exited); the other ranks
    check nothing themselves, as rank 0 creates the directories they would look at. Returns the
    run's locks (held by rank 0; release them, e.g. ``with prepare_outputs(...):``, when the
    run ends)."""
    locks, refusal = RunLocks([]), None
    if ctx.is_main:
        try:
            locks = _check_and_lock(paths, command)
        except InputError as err:
            refusal = str(err)
    refusal = broadcast_from_main(refusal, ctx)
    if refusal is not None:
        raise InputError(refusal)
    if ctx.is_main:
        remove_stale_temporaries(paths.output_dir, (name, *RUN_FILES))
    return locks


def _check_and_lock(paths: RunPaths, command: str) -> RunLocks:
    check_output_dir(paths.output_dir, "output")
    checkpoints = paths.checkpoints
    if checkpoints.exists():
        check_output_dir(checkpoints, "checkpoint")
    else:  # created at the first save: an empty OUTPUT_DIR stays empty if the inputs are bad
        check_output_path(checkpoints, "checkpoint")
    return lock_directories((paths.output_dir, checkpoints), command)


def show_progress(runtime: RuntimeConfig) -> bool:
    return sys.stderr.isatty() if runtime.progress is None else runtime.progress


def parallelize(
    model: torch.nn.Module,
    runtime: RuntimeConfig,
    ctx: DistContext,
    device: torch.device,
    planned_samples: int,
) -> torch.nn.Module:
    """The model as it trains: compiled (``compile_mode`` of a run of ``planned_samples``),
    then sharded (--fsdp) or replicated (DDP) under torchrun."""
    mode, why = compile_mode(runtime.compile, device, planned_samples)
    if mode == "model" and runtime.fsdp and ctx.enabled:
        mode, why = "layers", f"{why}; --fsdp shards the model, so its layers only"
    log.info("torch.compile: %s (%s)", COMPILED[mode], why)
    compile_as(model, mode, device)
    if runtime.fsdp and not ctx.enabled:
        log.info("--fsdp: one process, nothing to shard; training as without it")
    if runtime.fsdp and ctx.enabled:
        log.info("--fsdp: sharding the model over %d processes", ctx.world_size)
        return shard_model(model, device, ctx.world_size)
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
    """Train (resuming if possible); exit status EXIT_PREEMPTED after a SLURM signal or Ctrl-C
    (latest.pt saved) so the job reruns."""
    planned = opts.train.epochs * len(batches.study.subset("train"))
    model = parallelize(model.to(device), opts.runtime, ctx, device, planned)
    log.info("%s; device %s", describe(batches.study), device)
    study, where = batches.study, opts.distances
    if batches.distances and study.distances is not None:  # on its engine, ranks sharing pairs
        share = (ctx.rank, ctx.world_size)
        engine = study.distances.on(where.unifrac_engine, where.unifrac_threads, device, share)
        batches = replace(batches, study=replace(study, distances=engine))
        batches.pair_group = pair_group(ctx, engine.sums_on_device)
    trainer = Trainer(
        model,
        objective,
        batches,
        opts.train,
        ctx,
        opts.paths.checkpoints,
        device,
        resume_config,
        progress=show_progress(opts.runtime),
        stale_checkpoints=opts.runtime.stale_checkpoints,
        events_dir=opts.paths.output_dir / EVENTS_DIR,
    )
    try:
        result = trainer.fit()
        if compiled_graphs():
            log.info(compile_summary())
        return result
    except Preempted as stop:
        log.warning("preempted: %s", stop)
        raise SystemExit(EXIT_PREEMPTED) from None


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
    samples, how their reads and distances are made, and the command's code (where known)."""
    config = {"model": model, "train": opts.train.resume_dict(), "samples": study.fingerprint()}
    if opts.code is not None:
        config["code"] = opts.code
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
    best = {"best_epoch": result.best_epoch, "best_metric": result.best_metric}
    best |= result.best_metrics
    write_json(out_dir / "summary.json", {**best, **(summary or {})})
    return path
