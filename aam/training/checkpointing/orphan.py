"""A training job stops itself when the workflow that started it is gone.

Snakemake runs a rule's shell as ``bash -c '...'`` whose child is ``python -m aam ...``; when
Snakemake is SIGKILLed (or dies otherwise) the two survive it, and a local training job would go
on writing its outputs with nobody waiting for them. The workflow therefore exports
``AAM_STOP_WITH_PID=<its pid>@<its host>`` in every job's shell prefix (``workflow_token``,
taken by the Snakemake process that parses the workflow and runs the jobs: the user's locally,
the job's own one inside a SLURM job), and a training command started with it calls
``stop_with_workflow``:

- a daemon thread looks every ``POLL_S`` seconds whether that process (same PID and start time,
  so a reused PID does not count) still exists, and when it is gone sends SIGTERM to this
  process: the trainer saves ``latest.pt`` at the next step and exits with status 75 (never 0),
  as after SLURM's SIGTERM (``aam.training.checkpointing.preemption``); before training
  starts, SIGTERM simply ends the process;
- on Linux, ``prctl(PR_SET_PDEATHSIG, SIGTERM)``: the kernel sends SIGTERM when the direct
  parent (the rule's shell, or torchrun) dies.

Without the variable (a command run by hand, with nohup, ...) nothing changes. Another host's
token (a task that srun started on another node) is not watched there. Standard library only.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping

from aam.runtime.run_lock import process_start
from aam.training.checkpointing.preemption import signal_self

log = logging.getLogger(__name__)
ENV = "AAM_STOP_WITH_PID"
POLL_S = 2.0
PR_SET_PDEATHSIG = 1


def workflow_token(pid: int | None = None) -> str:
    """``PID@HOST`` of this process (or ``pid``): the value of ``AAM_STOP_WITH_PID``."""
    return f"{os.getpid() if pid is None else pid}@{socket.gethostname()}"


def parse_token(value: str) -> tuple[int, str | None] | None:
    """``(pid, host)`` of ``PID`` or ``PID@HOST``; None if it is neither."""
    pid, _, host = value.strip().partition("@")
    if not pid.isdigit() or int(pid) < 1:
        return None
    return int(pid), host or None


def stop_with_workflow(environ: Mapping[str, str] | None = None) -> threading.Thread | None:
    """Stop this process (SIGTERM) when the process named by ``AAM_STOP_WITH_PID`` is gone;
    return the watching thread (None when nothing is watched)."""
    value = (os.environ if environ is None else environ).get(ENV, "")
    if not value:
        return None
    token = parse_token(value)
    if token is None:
        log.warning("%s=%r is not PID or PID@HOST; not watching it", ENV, value)
        return None
    pid, host = token
    stop_with_parent()
    if host is not None and host != socket.gethostname():
        return None  # a task on another node: the one on the workflow's host watches
    start = process_start(pid)
    if start is None:
        log.warning("%s=%s: no such process here; not watching it", ENV, value)
        return None
    thread = threading.Thread(
        target=_watch, args=(pid, start, POLL_S), daemon=True, name="aam-stop-with"
    )
    thread.start()
    return thread


def _watch(pid: int, start: int, every: float) -> None:
    stop = threading.Event()
    while not stop.wait(every):
        if process_start(pid) != start:
            reason = f"its workflow, pid {pid}, is gone"
            log.warning("%s: stopping at the next step (rerun the workflow to resume)", reason)
            signal_self(reason)
            return


def stop_with_parent() -> bool:
    """Linux: SIGTERM to this process when its parent dies (``PR_SET_PDEATHSIG``); whether it
    was set. Note the kernel means the parent *thread* that started this process."""
    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # it died before the call: no signal will come
        signal_self(f"its parent, pid {parent}, is gone")
    return True
