"""Where a training batch's UniFrac runs (`--unifrac-engine`, `--unifrac-threads`): a forced
engine the machine cannot give is one line before the first step, the device-step timer
measures nothing on a CPU, and `--compile` makes a bounded number of graphs (issue 38).

Every engine training to the same weights: test_batch_local_training.py; their distances
against the CPU kernel: test_batch_unifrac.py; on a GPU: `make gpu-check` (the unifrac check).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from aam.runtime.threads import cpu_share
from aam.training.busy import DeviceBusy

sys.path.insert(0, str(Path(__file__).parent))
from test_batch_local_training import pretrain_args  # noqa: E402
from test_cli_training import aam, assert_failed  # noqa: E402


@pytest.fixture(autouse=True)
def _torch_threads_kept():
    """The in-process runs set torch's threads to 1: give the worker its own back after."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


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


def _graphs_over_batches(small_study, options: dict, sizes: tuple[int, ...]) -> list[int]:
    """Graphs dynamo has made (eager backend: traced, not code-generated) after each step of
    the tiny encoder on pretraining batches of ``sizes`` samples (and different shapes)."""
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
    for size in sizes:
        batch = batches.batch(np.arange(size * 3, size * 4))
        loss, _ = step_loss(model, objective, batch, torch.Generator().manual_seed(size))
        loss.backward()
        graphs.append(compiled_graphs())
    return graphs


@pytest.mark.slow  # two dynamo traces of a few steps
def test_compile_makes_a_bounded_number_of_graphs_whatever_the_batch_shapes(small_study):
    """--compile's options: the graphs of the first step (its pieces between graph breaks)
    serve every later batch, whose samples, distinct ASVs and widths all differ; static
    shapes compile again for new shapes (the count can fail)."""
    from aam.training.device import COMPILE_OPTIONS

    dynamic = _graphs_over_batches(small_study, COMPILE_OPTIONS, (4, 6, 8))
    assert dynamic[0] > 0 and dynamic == [dynamic[0]] * 3, dynamic
    static = _graphs_over_batches(small_study, {"dynamic": False}, (4, 6))
    assert static[-1] > static[0], static
