"""DDP (real torchrun, gloo, 2 processes): a step equals a 1-process step on the whole batch;
with --grad-accum, gradients are all-reduced once per optimizer step."""

import subprocess
import sys
from pathlib import Path

import torch
from errors import failure_lines

from aam.training.parallel.distributed import DistContext

sys.path.insert(0, str(Path(__file__).parent))
import pytest
from ddp_step import step  # noqa: E402

# One xdist worker: every worker that ran one of these tests would build the module fixtures.
pytestmark = pytest.mark.xdist_group("test_distributed")

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


@pytest.fixture(scope="module")
def ddp_runs(small_study, tmp_path_factory) -> dict:
    """Both tests' 2-rank runs, in one torchrun launch (tests/ddp_runs.py)."""
    out = tmp_path_factory.mktemp("ddp") / "runs.pt"
    command = [*TORCHRUN, str(Path(__file__).parent / "ddp_runs.py"), str(small_study), str(out)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, failure_lines(run.stderr)
    return torch.load(out, weights_only=True)


@pytest.mark.slow
def test_two_rank_step_matches_single_process_on_the_concatenated_batch(small_study, ddp_runs):
    ddp = ddp_runs["step"]
    single_loss, single_grads = step(small_study, DistContext())
    assert abs(ddp["unifrac_loss"] - single_loss) < 1e-6
    assert ddp["grads"].keys() == single_grads.keys()
    assert len(single_grads) > 10
    for name, grad in single_grads.items():
        torch.testing.assert_close(ddp["grads"][name], grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.slow
def test_grad_accum_all_reduces_once_per_step_to_the_same_weights(ddp_runs):
    runs = ddp_runs["accum"]
    no_sync, every_batch = runs["no_sync"], runs["every_batch"]
    steps = no_sync["steps"]
    assert steps == every_batch["steps"] == 3  # 48 samples, batches of 8, 2 per step
    assert no_sync["all_reduces"] == steps  # one bucket (a tiny model), once per step
    assert every_batch["all_reduces"] == 2 * steps
    # The first step's accumulated gradients, to rounding (each rank sums its two batches'
    # gradients before the average instead of after).
    assert no_sync["grads"].keys() == every_batch["grads"].keys() and len(no_sync["grads"]) > 10
    for name, grad in every_batch["grads"].items():
        torch.testing.assert_close(no_sync["grads"][name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_pair_sums_are_added_in_place_on_the_group_that_reaches_their_device(tmp_path, monkeypatch):
    """The ranks' UniFrac partial sums: a CPU share is added in place on gloo (no copy); the
    gpu engine's group is NCCL (RCCL on ROCm), which adds device tensors where they are (the
    GPU side: `make gpu-check`'s unifrac check); CPU training keeps gloo."""
    import torch.distributed as dist

    from aam.training.parallel.distributed import pair_group, sum_shares

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        share = torch.arange(6, dtype=torch.float64)
        summed = sum_shares(share, dist.new_group(backend="gloo"))
        assert summed.data_ptr() == share.data_ptr() and summed.equal(torch.arange(6.0).double())
        made = []
        monkeypatch.setattr(dist, "new_group", lambda backend: made.append(backend))
        two = DistContext(rank=0, world_size=2)
        pair_group(two, on_device=True), pair_group(two, on_device=False)
        assert made == ["nccl", "gloo"] and pair_group(DistContext(), on_device=True) is None
    finally:
        dist.destroy_process_group()


def test_host_values_travel_on_a_gloo_group_beside_nccl(tmp_path, monkeypatch):
    """On GPUs (an NCCL/RCCL default group) the ranks' votes (stop, save, finite weights) and
    rank 0's choices travel as host tensors on a gloo group of their own: they never wait for
    the device's queued work; on CPUs the default group (gloo) carries them."""
    import torch.distributed as dist

    from aam.training.parallel.distributed import any_rank, broadcast_from_main, init_distributed

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        monkeypatch.setenv("WORLD_SIZE", "2")
        made, new_group = [], dist.new_group
        monkeypatch.setattr(dist, "new_group", lambda backend: made.append(backend) or new_group())
        gpu, cpu = init_distributed("cuda"), init_distributed("cpu")
        assert made == ["gloo"] and gpu.host is not None and cpu.host is None
        reduced, all_reduce = [], dist.all_reduce
        monkeypatch.setattr(
            dist,
            "all_reduce",
            lambda t, group=None: (
                reduced.append((t.device.type, group)) or all_reduce(t, group=group)
            ),
        )
        assert any_rank([True, False], gpu) == [True, False]
        assert reduced == [("cpu", gpu.host)]
        assert broadcast_from_main({"batch_size": 64}, gpu) == {"batch_size": 64}
    finally:
        dist.destroy_process_group()
