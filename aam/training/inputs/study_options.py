"""How a command reads its samples (``StudyOptions``: the split it makes, rarefaction, missing
samples), apart from the training options of ``aam.training.config``: a command that only reads
a study (`aam split`) depends on this module alone, so an edit of a training default reruns no
split (``aam.workflow.fingerprint``)."""

from __future__ import annotations

from dataclasses import dataclass

from aam.options import OptionError, check_options, option

FINETUNE = ("finetune",)  # options that only fine-tuning has
TRAINING = ("pretrain", "finetune")  # options of the training commands, not of `aam predict`


@dataclass
class StudyOptions:
    """How a training command reads its samples (``aam.training.inputs.study.load_study``)."""

    val_fraction: float = option(
        0.1,
        "validation fraction of a split made without --split",
        commands=TRAINING,
        minimum=0,
        exclusive_maximum=1,
    )
    test_fraction: float = option(
        0.0,
        "test fraction of a split made without --split",
        commands=FINETUNE,
        minimum=0,
        exclusive_maximum=1,
    )
    rarefy_depth: int | None = option(
        None, "rarefy every sample to this many reads first", minimum=1
    )
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

    def __post_init__(self) -> None:
        check_options(self)
        if self.val_fraction + self.test_fraction >= 1:
            reason = f"with --val-fraction {self.val_fraction} leaves no training samples"
            raise OptionError("test_fraction", self.test_fraction, reason)
