"""Training hyper-parameters and run options (dataclasses; their ``option`` fields are the
command-line flags of `aam pretrain` / `aam finetune`, see ``aam.options``), and the typed
options of a whole training run (``TrainingOptions``) that ``aam.training.run`` starts from."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aam.device_names import COMPILE_MODES, TORCH_DEVICE
from aam.options import OptionError, check_options, option
from aam.training.inputs.study_options import FINETUNE, TRAINING, StudyOptions
from aam.unifrac.pair_sums import DEFAULT_ALPHA, DTYPES, METRICS

if TYPE_CHECKING:  # the torch-free commands read this module: aam.models imports torch
    from aam.models.config import ModelOptions
    from aam.training.inputs.study import Study

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "fp32", "bf16")
REGRESSION_LOSSES = ("huber", "mse", "mae")
ASV_SAMPLINGS = ("first", "abundance", "random")
UNIFRAC_ENGINES = ("auto", "gpu", "cpu")  # where a training batch's UniFrac runs
SEED_MAX = 2**64 - 1  # torch.manual_seed's largest

# What validation reports each epoch (``aam.training.evaluation.evaluate``), by what it scores;
# the history and --best-metric name them with a ``val_`` prefix.
VALIDATION_METRICS = {
    "loss": ("loss",),
    "nucleotides": ("nuc_loss", "nuc_accuracy"),  # --mask-rate and --nuc-weight above 0
    "unifrac": ("unifrac_loss", "unifrac_mae", "unifrac_r"),  # UniFrac distances are learned
    "target": ("target_loss", "count_loss"),  # fine-tuning
    "regression": ("mae", "rmse", "r2"),
    "classifier": ("accuracy", "f1", "auc"),
}


def metric_names(*groups: str) -> tuple[str, ...]:
    """The ``val_`` names of the VALIDATION_METRICS ``groups``."""
    return tuple(f"val_{name}" for group in groups for name in VALIDATION_METRICS[group])


PRETRAIN_METRICS = metric_names("loss", "nucleotides", "unifrac")
REGRESSION_METRICS = PRETRAIN_METRICS + metric_names("target", "regression")
CLASSIFIER_METRICS = PRETRAIN_METRICS + metric_names("target", "classifier")
BEST_METRICS = {
    "pretrain": ("auto", *PRETRAIN_METRICS),
    "finetune": ("auto", *dict.fromkeys(REGRESSION_METRICS + CLASSIFIER_METRICS)),
}
# --best-metric auto: pretraining's loss; fine-tuning's target metric, what the test reports
AUTO_BEST = {"pretrain": "val_loss", "regression": "val_mae", "classifier": "val_accuracy"}


def best_metric_of(name: str, measured: tuple[str, ...]) -> str:
    """``name``, or for ``auto`` the metric that picks the best epoch of a run whose
    validation reports ``measured`` (``AUTO_BEST``: a classifier's, a regression's, else
    pretraining's)."""
    if name != "auto":
        return name
    for kind in ("classifier", "regression"):
        if AUTO_BEST[kind] in measured:
            return AUTO_BEST[kind]
    return AUTO_BEST["pretrain"]


def scorable_metric(metric: str, study: Study, say: bool = True) -> str:
    """``metric``, or ``val_loss`` where it scores classes (accuracy, F1, AUC) and ``study``'s
    validation samples hold one class (``one_class_sides``): AUC is undefined there, and
    accuracy and F1 favour the epochs that predict that class. A warning line says so
    (``say``: the main process)."""
    from aam.data.split import one_class_sides  # pandas: not for the commands that only parse

    classes = study.class_labels()
    held = None if classes is None else one_class_sides(study.split, classes).get("val")
    if held is None:
        return metric
    name = metric.removeprefix("val_")  # --best-metric's prefix is optional
    switch = name in VALIDATION_METRICS["classifier"]
    if say:
        log.warning(
            "--split: validation holds one class (%r, %d samples): its AUC is undefined and its "
            "accuracy scores that class alone; the best epoch is chosen by %s; make a split "
            "whose validation holds every class (`aam split --classifier` stratifies whole "
            "groups by class)",
            *held,
            f"val_loss instead of val_{name}" if switch else f"val_{name} as asked",
        )
    return "val_loss" if switch else metric


# Metrics (without their train_/val_ prefix) where lower is better; for the others higher is.
# The metrics that are better lower: every loss and error (the others, accuracy, F1, AUC, R^2
# and the UniFrac correlation, are better higher).
LOWER_IS_BETTER = frozenset(
    name
    for names in VALIDATION_METRICS.values()
    for name in names
    if name.endswith(("loss", "mae", "rmse"))
)


def check_best_metric(name: str, measured: tuple[str, ...], where: str) -> None:
    """OptionError unless --best-metric ``name`` (``val_`` optional) is one of ``measured``,
    the validation metrics of a run (``where`` says which)."""
    if name != "auto" and (name if name.startswith("val_") else f"val_{name}") not in measured:
        reason = f"not measured {where}; choose from {', '.join(measured)}"
        raise OptionError("best_metric", name, reason)


@dataclass
class TrainConfig:
    """Optimisation, loss weights and run options shared by pretraining and fine-tuning
    (saved in every checkpoint)."""

    epochs: int = option(10, "passes over the training samples", minimum=1, resume="when set")
    batch_size: int | str = option(
        8,
        "global batch (split over processes under torchrun), or auto: on a GPU the largest "
        "that fits its memory (probed before training), on a CPU 8",
        choices=("auto",),
        minimum=1,
        resume=True,
    )
    batch_tokens: int | None = option(
        None,
        "token budget of a training batch instead of a fixed --batch-size: samples of similar "
        "ASV counts, as many as keep samples x longest sample's ASVs within it (global, split "
        "over processes); --batch-size then sizes validation batches only",
        minimum=1,
        resume="when set",
    )
    lr: float = option(3e-4, "peak learning rate (AdamW)", exclusive_minimum=0, resume=True)
    weight_decay: float = option(0.01, "AdamW weight decay (matrices only)", minimum=0, resume=True)
    warmup_fraction: float = option(
        0.05,
        "linear warm-up, as a fraction of all optimizer steps",
        minimum=0,
        exclusive_maximum=1,
        resume=True,
    )
    max_grad_norm: float = option(
        1.0, "gradient clipping norm (0: off)", minimum=0, resume="when set"
    )
    grad_accum: int = option(1, "batches per optimizer step", minimum=1, resume=True)
    patience: int = option(
        0,
        "early stop after this many epochs without improvement (0: off)",
        minimum=0,
        resume="when set",
    )
    best_metric: str = option(
        "auto",
        "validation metric that picks the best epoch (the val_ prefix is optional); auto: "
        "the loss in pretraining, the target's MAE (regression) or accuracy (classes) in "
        "fine-tuning",
        choices=BEST_METRICS,
        prefix="val_",
        resume="when set",
    )
    seed: int = option(
        42,
        "seed of batch order, ASV sub-sampling, masks and initialisation",
        minimum=0,
        maximum=SEED_MAX,
        resume=True,
    )
    asv_sampling: str = option(
        "first",
        "which ASVs a sample keeps beyond --token-limit",
        choices=ASV_SAMPLINGS,
        resume=True,
    )
    mask_rate: float = option(
        0.15,
        "fraction of nucleotides masked (0: no nucleotide loss)",
        minimum=0,
        exclusive_maximum=1,
        resume=True,
    )
    unifrac_weight: float = option(
        1.0, "weight of the pairwise UniFrac loss", minimum=0, resume=True
    )
    nuc_weight: float = option(1.0, "weight of the masked-nucleotide loss", minimum=0, resume=True)
    target_weight: float = option(
        1.0, "weight of the target loss", commands=FINETUNE, minimum=0, resume=True
    )
    count_weight: float = option(
        1.0,
        "weight of the per-ASV abundance loss",
        commands=FINETUNE,
        minimum=0,
        resume=True,
    )
    loss: str = option(
        "huber",
        "regression loss of the target",
        choices=REGRESSION_LOSSES,
        commands=FINETUNE,
        resume=True,
    )
    freeze_base: bool = option(
        False,
        "train the heads only (the base's ASV embeddings are cached)",
        commands=FINETUNE,
        resume=True,
    )
    ema_decay: float = option(
        0.0,
        "decay per optimizer step of an exponential moving average of the weights (0: off); "
        "validation scores the average and the run keeps it (choose the decay on validation: "
        "a sweep and its leaderboard)",
        commands=FINETUNE,
        minimum=0,
        exclusive_maximum=1,
        resume="when set",
    )
    precision: str = option(
        "auto",
        "auto: bf16 autocast on GPUs that support it, fp32 on CPU",
        choices=PRECISIONS,
        resume="when set",
    )
    checkpoint_every_minutes: float = option(
        30.0, "save latest.pt this often (0: only at epoch ends and on signals)", minimum=0
    )

    def __post_init__(self) -> None:
        check_options(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def resume_dict(self) -> dict[str, Any]:
        """The fields a resumed run must share (declared ``resume``): every one that changes
        the weights a run ends with or the epoch it keeps (the schedule's length included), so a
        resumed run ends as a fresh one would. Those declared ``"when set"`` count only when not
        their default, so checkpoints from before they counted still resume."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.metadata["resume"] is True
            or (f.metadata["resume"] == "when set" and getattr(self, f.name) != f.default)
        }


@dataclass
class RuntimeConfig:
    """Where and how a command runs: device, CPU threads, compilation, sharding, progress bars."""

    device: str = option("auto", f"{TORCH_DEVICE[1]} (ROCm: cuda)", pattern=TORCH_DEVICE)
    threads: int | None = option(None, "CPU threads for torch", minimum=1)
    compile: str = option(
        "auto",
        "what torch.compile covers: the whole model, its transformer layers, or nothing (off); "
        "auto: on CUDA GPUs the whole model when the run's epochs x training samples repay its "
        "compiling, else the layers; nothing on CPUs or ROCm (its Triton path has failed)",
        choices=COMPILE_MODES,
        commands=TRAINING,
    )
    fsdp: bool = option(
        False,
        "under torchrun, shard parameters, gradients and optimizer state over the processes "
        "(FSDP) instead of replicating them (DDP)",
        commands=TRAINING,
    )
    progress: bool | None = option(
        None, "progress bars (default: when stderr is a terminal)", commands=TRAINING
    )
    stale_checkpoints: str = option(
        "refuse",
        "a checkpoint of another config, other samples or other code in --output-dir: refuse "
        "(one line) or restart (delete it and train afresh: the workflow's jobs, which rerun "
        "because their config, data or code changed)",
        choices=("refuse", "restart"),
        commands=TRAINING,
    )

    def __post_init__(self) -> None:
        check_options(self)


@dataclass
class UniFracOptions:
    """The UniFrac distances a training batch learns from when they are computed from the
    table and ``--tree`` (the same kernel and options as `aam unifrac`)."""

    unifrac_metric: str = option(
        "unweighted", "UniFrac metric of the batch distances", choices=METRICS, commands=TRAINING
    )
    unifrac_alpha: float = option(
        DEFAULT_ALPHA, "generalized UniFrac alpha", commands=TRAINING, minimum=0, maximum=1
    )
    unifrac_dtype: str = option(
        "float64",
        "precision of the batch UniFrac kernel (the loss reads the distances as float32)",
        choices=tuple(DTYPES),
        commands=TRAINING,
    )
    prune_missing: bool = option(
        False,
        "drop table ASVs that are not tips of --tree (the dropped read fraction is logged)",
        commands=TRAINING,
    )
    midpoint_root: bool = option(
        False, "root an unrooted --tree at its midpoint", commands=TRAINING
    )
    unifrac_engine: str = option(
        "auto",
        "where each training batch's UniFrac (from --tree) runs: gpu (on the training GPU, its "
        "own stream), cpu (on --unifrac-threads threads), auto (gpu when training on one)",
        choices=UNIFRAC_ENGINES,
        commands=TRAINING,
    )
    unifrac_threads: int | None = option(
        None,
        "CPU threads of each training batch's UniFrac on the cpu engine (default: this "
        "process's share of the CPUs it may run on when training on a GPU, 1 when training on "
        "the CPU; more than that share is an error)",
        minimum=1,
        commands=TRAINING,
    )

    def __post_init__(self) -> None:
        check_options(self)

    def to_dict(self) -> dict[str, Any]:
        """What the distances are (a resumed run must share it), not where they run."""
        where = ("unifrac_engine", "unifrac_threads")
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in where}


@dataclass
class RunPaths:
    """Inputs and outputs every training run has (the flags of their help section "inputs and
    outputs"; the table and the output directory are required, a tree or a matrix exclusive)."""

    table: Path = option(None, "BIOM table (IDs = sequences)", required=True)
    tree: Path | None = option(
        None,
        "rooted newick tree of the table's ASVs: each batch's UniFrac is computed from its "
        "reads (the default way; nothing N x N)",
        exclusive="distances",
    )
    unifrac: Path | None = option(
        None,
        "a precomputed UniFrac matrix instead (`aam unifrac`, QIIME 2 or ssu; .h5 or lsmat "
        ".tsv), read by rows",
        exclusive="distances",
    )
    output_dir: Path = option(None, "run directory (checkpoints, history)", required=True)
    checkpoint_dir: Path | None = option(
        None, "latest.pt / best.pt for resuming (default: OUTPUT_DIR/checkpoints)"
    )
    split: Path | None = option(None, "sample_id -> train/val/test TSV (`aam split`)")
    scratch: str | None = option(
        None,
        "node-local dir to copy inputs to first (env vars expand, "
        "e.g. '/scratch/$USER/job_$SLURM_JOB_ID'; default $TMPDIR if set)",
    )

    @property
    def checkpoints(self) -> Path:
        """--checkpoint-dir, by default OUTPUT_DIR/checkpoints."""
        return self.checkpoint_dir or self.output_dir / "checkpoints"


@dataclass
class TrainingOptions:
    """The typed options of a training run (`aam pretrain`, `aam finetune`)."""

    paths: RunPaths
    study: StudyOptions
    distances: UniFracOptions
    model: ModelOptions
    train: TrainConfig
    runtime: RuntimeConfig
    code: str | None = None  # fingerprint of the command's code: a checkpoint must share it
