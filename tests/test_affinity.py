"""Each rank on its own CPUs (aam.runtime.affinity): near its GPU where sysfs says which, shared
with the ranks whose GPUs have the same ones, else an equal slice of the job's CPUs; a real
process bound under torchrun's environment, with its threads sized from its own mask."""

import os
import subprocess
import sys

import pytest

from aam.runtime.affinity import cpulist, gpu_locality, parse_cpulist, rank_cpus

# LUMI-G as its documentation draws it (recalled, not checked on LUMI here): 8 GCDs, two per
# NUMA node; the allocation's cores 1-7, 9-15, ... (each CCD's first core reserved); GCDs 0-1
# near NUMA node 3 (cores 48-63), 2-3 near node 1, 4-5 near node 0, 6-7 near node 2.
LUMI_NEAR = [frozenset(range(48, 64))] * 2 + [frozenset(range(16, 32))] * 2
LUMI_NEAR += [frozenset(range(0, 16))] * 2 + [frozenset(range(32, 48))] * 2
LUMI_ALLOWED = [cpu for cpu in range(64) if cpu % 8]


def test_lumi_g_ranks_get_seven_cores_of_their_gcds_numa_node_each():
    cpus = [rank_cpus(r, 8, LUMI_ALLOWED, LUMI_NEAR) for r in range(8)]
    assert [cpulist(c) for c in cpus] == [
        *("49-55", "57-63", "17-23", "25-31", "1-7", "9-15", "33-39", "41-47"),
    ]
    assert len({cpu for c in cpus for cpu in c}) == 56  # every allowed core, once


@pytest.mark.parametrize(
    ("allowed", "world", "expected"),
    [
        (list(range(28)), 4, ["0-6", "7-13", "14-20", "21-27"]),
        ([3, 5, 9], 2, ["3", "5,9"]),
        ([0], 2, ["0", "0"]),  # fewer CPUs than ranks: shared
    ],
)
def test_without_gpu_locality_each_rank_gets_an_equal_contiguous_slice(allowed, world, expected):
    assert [cpulist(rank_cpus(r, world, allowed, [None] * world)) for r in range(world)] == expected


def test_gpu_locality_reads_sysfs(tmp_path):
    device = tmp_path / "0000:c1:00.0"
    device.mkdir()
    (device / "local_cpulist").write_text("48-63\n")
    (device / "numa_node").write_text("3\n")
    found = gpu_locality("0000:c1:00.0", sysfs=tmp_path)
    assert found.cpus == frozenset(range(48, 64)) and found.numa_node == 3
    unknown = gpu_locality("0000:d1:00.0", sysfs=tmp_path)
    assert unknown.cpus is None and unknown.numa_node is None
    assert parse_cpulist("0-2,5,7-8") == {0, 1, 2, 5, 7, 8}


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux affinity masks")
def test_a_rank_under_torchrun_binds_itself_and_sizes_its_threads_from_its_mask():
    """A real process with torchrun's environment (local rank 1 of 2, on the CPU): bound to
    the second half of the CPUs it was given, it sizes its threads from its own mask."""
    allowed = sorted(os.sched_getaffinity(0))
    script = (
        "import os\n"
        "from aam.training.parallel.distributed import bind_rank_cpus\n"
        "from aam.runtime.threads import cpu_share\n"
        "print(bind_rank_cpus(False))\n"
        "print(sorted(os.sched_getaffinity(0)), cpu_share())\n"
    )
    env = {**os.environ, "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    line, mask = done.stdout.splitlines()
    expected = rank_cpus(1, 2, allowed, [None, None])
    assert line == f"local rank 1 of 2: GPU none (CPU), CPUs {cpulist(expected)}, NUMA node None"
    assert mask == f"{expected} {len(expected)}"
