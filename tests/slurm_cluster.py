"""A real two-node SLURM cluster (munged, slurmctld, two slurmd) for end-to-end executor tests.

Usage in a test module (tests/ is on sys.path, as for tests/ddp_runs.py)::

    # ruff: noqa: F811  (the imported fixture is a test argument)
    from slurm_cluster import slurm_cluster  # noqa: F401  (the session fixture)

    def test_something(slurm_cluster, tmp_path):
        ...  # run `python -m snakemake --executor slurm ...`; jobs run on this machine

The recipe is ../shared/notes/local-slurm.md (beside the checkout): Debian's slurm-wlm + munge
(installed by .ci/run), the config at the default path /etc/slurm/slurm.conf (jobs call srun,
which does not see a SLURM_CONF of the submitting shell), task/affinity, proctrack/linuxproc,
eight fake GPUs (character devices with /dev/null's numbers, named in gres.conf: jobs get
SLURM_GPUS_ON_NODE and ROCR_VISIBLE_DEVICES), no slurmdbd (no sacct: use `--slurm-status-command
squeue`; finished jobs stay visible to squeue and `scontrol show job` for MinJobAge=3600 s,
longer than any test waits; accounts are not validated).

Two nodes on this one machine (../shared/notes/local-slurm.md, item 11): each slurmd runs in its
own network namespace (`aamn1`, `aamn2`) with its own address (10.77.0.1, 10.77.0.2 on the
interface `aam0`), joined by a bridge (`aambr0`, 10.77.0.254, where slurmctld listens); the
filesystem and munged's socket are shared. Only these addresses are used, so a job's processes
on the two nodes talk over the bridge exactly as over a cluster network (gloo:
GLOO_SOCKET_IFNAME=aam0). The namespaces, the bridge and the daemons are removed at the end,
also when a test fails.

Both nodes (CPUs and memory from `slurmd -C`) are in every partition. Partitions
mirror the real sites, with their wall-time limits enforced at submission (EnforcePartLimits=ALL):
LUMI `small`, `small-g`, `standard-g` (whole node), `dev-g`; SDSC Cosmos `cluster` (its one
partition, default, whole node), plus `cpu` and `gpu` for profiles that split CPU and GPU work.
The node is as big as this machine, so a real profile's `cpus_per_gpu: 24` or `mem_mb: 400000` is
rejected at submission; `running_cluster(root, cpus=96, mem_mb=500000)` declares a site-sized
node instead (SlurmdParameters=config_overrides; the jobs then share the real CPUs).

Run it by hand with `python tests/slurm_cluster.py` (as root): the cluster stays up until Enter.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CONF_DIR = Path("/etc/slurm")
SLURM_CONF = CONF_DIR / "slurm.conf"
GRES_CONF = CONF_DIR / "gres.conf"
BACKUP_SUFFIX = ".aam-harness-backup"
MARK = "# Written by the aam-hpc test harness (tests/slurm_cluster.py); removed at teardown."
LOCK_FILE = Path("/run/lock/aam-slurm-harness.lock")
NODES = ("aamnode1", "aamnode2")
SUBNET = "10.77.0"  # a private /24 used only by the test cluster
CTLD_ADDR = f"{SUBNET}.254"  # the bridge's address in the root namespace: slurmctld
BRIDGE = "aambr0"
NODE_IFACE = "aam0"  # each node's interface inside its namespace (GLOO_SOCKET_IFNAME)
HOSTS = Path("/etc/hosts")
HOSTS_MARK = "# aam-hpc test harness node"
CTLD_PORT = 16817
SLURMD_PORT = 16818
GPUS = 8  # per node
MAX_MEM_MB = 64000  # what the node declares at most; jobs ask for little
DAEMONS = ("slurmctld", "slurmd", "munged", "ip", "nsenter", "unshare")
CLIENTS = ("sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel", "munge", "unmunge")
SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
MUNGE_DIRS = ("/etc/munge", "/var/lib/munge", "/var/log/munge", "/run/munge")
MUNGE_PID = Path("/run/munge/munged.pid")
MUNGED_MARK = Path("/run/lock/aam-slurm-harness.munged")  # pid of the munged we started
STARTUP_TIMEOUT = 60.0

# name -> options of the partition line. MaxTime = the site's limit (LUMI docs; Cosmos: 24 h).
PARTITIONS: dict[str, str] = {
    # SDSC Cosmos: one partition, `cluster`, whole nodes (4 MI300A each), 24 h suggested.
    "cluster": "Default=YES MaxTime=1-00:00:00 OverSubscribe=EXCLUSIVE",
    "cpu": "MaxTime=1-00:00:00",
    "gpu": "MaxTime=1-00:00:00",
    # LUMI: small (CPU, 3 days), small-g (1-4 GCDs, 3 days), standard-g (whole nodes, 2 days),
    # dev-g (3 hours).
    "small": "MaxTime=3-00:00:00",
    "small-g": "MaxTime=3-00:00:00",
    "standard-g": "MaxTime=2-00:00:00 OverSubscribe=EXCLUSIVE",
    "dev-g": "MaxTime=03:00:00",
}


class SlurmHarnessError(RuntimeError):
    """The local cluster could not be set up or did not become ready."""


def _which(name: str) -> str | None:
    return shutil.which(name, path=SBIN_PATH)


def missing_tools() -> list[str]:
    return [name for name in DAEMONS + CLIENTS if _which(name) is None]


def _run(args: list[str], timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    env["PATH"] = SBIN_PATH
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise SlurmHarnessError(
            f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip() or proc.stdout}"
        )
    return proc


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(no {path}: {exc.strerror})"
    return "\n".join(text[-lines:])


def _pid_alive(pid: int, comm: str) -> bool:
    """True if `pid` runs and is the program `comm` (guards against reused pids)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == comm
    except OSError:
        return False


def _read_pid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _stop_pid(pidfile: Path, comm: str, timeout: float = 15) -> None:
    """SIGTERM the daemon named in `pidfile` (if it is `comm`), SIGKILL after `timeout`."""
    pid = _read_pid(pidfile)
    if pid is None or not _pid_alive(pid, comm):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _pid_alive(pid, comm):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
            break
        time.sleep(0.2)


def parse_scontrol_oneliner(line: str) -> dict[str, str]:
    """`scontrol show job -o` output -> {key: value}; values may contain spaces."""
    parts = re.split(r"\s+(?=[A-Za-z][\w:/.\-]*=)", line.strip())
    record: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if sep:
            record[key] = value
    return record


def node_hardware() -> dict[str, int]:
    """CPUs, Boards, SocketsPerBoard, CoresPerSocket, ThreadsPerCore, RealMemory (`slurmd -C`)."""
    out = _run([_which("slurmd") or "slurmd", "-C"]).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("NodeName="))
    fields = dict(item.split("=", 1) for item in line.split()[1:])
    keys = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    return {key: int(fields[key]) for key in keys if key in fields}


def render_slurm_conf(
    host: str,
    state: Path,
    hw: dict[str, int],
    cpus: int | None = None,
    mem_mb: int | None = None,
) -> str:
    """slurm.conf for the two nodes (NODES). By default each node declares the machine's CPUs
    (`slurmd -C`) and 90 % of its memory (at most MAX_MEM_MB). `cpus`/`mem_mb` declare a bigger
    node, e.g. a site's GPU node shape so that real profiles (cpus_per_gpu, mem_mb) are accepted
    unchanged; slurmd then runs with SlurmdParameters=config_overrides and jobs share the real
    CPUs (of both nodes: they are one machine)."""
    mem = mem_mb or max(500, min(MAX_MEM_MB, hw.get("RealMemory", 2000) * 9 // 10))
    if cpus:
        topo = f"CPUs={cpus} Boards=1 SocketsPerBoard=1 CoresPerSocket={cpus} ThreadsPerCore=1"
    else:
        topo = " ".join(
            f"{k}={hw[k]}"
            for k in ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore")
            if k in hw
        )
    overrides = bool(cpus or mem_mb)
    lines = [
        MARK,
        "ClusterName=aamtest",
        f"SlurmctldHost={host}({CTLD_ADDR})",
        f"SlurmctldPort={CTLD_PORT}",
        f"SlurmdPort={SLURMD_PORT}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"StateSaveLocation={state}/ctld",
        f"SlurmdSpoolDir={state}/spool/%n",
        f"SlurmctldPidFile={state}/slurmctld.pid",
        f"SlurmdPidFile={state}/slurmd-%n.pid",
        f"SlurmctldLogFile={state}/log/slurmctld.log",
        f"SlurmdLogFile={state}/log/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/affinity",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "DefMemPerCPU=500",
        "GresTypes=gpu",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "SchedulerType=sched/backfill",
        # Test cluster only: look at pending jobs every 1-2 s, not every 30-60 s (the defaults),
        # so a job waiting for a whole-node (EXCLUSIVE) partition starts as soon as it can.
        "SchedulerParameters=bf_interval=1,sched_interval=2",
        "SwitchType=switch/none",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "EnforcePartLimits=ALL",
        "MinJobAge=3600",
        "ReturnToService=2",
        "KillWait=5",
        "InactiveLimit=0",
        "SlurmdTimeout=120",
        *(["SlurmdParameters=config_overrides"] if overrides else []),
    ]
    lines += [
        f"NodeName={node} NodeAddr={node_addr(node)} {topo} RealMemory={mem} Gres=gpu:{GPUS} "
        "State=UNKNOWN"
        for node in NODES
    ]
    lines += [
        f"PartitionName={name} Nodes={','.join(NODES)} {opts} State=UP"
        for name, opts in PARTITIONS.items()
    ]
    return "\n".join(lines) + "\n"


def render_gres_conf(gpu_dir: Path) -> str:
    """Both nodes name the same fake devices (each node's slurmd hands them out separately)."""
    lines = [f"NodeName={node} Name=gpu File={gpu_dir}/fakegpu[0-{GPUS - 1}]" for node in NODES]
    return "\n".join([MARK, "AutoDetect=off", *lines]) + "\n"


def node_addr(node: str) -> str:
    """The address of `node` (aamnode<i> -> 10.77.0.<i>)."""
    return f"{SUBNET}.{NODES.index(node) + 1}"


def netns(node: str) -> str:
    """The network namespace `node`'s slurmd (and so its jobs) runs in."""
    return f"aamn{NODES.index(node) + 1}"


def _ip(*args: str, check: bool = True) -> None:
    _run([_which("ip") or "ip", *args], check=check)


def remove_network() -> None:
    """Delete the nodes' namespaces (their veth ends go with them) and the bridge, if present."""
    for node in NODES:
        _ip("netns", "delete", netns(node), check=False)
        _ip("link", "delete", f"aamv{NODES.index(node) + 1}", check=False)
    _ip("link", "delete", BRIDGE, check=False)


def remove_hosts() -> None:
    """Drop the nodes' lines from /etc/hosts (those ending with HOSTS_MARK)."""
    with contextlib.suppress(OSError):
        lines = HOSTS.read_text().splitlines(keepends=True)
        kept = [line for line in lines if not line.rstrip().endswith(HOSTS_MARK)]
        if kept != lines:
            HOSTS.write_text("".join(kept))


def add_hosts() -> None:
    """Name the nodes in /etc/hosts, as a cluster's DNS does (torchrun resolves the first node's
    name for its rendezvous)."""
    remove_hosts()
    text = HOSTS.read_text()
    lines = "".join(f"{node_addr(node)} {node}  {HOSTS_MARK}\n" for node in NODES)
    HOSTS.write_text(text + ("" if text.endswith("\n") or not text else "\n") + lines)


def make_network() -> None:
    """A bridge with the controller's address and one namespace per node, linked by a veth pair:
    the node side is NODE_IFACE with the node's address."""
    remove_network()
    _ip("link", "add", BRIDGE, "type", "bridge")
    _ip("addr", "add", f"{CTLD_ADDR}/24", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")
    for node in NODES:
        ns, veth = netns(node), f"aamv{NODES.index(node) + 1}"
        _ip("netns", "add", ns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", NODE_IFACE, "netns", ns)
        _ip("link", "set", veth, "master", BRIDGE)
        _ip("link", "set", veth, "up")
        _ip("-n", ns, "addr", "add", f"{node_addr(node)}/24", "dev", NODE_IFACE)
        _ip("-n", ns, "link", "set", NODE_IFACE, "up")
        _ip("-n", ns, "link", "set", "lo", "up")


def _written_by_us(path: Path) -> bool:
    try:
        return path.read_text(errors="replace").startswith(MARK)
    except OSError:
        return False


def _conf_value(path: Path, key: str) -> str | None:
    try:
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(f"{key}="):
                return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


@dataclass
class SlurmCluster:
    """A running two-node cluster; what the `slurm_cluster` fixture yields."""

    root: Path  # state, spool, pid files, fake GPUs
    conf: Path = SLURM_CONF
    gres_conf: Path = GRES_CONF
    nodes: tuple[str, ...] = NODES
    partitions: tuple[str, ...] = tuple(PARTITIONS)
    gpus: int = GPUS
    cpus: int | None = None  # declared node size; None: the machine's (see render_slurm_conf)
    mem_mb: int | None = None
    _started_munged: bool = field(default=False, repr=False)

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    @property
    def ctld_pidfile(self) -> Path:
        return self.root / "slurmctld.pid"

    def slurmd_pidfile(self, node: str) -> Path:
        return self.root / f"slurmd-{node}.pid"

    # -- queries -----------------------------------------------------------------------------
    def run(self, *args: str, timeout: float = 30, check: bool = True) -> str:
        """Run a SLURM client command (sbatch, scontrol, ...) and return its stdout."""
        return _run(list(args), timeout=timeout, check=check).stdout

    def squeue(self) -> list[dict[str, str]]:
        """All jobs the controller knows (finished ones stay MinJobAge=3600 s)."""
        fmt = "%i|%P|%j|%T|%r|%b|%C|%m"
        keys = ("jobid", "partition", "name", "state", "reason", "tres_per_node", "cpus", "mem")
        out = self.run("squeue", "--states=all", "--noheader", f"--format={fmt}")
        return [dict(zip(keys, line.split("|"), strict=False)) for line in out.splitlines()]

    def scontrol_job(self, jobid: str | int) -> dict[str, str]:
        """`scontrol show job -o <jobid>` as a dict (JobState, Partition, TRES, TresPerJob, ...)."""
        out = self.run("scontrol", "show", "job", "-o", str(jobid))
        return parse_scontrol_oneliner(out.splitlines()[0])

    def node_state(self) -> str:
        """The nodes' states, e.g. `idle` when both are idle, `allocated,idle` when not."""
        out = self.run("sinfo", "--noheader", "--Node", "--format=%T")
        states = {line.strip() for line in out.splitlines() if line.strip()}
        return ",".join(sorted(states)) or "unknown"

    def logs(self, lines: int = 30) -> str:
        return "\n".join(
            f"--- {path.name} (last {lines} lines)\n{_tail(path, lines)}"
            for path in (
                self.log_dir / "slurmctld.log",
                *(self.log_dir / f"slurmd-{node}.log" for node in self.nodes),
                self.log_dir / "daemons.out",
                Path("/var/log/munge/munged.log"),
            )
        )

    def wait_idle(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Wait until both nodes are `idle` and no job is pending, running or completing."""
        deadline = time.monotonic() + timeout
        state, busy = "unknown", []
        while time.monotonic() < deadline:
            try:
                state = self.node_state()
                busy = [
                    j
                    for j in self.squeue()
                    if j["state"] in {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING"}
                ]
            except (SlurmHarnessError, subprocess.TimeoutExpired) as exc:
                state = f"query failed: {exc}"
                dead = [
                    comm
                    for comm, pidfile in (
                        ("slurmctld", self.ctld_pidfile),
                        *((f"slurmd ({n})", self.slurmd_pidfile(n)) for n in self.nodes),
                    )
                    if not _pid_alive(_read_pid(pidfile) or -1, comm.split()[0])
                ]
                if dead:
                    raise SlurmHarnessError(
                        f"{' and '.join(dead)} not running ({state})\n{self.logs()}"
                    ) from None
            else:
                if state == "idle" and not busy:
                    return
                if state.startswith(("inval", "drain", "down")) and "*" not in state:
                    # e.g. INVAL after a GPU/CPU mismatch: show why and let the node resume once
                    reason = self.run("scontrol", "show", "node", "-o", check=False)
                    raise SlurmHarnessError(f"nodes are {state}: {reason.strip()}\n{self.logs()}")
            time.sleep(0.5)
        raise SlurmHarnessError(
            f"nodes not idle after {timeout:.0f} s (state {state}, busy jobs {busy})\n{self.logs()}"
        )

    def cancel_all(self, timeout: float = 30) -> None:
        """Cancel every job and wait until none is pending or running."""
        self.run("scancel", "--full", "--user=root", check=False)
        self.wait_idle(timeout)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        host = _run(["hostname", "-s"]).stdout.strip()
        for sub in ("ctld", "log", "gpu", *(f"spool/{node}" for node in self.nodes)):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        for i in range(GPUS):
            _make_fake_gpu(self.root / "gpu" / f"fakegpu{i}")
        hw = node_hardware()
        _install_conf(SLURM_CONF, render_slurm_conf(host, self.root, hw, self.cpus, self.mem_mb))
        _install_conf(GRES_CONF, render_gres_conf(self.root / "gpu"))
        make_network()
        add_hosts()
        self._start_munged()
        out = self.log_dir / "daemons.out"
        # nsenter --net switches the network namespace only (`ip netns exec` would also remount
        # /sys, hiding /sys/fs/cgroup, without which slurmd does not start); unshare --uts gives
        # the node its own hostname (torchrun tells the workers the first node's hostname)
        nsenter, unshare = _which("nsenter") or "nsenter", _which("unshare") or "unshare"
        slurmd = _which("slurmd") or "slurmd"
        commands = [[_which("slurmctld") or "slurmctld"]] + [
            [
                nsenter,
                f"--net=/run/netns/{netns(node)}",
                unshare,
                "--uts",
                "sh",
                "-c",
                f"hostname {node} && exec {shlex.quote(slurmd)} -N {node}",
            ]
            for node in self.nodes
        ]
        for command in commands:
            with out.open("a") as handle:
                proc = subprocess.run(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    timeout=60,
                    env={k: v for k, v in os.environ.items() if k != "SLURM_CONF"},
                )
            if proc.returncode != 0:
                raise SlurmHarnessError(
                    f"{' '.join(command)} exited {proc.returncode}\n{self.logs()}"
                )
        self.wait_idle(STARTUP_TIMEOUT)

    def _start_munged(self) -> None:
        if _munge_works():
            # Someone's munged serves /run/munge: use it, and stop it at teardown only if an
            # earlier harness run started it (and died before its teardown).
            pid = _read_pid(MUNGE_PID)
            self._started_munged = pid is not None and _read_pid(MUNGED_MARK) == pid
            return
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        for path in MUNGE_DIRS:
            if Path(path).exists():
                shutil.chown(path, "munge", "munge")
                for sub in Path(path).rglob("*"):
                    shutil.chown(sub, "munge", "munge")
        if not Path("/etc/munge/munge.key").exists():
            _run(["runuser", "-u", "munge", "--", _which("mungekey") or "mungekey", "--create"])
        # --force: a stale socket left by a killed munged must not block the start
        _run(["runuser", "-u", "munge", "--", _which("munged") or "munged", "--force"])
        self._started_munged = True
        deadline = time.monotonic() + 15
        while _read_pid(MUNGE_PID) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        MUNGED_MARK.write_text(f"{_read_pid(MUNGE_PID)}\n")
        while not _munge_works():
            if time.monotonic() > deadline:
                raise SlurmHarnessError(
                    f"munged does not answer (munge -n | unmunge)\n{self.logs()}"
                )
            time.sleep(0.2)

    def stop(self) -> None:
        """Cancel jobs, stop both slurmd, slurmctld and (if we started it) munged; remove the
        namespaces and the bridge."""
        with contextlib.suppress(Exception):
            if _pid_alive(_read_pid(self.ctld_pidfile) or -1, "slurmctld"):
                self.run("scancel", "--full", "--user=root", check=False, timeout=10)
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and any(
                    j["state"] in {"RUNNING", "COMPLETING"} for j in self.squeue()
                ):
                    time.sleep(0.5)
        for node in self.nodes:
            _stop_pid(self.slurmd_pidfile(node), "slurmd")
        _stop_pid(self.ctld_pidfile, "slurmctld")
        if self._started_munged:
            _stop_pid(MUNGE_PID, "munged")
            MUNGED_MARK.unlink(missing_ok=True)
        remove_network()
        remove_hosts()


def _make_fake_gpu(path: Path) -> None:
    """A character device with /dev/null's numbers: slurmd then accepts the GPU as a device and
    sets CUDA_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES in GPU jobs. A plain file (fallback) still
    counts as a GPU for scheduling."""
    if path.exists() or path.is_symlink():
        path.unlink()
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError:
        path.touch()


def _munge_works() -> bool:
    munge, unmunge = _which("munge"), _which("unmunge")
    if not (munge and unmunge):
        return False
    try:
        cred = subprocess.run([munge, "-n"], capture_output=True, timeout=10)
        if cred.returncode != 0:
            return False
        check = subprocess.run([unmunge], input=cred.stdout, capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return check.returncode == 0


def _install_conf(path: Path, text: str) -> None:
    """Write a harness config; a foreign one is moved to <path>.aam-harness-backup first."""
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    if path.exists() and not _written_by_us(path):
        if backup.exists():
            raise SlurmHarnessError(
                f"{path} was not written by the test harness and {backup} already exists; "
                "restore one of them by hand, then rerun"
            )
        path.rename(backup)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _restore_conf(path: Path) -> None:
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    if backup.exists():
        backup.replace(path)
    elif _written_by_us(path):
        path.unlink()


def _stop_leftovers() -> None:
    """Stop daemons of an earlier harness run that died without teardown (their pid files are
    named in the harness-written slurm.conf), and refuse to touch a cluster that is not ours."""
    if _written_by_us(SLURM_CONF):
        for key, comm in (("SlurmdPidFile", "slurmd"), ("SlurmctldPidFile", "slurmctld")):
            value = _conf_value(SLURM_CONF, key)
            for node in NODES if value else ():
                _stop_pid(Path(value.replace("%n", node)), comm)
    remove_network()
    remove_hosts()
    for comm in ("slurmctld", "slurmd"):
        pids = _run(["pgrep", "-x", comm], check=False).stdout.split()
        if pids:
            raise SlurmHarnessError(
                f"a {comm} not started by this harness is running (pid {', '.join(pids)}); "
                "stop it before running the SLURM tests"
            )


@contextlib.contextmanager
def _session_lock(timeout: float = 600) -> Iterator[None]:
    """One harness cluster per machine at a time (it owns /etc/slurm and fixed ports)."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with LOCK_FILE.open("w") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SlurmHarnessError(
                        f"another test session holds {LOCK_FILE} (its SLURM cluster) "
                        f"for more than {timeout:.0f} s"
                    ) from None
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def preflight() -> str | None:
    """Why the cluster cannot run here, or None."""
    missing = missing_tools()
    if missing:
        return (
            f"SLURM/munge programs not found: {', '.join(missing)}. The SLURM tests run a real "
            "two-node cluster; .ci/run installs the Debian packages `slurm-wlm`, `munge` and "
            "`iproute2` (apt-get install -y slurm-wlm munge iproute2; nsenter and unshare are "
            "in util-linux)."
        )
    if os.geteuid() != 0:
        return "the SLURM test cluster needs root (it writes /etc/slurm and starts slurmd)"
    return None


@contextlib.contextmanager
def running_cluster(
    root: Path, cpus: int | None = None, mem_mb: int | None = None
) -> Iterator[SlurmCluster]:
    """Start the cluster (state in `root`), yield it, stop it and restore /etc/slurm."""
    problem = preflight()
    if problem:
        raise SlurmHarnessError(problem)
    with _session_lock():
        _stop_leftovers()
        cluster = SlurmCluster(root=root, cpus=cpus, mem_mb=mem_mb)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
            _restore_conf(GRES_CONF)
            _restore_conf(SLURM_CONF)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory) -> Iterator[SlurmCluster]:
    """A running two-node SLURM cluster with partitions named like LUMI's and Cosmos', each node
    declared as big as a site's GPU node (256 CPUs, 1.5 TB, 8 GPUs), so the real profiles'
    requests are accepted; Cosmos' whole-node jobs take one node and LUMI's can run on the other.
    Jobs share the real CPUs."""
    problem = preflight()
    if problem:
        pytest.fail(problem, pytrace=False)
    # pytest keeps the last few session dirs: the daemons' logs stay there for post-mortems
    root = tmp_path_factory.mktemp("slurm")
    with running_cluster(root, cpus=256, mem_mb=1_536_000) as cluster:
        yield cluster


if __name__ == "__main__":
    with running_cluster(Path(tempfile.mkdtemp(prefix="aam-slurm-"))) as cluster:
        print(cluster.run("sinfo"))
        input(f"cluster up (logs in {cluster.log_dir}); press Enter to stop it ")
