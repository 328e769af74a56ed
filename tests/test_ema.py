"""`--ema-decay`: the moving average of the weights is what validation scores and what the run
keeps; training itself is unchanged; latest.pt holds the average for an exact resume."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from test_cli_training import MICRO, aam, micro_metadata, micro_table, write_metadata, write_table

from aam.training.checkpoint import load_checkpoint
from aam.training.ema import WeightAverage


def test_the_average_warms_up_then_follows_the_decay_and_swaps_back():
    model = torch.nn.Linear(2, 1, bias=False)
    torch.nn.init.zeros_(model.weight)
    average = WeightAverage(model, decay=0.5)
    expected = torch.zeros(1, 2)
    for t, value in enumerate([1.0, 2.0, 4.0, 8.0]):
        with torch.no_grad():
            model.weight.fill_(value)
        decay = min(0.5, (1 + t) / (10 + t))  # 0.1, 0.18..., 0.25, 0.31 (warm-up) -> below 0.5
        expected = decay * expected + (1 - decay) * value
        average.update()
    with average.applied():
        assert torch.allclose(model.weight, expected)
    assert torch.equal(model.weight, torch.full((1, 2), 8.0))  # its own weights back


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same fine-tuning without and with --ema-decay (12 samples, 3 epochs)."""
    root = tmp_path_factory.mktemp("ema")
    table = write_table(root / "table.biom", micro_table())
    metadata = write_metadata(root / "metadata.tsv", micro_metadata())
    common = ["--table", table, "--metadata", metadata, "--target-column", "age", *MICRO]
    common += ["--epochs", "3", "--val-fraction", "0.34", "--best-metric", "val_mae"]
    assert aam("finetune", *common, "--output-dir", root / "raw") == 0
    assert aam("finetune", *common, "--output-dir", root / "ema", "--ema-decay", "0.6") == 0
    return root, table, metadata


def history(out):
    return pd.read_csv(out / "history.tsv", sep="\t")


def test_the_average_changes_what_is_scored_not_how_it_trains(runs):
    root, _, _ = runs
    raw, ema = history(root / "raw"), history(root / "ema")
    assert raw["train_loss"].tolist() == ema["train_loss"].tolist()
    assert raw["val_mae"].tolist() != ema["val_mae"].tolist()
    latest = load_checkpoint(root / "ema" / "checkpoints" / "latest.pt")
    assert latest["ema"]["updates"] == latest["step"] > 0
    assert "ema" not in load_checkpoint(root / "raw" / "checkpoints" / "latest.pt")
    model = torch.load(root / "ema" / "model.pt", weights_only=True)
    assert model["train_config"]["ema_decay"] == 0.6


def test_the_kept_model_is_the_average_that_validation_scored(runs):
    root, table, metadata = runs
    out = root / "ema"
    best = history(out)["val_mae"].min()
    predicted = root / "predict_val"
    flags = ["--table", table, "--metadata", metadata, "--split", out / "split.tsv"]
    assert aam("predict", "--model", out / "model.pt", *flags, "--subset", "val",
               "--output-dir", predicted, "--threads", "2") == 0  # fmt: skip
    scored = json.loads((predicted / "metrics.json").read_text())["model"]["mae"]
    assert scored == pytest.approx(best, rel=1e-5)  # history.tsv keeps 6 digits
    assert scored != pytest.approx(history(root / "raw")["val_mae"].min(), rel=1e-3)


def test_a_decay_of_one_is_refused_before_training(tmp_path, capsys):
    inputs = ["--table", tmp_path / "t.biom", "--metadata", tmp_path / "m.tsv"]
    rc = aam("finetune", *inputs, "--target-column", "age", "--output-dir", tmp_path / "o",
             "--ema-decay", "1")  # fmt: skip
    assert rc == 2
    assert "--ema-decay" in capsys.readouterr().err
