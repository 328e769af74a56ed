"""Training launch lines: one process, torchrun on one node, srun + one torchrun per node."""

import shlex
import subprocess
import sys

import pytest

from aam.workflow.launch import (
    FORWARDED_SIGNALS,
    Layout,
    container_exec,
    first_node,
    launch_prefix,
    layout_of,
    partition_nodes,
    rendezvous,
    slurm_resources,
)


def test_one_process_and_one_node_keep_their_commands():
    assert launch_prefix(layout_of("pretrain", {})) == "python"
    assert launch_prefix(layout_of("pretrain", {"gpu": 1})) == "python"
    assert launch_prefix(layout_of("pretrain", {"gpu": 4})) == (
        f"PET_SIGNALS_TO_HANDLE={FORWARDED_SIGNALS} python -m torch.distributed.run "
        "--standalone --nproc_per_node 4"
    )
    assert slurm_resources(layout_of("pretrain", {"gpu": 4})) == {}


def test_four_cosmos_nodes_start_one_torchrun_per_node_under_srun():
    layout = layout_of("pretrain", {"nodes": 4, "gpus_per_node": 4, "cpus_per_gpu": 24})
    assert layout == Layout(4, 4, 24, per_node_gres=True)
    assert slurm_resources(layout) == {
        "gres": "gpu:4",
        "mpi": "srun",
        "tasks": 4,
        "tasks_per_gpu": 0,
    }
    assert launch_prefix(layout) == (
        "srun --nodes=4 --ntasks=4 --ntasks-per-node=1 --cpus-per-task=96 --gres=gpu:4 "
        "--kill-on-bad-exit=1 python -m aam.workflow.launch --nproc-per-node 4 --"
    )


def test_the_image_starts_on_every_node_inside_srun():
    image = container_exec(
        "singularity", "/vast/aam images/aam.sif", "--rocm --bind /scratch", "/home/u/wd"
    )
    prefix = launch_prefix(Layout(2, 4, 24, True), image)
    words = shlex.split(prefix)
    assert words[: words.index("singularity")][0] == "srun"
    assert words[words.index("singularity") :] == [
        "singularity",
        "exec",
        "--home",
        "/home/u/wd",
        "--rocm",
        "--bind",
        "/scratch",
        "/vast/aam images/aam.sif",  # one word, however the path is spelled
        "python",
        "-m",
        "aam.workflow.launch",
        "--nproc-per-node",
        "4",
        "--",
    ]


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"nodes": 2, "gpu": 4}, "use gpus_per_node=4"),
        ({"nodes": 2}, "needs gpus_per_node"),
        ({"gpu": 2, "gpus_per_node": 2}, "both set"),
        ({"nodes": 0, "gpus_per_node": 1}, "pretrain_nodes=0; use 1 or more"),
    ],
)
def test_wrong_combinations_are_one_line(resources, message):
    with pytest.raises(ValueError, match=message) as err:
        layout_of("pretrain", resources)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("nodelist", "first"),
    [
        ("aamnode[1-2]", "aamnode1"),
        ("nid[001234-001237,001240]", "nid001234"),
        ("x1000c0s0b0n0,x1000c0s0b0n1", "x1000c0s0b0n0"),
        ("gpu7", "gpu7"),
        ("node[07,09-11]", "node07"),
    ],
)
def test_first_node_of_a_slurm_node_list(nodelist, first):
    assert first_node(nodelist) == first


def test_rendezvous_is_hosted_by_node_zero_at_a_port_from_the_job_id():
    env = {
        "SLURM_JOB_NODELIST": "nid[001234-001237]",
        "SLURM_NNODES": "4",
        "SLURM_JOB_ID": "7654321",
    }
    head = rendezvous({**env, "SLURM_NODEID": "0"}, 4)
    other = rendezvous({**env, "SLURM_NODEID": "3"}, 4)
    assert head == [
        "--nnodes=4",
        "--nproc-per-node=4",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=nid001234:24321",
        "--rdzv-id=7654321",
        "--rdzv-conf=is_host=1",
        "--max-restarts=0",
    ]
    assert [a for a in other if a not in head] == ["--rdzv-conf=is_host=0"]


def test_launch_outside_a_slurm_task_fails_with_one_line():
    run = subprocess.run(
        [sys.executable, "-m", "aam.workflow.launch", "--nproc-per-node", "1", "--", "-c", "0"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert run.returncode != 0
    assert run.stderr.strip().splitlines() == [
        "error: SLURM_JOB_NODELIST, SLURM_NODEID, SLURM_NNODES, SLURM_JOB_ID not set: "
        "aam.workflow.launch runs as an srun task of a SLURM job (the workflow starts it)"
    ]


def test_partition_node_counts_from_sinfo():
    lines = "cluster* 2\ncluster* 1\nsmall-g 2\nstandard-g 3\n"
    assert partition_nodes(lines, "cluster") == 3
    assert partition_nodes(lines, "") == 3  # the default partition
    assert partition_nodes(lines, "small-g") == 2
    assert partition_nodes(lines, "nope") is None
