"""Training hyper-parameters and run options (dataclasses; their ``option`` fields are the
command-line flags of `aam pretrain` / `aam finetune`, see ``aam.options``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from aam.options import OptionError, option
from aam.unifrac.metrics import DEFAULT_ALPHA, DTYPES, METRICS

PRECISIONS = ("auto", "fp32", "bf16")
REGRESSION_LOSSES = ("huber", "mse", "mae")
ASV_SAMPLINGS = ("first", "abundance", "random")
FINETUNE = ("finetune",)  # options that only fine-tuning has
TRAINING = ("pretrain", "finetune")  # options of the training commands, not of `aam predict`


@dataclass
class TrainConfig:
    """Optimisation, loss weights and run options shared by pretraining and fine-tuning
    (saved in every checkpoint)."""

    epochs: int = option(10, "passes over the training samples")
    batch_size: int | str = option(
        8,
        "global batch (split over processes under torchrun), or auto: on a GPU the largest "
        "that fits its memory (probed before training), on a CPU 8",
        choices=("auto",),
    )
    batch_tokens: int | None = option(
        None,
        "token budget of a training batch instead of a fixed --batch-size: samples of similar "
        "ASV counts, as many as keep samples x longest sample's ASVs within it (global, split "
        "over processes); --batch-size then sizes validation batches only",
    )
    lr: float = option(3e-4, "peak learning rate (AdamW)")
    weight_decay: float = option(0.01, "AdamW weight decay (matrices only)")
    warmup_fraction: float = option(0.05, "linear warm-up, as a fraction of all optimizer steps")
    max_grad_norm: float = option(1.0, "gradient clipping norm (0: off)")
    grad_accum: int = option(1, "batches per optimizer step")
    patience: int = option(0, "early stop after this many epochs without improvement (0: off)")
    best_metric: str = option("val_loss", "validation metric that picks the best epoch")
    seed: int = option(42, "seed of batch order, ASV sub-sampling, masks and initialisation")
    asv_sampling: str = option(
        "first", "which ASVs a sample keeps beyond --token-limit", choices=ASV_SAMPLINGS
    )
    mask_rate: float = option(0.15, "fraction of nucleotides masked (0: no nucleotide loss)")
    unifrac_weight: float = option(1.0, "weight of the pairwise UniFrac loss")
    nuc_weight: float = option(1.0, "weight of the masked-nucleotide loss")
    target_weight: float = option(1.0, "weight of the target loss", commands=FINETUNE)
    count_weight: float = option(1.0, "weight of the per-ASV abundance loss", commands=FINETUNE)
    loss: str = option(
        "huber", "regression loss of the target", choices=REGRESSION_LOSSES, commands=FINETUNE
    )
    freeze_base: bool = option(
        False,
        "train the heads only (the base's ASV embeddings are cached)",
        commands=FINETUNE,
    )
    precision: str = option(
        "auto", "auto: bf16 autocast on GPUs that support it, fp32 on CPU", choices=PRECISIONS
    )
    checkpoint_every_minutes: float = option(
        30.0, "save latest.pt this often (0: only at epoch ends and on signals)"
    )

    def __post_init__(self) -> None:
        for name in ("epochs", "grad_accum"):
            if getattr(self, name) < 1:
                raise OptionError(name, getattr(self, name), "must be at least 1")
        if self.batch_size != "auto" and not (
            isinstance(self.batch_size, int) and self.batch_size >= 1
        ):
            raise OptionError("batch_size", self.batch_size, "must be at least 1, or auto")
        if self.batch_tokens is not None and self.batch_tokens < 1:
            raise OptionError("batch_tokens", self.batch_tokens, "must be at least 1 (or unset)")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # Fields that must match for a checkpoint to be resumed (the rest may change on restart).
    RESUME_KEYS = (
        "batch_size",
        "lr",
        "weight_decay",
        "warmup_fraction",
        "grad_accum",
        "seed",
        "asv_sampling",
        "mask_rate",
        "unifrac_weight",
        "nuc_weight",
        "target_weight",
        "count_weight",
        "loss",
        "freeze_base",
    )

    def resume_dict(self) -> dict[str, Any]:
        """The fields a resumed run must share; ``batch_tokens`` only when set, so checkpoints
        from before that option still resume."""
        keys = (*self.RESUME_KEYS, *(("batch_tokens",) if self.batch_tokens else ()))
        return {k: getattr(self, k) for k in keys}


@dataclass
class RuntimeConfig:
    """Where and how a command runs: device, CPU threads, compilation, sharding, progress bars."""

    device: str = option("auto", "auto, cpu, cuda or cuda:N (ROCm: cuda)")
    threads: int | None = option(None, "CPU threads for torch")
    compile: bool = option(False, "torch.compile (skipped on ROCm)", commands=TRAINING)
    fsdp: bool = option(
        False,
        "under torchrun, shard parameters, gradients and optimizer state over the processes "
        "(FSDP) instead of replicating them (DDP)",
        commands=TRAINING,
    )
    progress: bool | None = option(
        None, "progress bars (default: when stderr is a terminal)", commands=TRAINING
    )


@dataclass
class StudyOptions:
    """How a training command reads its samples (``aam.training.study.load_study``)."""

    val_fraction: float = option(
        0.1, "validation fraction of a split made without --split", commands=TRAINING
    )
    test_fraction: float = option(
        0.0, "test fraction of a split made without --split", commands=FINETUNE
    )
    rarefy_depth: int | None = option(None, "rarefy every sample to this many reads first")
    rarefy_each_epoch: bool = option(
        False,
        "draw --rarefy-depth reads of every sample afresh each epoch (seeded by seed, epoch and "
        "sample; the batch's UniFrac is computed on the draw; evaluation reads one fixed draw); "
        "needs --tree",
        commands=TRAINING,
    )
    allow_missing_samples: bool = option(
        False, "use the samples shared by all inputs instead of failing"
    )


@dataclass
class UniFracOptions:
    """The UniFrac distances a training batch learns from when they are computed from the
    table and ``--tree`` (the same kernel and options as `aam unifrac`)."""

    unifrac_metric: str = option(
        "unweighted", "UniFrac metric of the batch distances", choices=METRICS, commands=TRAINING
    )
    unifrac_alpha: float = option(DEFAULT_ALPHA, "generalized UniFrac alpha", commands=TRAINING)
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

    def __post_init__(self) -> None:
        if not 0.0 <= self.unifrac_alpha <= 1.0:
            raise OptionError("unifrac_alpha", self.unifrac_alpha, "must be within 0 and 1")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
