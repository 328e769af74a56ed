"""On a CPU a training run given no size option of the model trains the CPU-sized model
(``CPU_MODEL``) and says so with the option that chooses the GPU-sized default; any option
given is kept, and a size option, a GPU or a pretrained base leaves the defaults alone."""

from __future__ import annotations

import logging

import pytest
import torch

from aam.cli import main
from aam.models.config import CPU_MODEL, LAYER_STACKS, ModelConfig, ModelOptions
from aam.training.model_size import SIZE_OPTIONS, sized_for

CPU = torch.device("cpu")
SAID = "on the CPU and no model size option given: training the CPU-sized model"


def aam(*args) -> int:
    """Exit status of `aam ARGS` run in-process."""
    try:
        return main([str(a) for a in args])
    except SystemExit as stop:
        return int(stop.code or 0)


def options(layers: int | None = None, **given) -> ModelOptions:
    """ModelOptions as `aam pretrain` makes them of the flags ``given`` (and --layers)."""
    return ModelOptions(ModelConfig(**given), frozenset(given), layers)


def assert_cpu_sized(config: ModelConfig) -> None:
    sizes = {name: getattr(config, name) for name in CPU_MODEL if name != "layers"}
    assert sizes == {k: v for k, v in CPU_MODEL.items() if k != "layers"}
    assert {getattr(config, stack) for stack in LAYER_STACKS} == {CPU_MODEL["layers"]}


def test_no_size_option_on_a_cpu_trains_the_cpu_model_and_says_how_to_choose_the_gpu_one(caplog):
    caplog.set_level(logging.INFO)
    assert_cpu_sized(sized_for(options(), CPU).config())
    gpu_size = ModelConfig().embedding_dim
    assert SAID in caplog.text and f"e.g. --embedding-dim {gpu_size}, trains" in caplog.text
    assert CPU_MODEL["embedding_dim"] != gpu_size


def test_options_other_than_size_are_kept_on_the_cpu_model():
    config = sized_for(options(dropout=0.3, asv_identity_buckets=7), CPU).config()
    assert_cpu_sized(config)
    assert (config.dropout, config.asv_identity_buckets) == (0.3, 7)


@pytest.mark.parametrize("size", sorted(SIZE_OPTIONS))
def test_any_size_option_given_keeps_the_defaults(size, caplog):
    caplog.set_level(logging.INFO)
    given = options(layers=3) if size == "layers" else options(**{size: 8})
    assert sized_for(given, CPU) is given
    assert SAID not in caplog.text


def test_a_gpu_or_a_pretrained_base_keeps_the_options(caplog):
    caplog.set_level(logging.INFO)
    none = options()
    assert sized_for(none, torch.device("cuda")) is none
    assert sized_for(none, CPU, base=ModelConfig().to_dict()) is none
    assert SAID not in caplog.text


@pytest.mark.slow
def test_pretrain_and_finetune_without_size_options_train_the_cpu_model(
    small_study, demo_dir, tmp_path, caplog
):
    """The commands apply it (the workflow passes no size option for a run without `model:`):
    pretraining with none, fine-tuning from scratch with a non-size option."""
    data = ["--table", small_study / "table.biom", "--unifrac", small_study / "unifrac.h5"]
    run = ["--epochs", "1", "--batch-size", "8", "--threads", "1", "--device", "cpu"]
    run += ["--no-progress"]
    caplog.set_level(logging.INFO)
    assert aam("pretrain", *data, *run, "--output-dir", tmp_path / "pre") == 0
    assert SAID in caplog.text
    caplog.clear()
    target = ["--metadata", demo_dir / "metadata.tsv", "--target-column", "age"]
    target += ["--allow-missing-samples", "--dropout", "0.2"]
    assert aam("finetune", *data, *target, *run, "--output-dir", tmp_path / "ft") == 0
    assert SAID in caplog.text
    for path in (tmp_path / "pre/encoder.pt", tmp_path / "ft/model.pt"):
        config = ModelConfig.from_dict(torch.load(path, weights_only=True)["config"])
        assert_cpu_sized(config)
    assert config.dropout == 0.2


@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_the_help_says_the_cpu_model_and_how_to_choose_the_size(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "The defaults below are sized for a GPU. On a CPU, with none of" in text
    assert "--embedding-dim 32, --attention-heads 4, --layers 2" in text
