"""How a training job starts its processes: one, one per GPU of a node, or one torchrun per node.

The workflow calls `launch_prefix` (standard library only: it runs where Snakemake parses the
workflow) to build the command in front of `-m aam ...`:

- one process: ``python``;
- one node, G > 1 GPUs: ``python -m torch.distributed.run --standalone --nproc_per_node G``;
- N > 1 nodes: ``srun`` starts one task per node (``--ntasks-per-node=1``), each runs
  ``python -m aam.workflow.launch`` (in the image, if there is one), which execs torchrun with a
  c10d rendezvous on the allocation's first node (`rendezvous`).

`rendezvous` reads only what SLURM sets in every task (SLURM_JOB_NODELIST, SLURM_NODEID,
SLURM_NNODES, SLURM_JOB_ID): no SLURM command is needed inside the container.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Rendezvous ports: below Linux's ephemeral range (32768-60999), so no outgoing connection holds
# one; the job id picks one, so concurrent jobs on a shared node use different ports.
PORT_BASE = 20000
PORT_SPAN = 10000
TORCHRUN = "python -m torch.distributed.run"
FORWARDED_SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"


@dataclass(frozen=True)
class Layout:
    """Processes of a training job: `nodes` x `gpus_per_node` (0 GPUs: one CPU process).
    `per_node_gres`: the GPUs were asked per node (`gpus_per_node`, SLURM's --gres=gpu:G), not
    as the job's total (`gpu`, --gpus=G)."""

    nodes: int = 1
    gpus_per_node: int = 0
    cpus_per_gpu: int | None = None
    per_node_gres: bool = False

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1


def layout_of(stage: str, resources: Mapping[str, object]) -> Layout:
    """The layout a stage's resources ask for; a ValueError (one line) for a wrong combination.

    One node: `gpu: G` (SLURM's --gpus, the job's total). Several nodes: `nodes: N` with
    `gpus_per_node: G` (--gres=gpu:G, per node); `gpu` is refused there, since SLURM would spread
    G GPUs over all N nodes.
    """
    nodes = int(resources["nodes"]) if resources.get("nodes") is not None else 1
    gpu = int(resources.get("gpu") or 0)
    per_node = int(resources.get("gpus_per_node") or 0)
    cpus = resources.get("cpus_per_gpu")
    if nodes < 1:
        raise ValueError(f"{stage}_nodes={nodes}; use 1 or more")
    if gpu and per_node:
        raise ValueError(
            f"set-resources {stage}: gpu={gpu} and gpus_per_node={per_node} both set; keep one"
        )
    if nodes > 1 and gpu:
        raise ValueError(
            f"set-resources {stage}: nodes={nodes} with gpu={gpu}; use gpus_per_node={gpu} "
            "(gpu is the job's total for SLURM, which may spread it unevenly over the nodes)"
        )
    if nodes > 1 and not per_node:
        raise ValueError(
            f"set-resources {stage}: nodes={nodes} needs gpus_per_node (1 or more processes "
            "per node)"
        )
    return Layout(nodes, per_node or gpu, int(cpus) if cpus else None, bool(per_node))


def slurm_resources(layout: Layout) -> dict[str, object]:
    """Resources the SLURM executor plugin needs besides the profile's keys: the GPUs per node
    as GRES (when asked per node) and, for several nodes, `mpi` (the plugin then runs the rule's
    shell in the batch step, which calls srun itself) with one task per node."""
    gres = {"gres": f"gpu:{layout.gpus_per_node}"} if layout.per_node_gres else {}
    if not layout.multi_node:
        return gres
    return {
        **gres,
        "mpi": "srun",
        "tasks": layout.nodes,
        "tasks_per_gpu": 0,  # else the plugin turns `tasks` into --ntasks-per-gpu
    }


def launch_prefix(layout: Layout, container: Sequence[str] = ()) -> str:
    """The shell words before `-m aam ...` (quoted; `container` is the image's exec command)."""
    if layout.multi_node:
        per_task_cpus = (layout.cpus_per_gpu or 1) * layout.gpus_per_node
        srun = [
            "srun",
            f"--nodes={layout.nodes}",
            f"--ntasks={layout.nodes}",
            "--ntasks-per-node=1",
            f"--cpus-per-task={per_task_cpus}",
            f"--gres=gpu:{layout.gpus_per_node}",
            "--kill-on-bad-exit=1",
        ]
        launch = ["python", "-m", "aam.workflow.launch", "--nproc-per-node"]
        return shlex.join([*srun, *container, *launch, str(layout.gpus_per_node), "--"])
    if layout.gpus_per_node > 1:
        return (
            f"PET_SIGNALS_TO_HANDLE={FORWARDED_SIGNALS} {TORCHRUN} --standalone "
            f"--nproc_per_node {layout.gpus_per_node}"
        )
    return "python"


def partition_nodes(sinfo_lines: str, partition: str) -> int | None:
    """Nodes of `partition` (the default one, marked `*`, when empty) in `sinfo --noheader
    --format="%P %D"` output; None when it is not listed."""
    counts: dict[str, int] = {}
    default = None
    for line in sinfo_lines.splitlines():
        name, _, count = line.strip().partition(" ")
        if not name:
            continue
        if name.endswith("*"):
            name = default = name[:-1]
        counts[name] = counts.get(name, 0) + int(count)
    return counts.get(partition or default or "")


def partition_of(*resources: Mapping[str, object]) -> str:
    """The SLURM partition of a job: ``slurm_partition`` of the first of ``resources`` (the
    rule's set-resources, then the default-resources; Snakemake's values or their ``raw``)
    that names one, $VARS expanded and quotes stripped; "" for the cluster's default."""
    for given in resources:
        value = given.get("slurm_partition")
        value = getattr(value, "raw", value)
        if value:
            return os.path.expandvars(str(value)).strip("'\"")
    return ""


def check_pretrain_partition(
    layout: Layout,
    executor: str,
    overwrite: Mapping[str, Mapping[str, object]],
    default: Mapping[str, object] | None,
) -> None:
    """Before the first SLURM job (the executor is known only once the workflow runs): a
    multi-node pretraining's partition (its set-resources, else the default-resources) has
    its nodes; ValueError (one line) if not."""
    if layout.multi_node and executor == "slurm":
        partition = partition_of(overwrite.get("pretrain", {}), default or {})
        check_partition_nodes("pretrain", layout.nodes, partition)


def check_partition_nodes(stage: str, nodes: int, partition: str) -> None:
    """ValueError (one line) if the SLURM partition has fewer than `nodes` nodes; nothing when
    `sinfo` is not here or does not answer (sbatch then has the last word)."""
    sinfo = shutil.which("sinfo")
    if sinfo is None:
        return
    try:
        out = subprocess.run(
            [sinfo, "--noheader", "--format=%P %D"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return
    have = partition_nodes(out.stdout, partition) if out.returncode == 0 else None
    if have is not None and have < nodes:
        raise ValueError(
            f"{stage}_nodes: {nodes} nodes asked, but partition {partition or '(default)'} has "
            f"{have}; lower {stage}_nodes in the config or choose a bigger partition"
        )


def container_exec(binary: str, image: str, args: str, workdir: str) -> list[str]:
    """`<binary> exec --home <workdir> <args> <image>`: what Snakemake runs a rule's shell in,
    here per node under srun (srun itself is not in the image)."""
    return [binary, "exec", "--home", workdir, *shlex.split(args), image]


def first_node(nodelist: str) -> str:
    """The first host of a SLURM node list: `nid[001234-001237,001240],gpu7` -> `nid001234`."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match or not match.group(1):
        raise ValueError(f"SLURM_JOB_NODELIST={nodelist!r} names no node")
    prefix, ranges = match.groups()
    if ranges is None:
        return prefix
    return prefix + re.split(r"[-,]", ranges)[0]


def rendezvous(env: Mapping[str, str], nproc_per_node: int) -> list[str]:
    """torchrun's arguments for this node: c10d on the first node at a port from the job id;
    the first node (SLURM_NODEID 0) hosts the store (is_host, not guessed from hostnames)."""
    missing = [
        key
        for key in ("SLURM_JOB_NODELIST", "SLURM_NODEID", "SLURM_NNODES", "SLURM_JOB_ID")
        if key not in env
    ]
    if missing:
        raise ValueError(
            f"{', '.join(missing)} not set: aam.workflow.launch runs as an srun task of a "
            "SLURM job (the workflow starts it)"
        )
    job_id = int(env["SLURM_JOB_ID"])
    port = PORT_BASE + job_id % PORT_SPAN
    return [
        f"--nnodes={int(env['SLURM_NNODES'])}",
        f"--nproc-per-node={nproc_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={first_node(env['SLURM_JOB_NODELIST'])}:{port}",
        f"--rdzv-id={job_id}",
        f"--rdzv-conf=is_host={int(env['SLURM_NODEID'] == '0')}",
        "--max-restarts=0",
    ]


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m aam.workflow.launch --nproc-per-node G -- <python args>`: exec torchrun."""
    parser = argparse.ArgumentParser(prog="python -m aam.workflow.launch", description=__doc__)
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- -m aam ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        torchrun = rendezvous(os.environ, args.nproc_per_node)
    except ValueError as err:
        sys.exit(f"error: {err}")
    argv = [sys.executable, "-m", "torch.distributed.run", *torchrun, *command]
    # torchrun dies of USR1 unless told to handle it; handled, it forwards the signal to its
    # workers and waits for them to save latest.pt (older torch ignores the variable)
    env = {"PET_SIGNALS_TO_HANDLE": FORWARDED_SIGNALS, **os.environ}
    os.execve(sys.executable, argv, env)


if __name__ == "__main__":
    main()
