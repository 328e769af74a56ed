"""aam.training.schedule: linear warm-up + cosine decay."""

import math

import pytest
import torch

from aam.training.schedule import warmup_cosine

BASE_LR = 1e-3


def make(total_steps: int = 100, **kwargs):
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=BASE_LR)
    return model, optimizer, warmup_cosine(optimizer, total_steps, **kwargs)


def run(optimizer, scheduler, steps: int) -> list[float]:
    """LR used by each of the next ``steps`` optimizer steps."""
    lrs = []
    for _ in range(steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


def test_curve_shape():
    _, optimizer, scheduler = make(100, warmup_fraction=0.1, min_lr_ratio=0.1)
    lrs = run(optimizer, scheduler, 120)
    warmup = 10
    assert lrs[0] < 0.1 * BASE_LR
    assert all(a < b for a, b in zip(lrs[:warmup], lrs[1 : warmup + 1], strict=True))
    assert lrs[warmup] == pytest.approx(BASE_LR)
    assert all(a >= b for a, b in zip(lrs[warmup:], lrs[warmup + 1 :], strict=False))
    assert lrs[100] == pytest.approx(0.1 * BASE_LR)
    assert lrs[100:] == [lrs[100]] * 20  # clamped after total_steps
    midpoint = warmup + 45
    assert lrs[midpoint] == pytest.approx(BASE_LR * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 2))))


def test_short_warmup_is_at_least_one_step():
    _, optimizer, scheduler = make(10, warmup_fraction=0.01)
    lrs = run(optimizer, scheduler, 11)
    assert lrs[0] == pytest.approx(BASE_LR / 2)
    assert lrs[1] == pytest.approx(BASE_LR)
    assert lrs[10] == pytest.approx(0.0)


def test_no_warmup_and_single_step():
    _, optimizer, scheduler = make(5, warmup_fraction=0.0)
    assert run(optimizer, scheduler, 1) == [pytest.approx(BASE_LR)]
    _, optimizer, scheduler = make(1, warmup_fraction=0.5, min_lr_ratio=0.2)
    assert run(optimizer, scheduler, 2) == [pytest.approx(BASE_LR), pytest.approx(0.2 * BASE_LR)]


def test_resume_mid_run_gives_identical_lrs():
    _, optimizer, scheduler = make(50, warmup_fraction=0.2, min_lr_ratio=0.05)
    expected = run(optimizer, scheduler, 60)

    _, optimizer, scheduler = make(50, warmup_fraction=0.2, min_lr_ratio=0.05)
    first = run(optimizer, scheduler, 7)
    saved = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}

    _, optimizer, scheduler = make(50, warmup_fraction=0.2, min_lr_ratio=0.05)
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    assert first + run(optimizer, scheduler, 53) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"total_steps": 0},
        {"total_steps": 10, "warmup_fraction": 1.0},
        {"total_steps": 10, "warmup_fraction": -0.1},
        {"total_steps": 10, "min_lr_ratio": 1.5},
    ],
)
def test_invalid_arguments(kwargs):
    optimizer = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=BASE_LR)
    with pytest.raises(ValueError):
        warmup_cosine(optimizer, **kwargs)
