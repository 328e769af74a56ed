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
from aam.training.meters.busy import DeviceBusy

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


def _compiled_steps(small_study, sizes: tuple[int, ...], layers: int = 1, mode: str = "layers"):
    """Graphs dynamo has made (eager backend: traced, not code-generated) and graph breaks it
    met after each step of the tiny encoder (``layers`` per stack) on pretraining batches of
    ``sizes`` samples (and different shapes), and each step's loss beside the same model's
    uncompiled loss. ``mode``: ``layers`` or ``model`` (``--compile``), or ``static``: the whole
    model with static shapes, what --compile did before issue 38."""
    import copy

    import numpy as np
    import torch._dynamo
    from tiny_model import tiny_model

    from aam.models import SequenceEncoder
    from aam.training.compiling import compile_layers, compile_model, compiled_graphs, graph_breaks
    from aam.training.config import TrainConfig
    from aam.training.inputs.batches import TrainBatches
    from aam.training.inputs.study import UniFracSource, load_study
    from aam.training.objective import Objective
    from aam.training.step import step_loss

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    study = load_study(
        small_study / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(matrix=small_study / "unifrac.h5"),
    )
    objective = Objective.of(TrainConfig(), predictor=False, study=study)
    batches = TrainBatches(study, 32, distances=True)
    torch.manual_seed(0)
    config = tiny_model(token_limit=32, asv_layers=layers, sample_layers=layers, dropout=0.0)
    eager = SequenceEncoder(config)
    model = copy.deepcopy(eager)
    if mode == "static":
        model = torch.compile(model, backend="eager", dynamic=False)
    else:
        compiling = compile_model if mode == "model" else compile_layers
        compiling(model, torch.device("cpu"), backend="eager")
    graphs, breaks, losses = [], [], []
    for size in sizes:
        batch = batches.batch(np.arange(size * 3, size * 4))
        pair = [
            step_loss(m, objective, batch, torch.Generator().manual_seed(size))[0]
            for m in (model, eager)
        ]
        pair[0].backward()
        graphs.append(compiled_graphs())
        breaks.append(graph_breaks())
        losses.append([float(x.detach()) for x in pair])
    return graphs, breaks, losses


@pytest.mark.slow  # three dynamo traces of a few steps
def test_compile_makes_a_bounded_number_of_graphs_whatever_the_batch_shapes(small_study):
    """--compile layers: the graphs of the first step (one per mode of the shared layer code)
    serve every later batch, whose samples, distinct ASVs and widths all differ, and every
    layer of every stack (3 layers per stack make as many graphs as 1); the compiled layers
    compute what the eager ones do. Static shapes compile again for new shapes (the count can
    fail)."""
    graphs, _, losses = _compiled_steps(small_study, (4, 6, 8))
    assert graphs[0] > 0 and graphs == [graphs[0]] * 3, graphs
    assert all(compiled == pytest.approx(eager, rel=1e-6) for compiled, eager in losses), losses
    deeper, _, _ = _compiled_steps(small_study, (4, 6), layers=3)
    assert deeper == graphs[:2], (deeper, graphs)
    static, _, _ = _compiled_steps(small_study, (4, 6), mode="static")
    assert static[-1] > static[0], static


@pytest.mark.slow  # a dynamo trace of the whole model
def test_the_whole_model_compiles_to_one_graph_without_breaks(small_study):
    """--compile model: the forward reads nothing back to the host (no ``.tolist()`` in the ASV
    encoder), so a pretraining step, masked nucleotides and their data-dependent count included,
    is one graph with 0 graph breaks, reused by batches of other shapes, and it computes what
    the eager model does."""
    graphs, breaks, losses = _compiled_steps(small_study, (4, 6, 8), mode="model")
    assert graphs == [1, 1, 1] and breaks == [0, 0, 0], (graphs, breaks)
    assert all(compiled == pytest.approx(eager, rel=1e-6) for compiled, eager in losses), losses


def test_compile_auto_is_the_whole_model_on_cuda_for_long_runs_and_never_on_cpu_or_rocm(
    monkeypatch, caplog
):
    """--compile auto: on CUDA the whole model from MODEL_PAYS_FROM planned samples, the layers
    below; nothing on the CPU or on ROCm; an explicit mode is kept (warned on ROCm)."""
    import torch

    from aam.errors import InputError
    from aam.training.compiling import MODEL_PAYS_FROM, compile_mode

    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert compile_mode("auto", cuda, MODEL_PAYS_FROM)[0] == "model"
    assert compile_mode("auto", cuda, MODEL_PAYS_FROM - 1)[0] == "layers"
    assert compile_mode("auto", cpu, 10 * MODEL_PAYS_FROM)[0] == "off"
    assert compile_mode("layers", cpu, 1) == ("layers", "asked for")
    assert compile_mode("off", cuda, 10 * MODEL_PAYS_FROM)[0] == "off"
    monkeypatch.setattr(torch.version, "hip", "6.3")
    mode, why = compile_mode("auto", cuda, 10 * MODEL_PAYS_FROM)
    assert mode == "off" and "ROCm" in why and not caplog.records
    assert compile_mode("model", cuda, 1)[0] == "model" and "on ROCm" in caplog.text
    with pytest.raises(InputError, match="--compile fast: use one of auto, model, layers, off"):
        compile_mode("fast", cpu, 1)
