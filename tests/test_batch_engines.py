"""Where a training batch's UniFrac runs (`--unifrac-engine`, `--unifrac-threads`): every engine
trains to the same weights, the device-step timer measures nothing on a CPU, and a forced
engine the machine cannot give is one line before the first step (issue 38).

The gpu engine's code (``aam.unifrac.batch_device``) runs here under CPU torch: the runs
below swap it in for the cpu engine. Its distances against the CPU kernel: test_batch_unifrac.py;
on a GPU: `make gpu-check` (the unifrac check).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from aam.threads import cpu_share
from aam.training.busy import DeviceBusy
from aam.training.distances import TreeDistances
from aam.unifrac.batch_device import DeviceBatchUniFrac

sys.path.insert(0, str(Path(__file__).parent))
from test_batch_local_training import latest, losses, pretrain_args  # noqa: E402
from test_cli_training import aam, assert_failed  # noqa: E402


@pytest.fixture(autouse=True)
def _torch_threads_kept():
    """The in-process runs set torch's threads to 1: give the worker its own back after."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _gpu_code_on_the_cpu(self: TreeDistances, engine, threads, device) -> TreeDistances:
    """``TreeDistances.on`` giving the gpu engine's code on the CPU (no stream)."""
    return replace(self, device_unifrac=DeviceBatchUniFrac.on(self.unifrac, device))


@pytest.mark.slow  # three trainings of one epoch
def test_every_engine_trains_to_the_same_weights(small_study, demo_dir, tmp_path, monkeypatch):
    """One epoch on the tree: the cpu engine in this thread, on a pool of 2 threads (the same
    distances bit for bit), and the gpu engine's code (within float64 rounding, cast to the
    loss's float32): the same weights (1e-6) and losses."""
    table, tree = small_study / "table.biom", demo_dir / "tree.nwk"
    runs = {"serial": ("--unifrac-threads", "1"), "pool": ("--unifrac-threads", "2")}
    runs |= {"gpu code": ("--unifrac-engine", "cpu")}
    out = {}
    for name, flags in runs.items():
        out[name] = tmp_path / name.replace(" ", "_")
        with monkeypatch.context() as patch:
            if name == "gpu code":
                patch.setattr(TreeDistances, "on", _gpu_code_on_the_cpu)
            if name == "pool":
                patch.setattr("aam.training.distances.cpu_share", lambda: 2)
            assert aam(*pretrain_args(table, out[name], "--tree", tree, *flags)) == 0
    reference = latest(out["serial"])
    for name in ("pool", "gpu code"):
        ours = latest(out[name])
        assert (ours["epoch"], ours["step"]) == (reference["epoch"], reference["step"]) == (1, 9)
        for key, tensor in reference["model"].items():
            torch.testing.assert_close(ours["model"][key], tensor, rtol=0, atol=1e-6, msg=key)
        assert losses(ours["history"]) == pytest.approx(losses(reference["history"]), rel=1e-6)
    assert "device_busy" not in reference["history"][0]  # a CPU run measures no device time


def test_a_forced_gpu_engine_without_a_gpu_is_one_line(small_study, demo_dir, tmp_path, capsys):
    out = tmp_path / "out"
    args = pretrain_args(small_study / "table.biom", out, "--tree", demo_dir / "tree.nwk")
    rc = aam(*args, "--device", "cpu", "--unifrac-engine", "gpu")
    assert_failed(rc, capsys, "pretrain", out, "--unifrac-engine gpu: training runs on cpu")


def test_more_unifrac_threads_than_cpus_is_one_line(small_study, demo_dir, tmp_path, capsys):
    out = tmp_path / "out"
    args = pretrain_args(small_study / "table.biom", out, "--tree", demo_dir / "tree.nwk")
    rc = aam(*args, "--unifrac-threads", cpu_share() + 1)
    assert_failed(rc, capsys, "pretrain", out, f"--unifrac-threads {cpu_share() + 1}: ")


def test_the_device_timer_measures_nothing_on_a_cpu():
    busy = DeviceBusy(torch.device("cpu"))
    with busy.step():
        torch.ones(4).sum()
    assert busy.fraction(1.0) is None and busy.intervals == []


def _graphs_over_batches(small_study, options: dict) -> list[int]:
    """Graphs dynamo has made (eager backend: traced, not code-generated) after each of 5
    steps of the tiny encoder on pretraining batches of different sizes and shapes."""
    import numpy as np
    import torch._dynamo
    from tiny_model import tiny_model

    from aam.models import SequenceEncoder
    from aam.training.batches import TrainBatches
    from aam.training.config import TrainConfig
    from aam.training.device import compiled_graphs
    from aam.training.objective import Objective
    from aam.training.step import step_loss
    from aam.training.study import load_study

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    study = load_study(
        small_study / "table.biom", max_bp=100, unifrac_path=small_study / "unifrac.h5"
    )
    objective = Objective.of(TrainConfig(), predictor=False, study=study)
    batches = TrainBatches(study, 32, distances=True)
    torch.manual_seed(0)
    model = torch.compile(SequenceEncoder(tiny_model(token_limit=32)), backend="eager", **options)
    graphs = []
    for size in (4, 6, 8, 5, 7):
        batch = batches.batch(np.arange(size * 3, size * 4))
        loss, _ = step_loss(model, objective, batch, torch.Generator().manual_seed(size))
        loss.backward()
        graphs.append(compiled_graphs())
    return graphs


@pytest.mark.slow  # two dynamo traces of 5 steps
def test_compile_makes_a_bounded_number_of_graphs_whatever_the_batch_shapes(small_study):
    """--compile's options: the graphs of the first step (its pieces between graph breaks)
    serve every later batch, whose samples, distinct ASVs and widths all differ; static
    shapes compile again for new shapes (the count can fail)."""
    from aam.training.device import COMPILE_OPTIONS

    dynamic = _graphs_over_batches(small_study, COMPILE_OPTIONS)
    assert dynamic[0] > 0 and dynamic == [dynamic[0]] * 5, dynamic
    static = _graphs_over_batches(small_study, {"dynamic": False})
    assert static[-1] > static[0], static
