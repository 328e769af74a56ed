"""`--batch-size auto`: the choice on synthetic memory curves, the CPU default, bad values."""

import logging
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from tiny_model import tiny_model

from aam.errors import InputError
from aam.models import SequenceEncoder
from aam.profiling.probe import memory_curve
from aam.training import auto_batch
from aam.training.auto_batch import (
    CPU_BATCH_SIZE,
    MAX_BATCH_SIZE,
    MEMORY_FRACTION,
    PROBE_SIZES,
    choose_batch_size,
    resolve_batch_size,
)
from aam.training.config import TrainConfig
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.study import UniFracSource, load_study
from aam.training.objective import Objective
from aam.training.parallel.distributed import DistContext


def _affine(base: float, per_sample: float, sizes=(2, 4, 8, 16)) -> list[tuple[int, float]]:
    return [(b, base + per_sample * b) for b in sizes]


def test_an_affine_curve_is_extrapolated_to_the_budget():
    assert choose_batch_size(_affine(1000, 100), 5000) == 40  # 1000 + 100 * 40 = 5000


def test_a_steeper_last_segment_sets_the_slope():
    curve = [(2, 1200.0), (4, 1400.0), (8, 1800.0), (16, 3400.0)]  # 100, then 200 MB/sample
    # slope 200 through the highest point at that slope, (2, 1200): 800 + 200 b
    assert choose_batch_size(curve, 10_000) == 46


def test_the_ceiling_caps_and_a_flat_curve_keeps_to_measured_sizes():
    assert choose_batch_size(_affine(1000, 100), 50_000, ceiling=64) == 64
    assert choose_batch_size([(2, 900.0), (4, 900.0), (8, 890.0)], 1000) == 8
    flat_at_budget = [(b, 20_000.0) for b in (2, 4, 8, 16)]  # found by hypothesis: the fit's
    assert choose_batch_size(flat_at_budget, 20_000.0) == 16  # round-off is not growth


@given(st.floats(100, 10_000), st.floats(1, 1000), st.floats(1.2, 50))
def test_on_an_exact_affine_curve_the_choice_is_the_largest_that_fits(base, slope, room):
    budget = room * (base + slope * 16)
    chosen = choose_batch_size(_affine(base, slope), budget)
    assert base + slope * chosen <= budget * (1 + 1e-9)
    assert chosen == MAX_BATCH_SIZE or budget * (1 + 1e-9) < base + slope * (chosen + 1)


@given(
    st.lists(st.floats(0, 20_000), min_size=4, max_size=4).map(sorted),
    st.floats(20_000, 100_000),
)
# found by hypothesis in CI (issue 43): a subnormal slope chose a batch of ~2e303 samples
@example(peaks=[0.0, 0.0, 0.0, 2.25e-298], budget=56_488.5)
@example(peaks=[0.0, 0.0, 0.0, 5e-324], budget=20_000.0)
def test_the_choice_stays_under_a_line_over_every_measured_point(peaks, budget):
    """Whatever the measurements: from every measured point, the steeper of the fitted and the
    last slope predicts a peak within the budget at the chosen size."""
    sizes = (2, 4, 8, 16)
    curve = list(zip(sizes, peaks, strict=True))
    chosen = choose_batch_size(curve, budget)
    fitted = np.polyfit(sizes, peaks, 1)[0]
    slope = max(fitted, (peaks[3] - peaks[2]) / 8, 0.0)
    assert 1 <= chosen <= MAX_BATCH_SIZE
    for b, m in curve:
        assert m + slope * (chosen - b) <= budget * (1 + 1e-9)


@pytest.mark.parametrize("rise", [2.25e-298, 5e-324, 1e-300, 1e-12])
def test_a_vanishing_growth_keeps_to_the_measured_sizes(rise):
    """A rise below a byte is no growth: the largest measured size, not an
    extrapolation to ~1e303 samples (what 2.25e-298 gave before issue 43)."""
    assert choose_batch_size([(2, 0.0), (4, 0.0), (8, 0.0), (16, rise)], 56_488.5) == 16


def test_a_shallow_real_growth_is_capped_at_the_maximum():
    shallow = _affine(1000, 1e-3)  # 1 kB per sample: 49 million samples fit 50 GB
    assert choose_batch_size(shallow, 50_000) == MAX_BATCH_SIZE


def test_a_falling_curve_vouches_for_the_measured_sizes_only():
    falling = [(2, 900.0), (4, 800.0), (8, 700.0), (16, 600.0)]
    assert choose_batch_size(falling, 1000) == 16
    assert choose_batch_size(list(reversed(falling)), 1000) == 16  # the order given is no matter


@pytest.mark.parametrize(
    "curve",
    [[], [(2, 1000.0), (4, float("nan"))], [(2, 1000.0), (4, float("inf"))], [(0, 1.0), (4, 2.0)]],
)
def test_an_empty_or_non_finite_curve_is_one_line(curve):
    with pytest.raises(InputError, match=r"^--batch-size auto: .*give a number to --batch-size$"):
        choose_batch_size(curve, 5000)


def test_not_even_the_floor_fits_names_the_option_and_the_fixes():
    with pytest.raises(InputError, match=r"--batch-size auto: 2 samples .* MB budget; lower"):
        choose_batch_size(_affine(4000, 1000), 5000, floor=2)


def test_one_measured_size_is_not_a_curve():
    with pytest.raises(InputError, match="--batch-size auto: .*give a number to --batch-size"):
        choose_batch_size([(2, 1000.0)], 5000)


@pytest.fixture(scope="module")
def stage(small_study):
    """A pretraining objective, its batches and its config (``--batch-size auto``)."""
    study = load_study(
        small_study / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(matrix=small_study / "unifrac.h5"),
    )
    cfg = TrainConfig(batch_size="auto")
    objective = Objective.of(cfg, predictor=False, study=study)
    return objective, TrainBatches(study, 32, distances=objective.use_unifrac), cfg


MODEL = tiny_model(token_limit=32)


def _never_called(*args):
    raise AssertionError("a CPU run is not probed")


def test_on_a_cpu_auto_keeps_the_default_and_says_so(stage, caplog):
    with caplog.at_level(logging.INFO):
        chosen = resolve_batch_size(
            SequenceEncoder(MODEL), *stage, torch.device("cpu"), probe=_never_called
        )
    assert chosen == CPU_BATCH_SIZE == TrainConfig().batch_size
    assert "on a CPU" in caplog.text


@pytest.mark.slow
def test_the_probe_measures_a_copy_of_the_model(stage):
    model = SequenceEncoder(MODEL)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    curve = memory_curve(model, *stage, torch.device("cpu"), (2, 4))
    assert [b for b, _ in curve] == [2, 4] and all(np.isfinite(m) for _, m in curve)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_under_torchrun_rank_0_probes_as_one_process(stage, monkeypatch):
    """Rank 0 probes alone (the other ranks wait for its outcome): its probe steps get a
    single-process objective and batches (no collective the others never join); the batch
    it picks is per process, times the ranks."""
    two = DistContext(rank=0, world_size=2)
    objective, batches, cfg = stage
    seen = []

    def probe(model, objective, batches, cfg, device, sizes):
        seen.append((objective.ctx, batches.ctx, batches.pair_group))
        return [(b, 1000.0 + 100.0 * b) for b in sizes]

    monkeypatch.setattr(auto_batch, "gpu_memory_mb", lambda device: 10_000.0)
    monkeypatch.setattr(auto_batch, "broadcast_from_main", lambda value, ctx: value)
    chosen = resolve_batch_size(
        SequenceEncoder(MODEL),
        replace(objective, ctx=two),
        replace(batches, ctx=two),
        cfg,
        torch.device("cpu"),
        probe=probe,
    )
    assert seen == [(DistContext(), DistContext(), None)]
    curve = [(b, 1000.0 + 100.0 * b) for b in PROBE_SIZES]
    train = len(batches.study.subset("train"))
    per_rank = choose_batch_size(curve, MEMORY_FRACTION * 10_000.0, floor=2, ceiling=train // 2)
    assert chosen == 2 * per_rank
