"""One writer per run (aam.runtime.run_lock) and training jobs that stop with their workflow
(aam.training.checkpointing.orphan): a second trainer on a directory fails with one line, and a
trainer whose Snakemake (or direct parent) died saves latest.pt and exits 75. (A SIGKILLed run's
lock taken over by its rerun: faults/test_resume.py, whose SIGKILL case resumes to the weights of
an unstopped run.)"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from checkout import copy_checkout
from tiny_model import TINY_FLAGS

from aam.errors import InputError
from aam.runtime import run_lock
from aam.runtime.run_lock import (
    LOCK_NAME,
    Holder,
    lock_directories,
    lock_workflow,
    process_start,
    unlock_workflow,
)
from aam.training.checkpointing.checkpoint import load_checkpoint
from aam.training.checkpointing.orphan import ENV, parse_token, stop_with_workflow, workflow_token

pytestmark = pytest.mark.faults  # concurrency and kills: the fault-injection tier

BUSY = re.compile(
    r"^aam pretrain: error: (?P<dir>\S+): another aam pretrain \(pid (?P<pid>\d+) on host "
    r"(?P<host>\S+), since \S+\) is writing this run; wait for it or stop it \(scancel/kill\)$"
)


def _dead_pid() -> int:
    """The PID of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _record(path: Path, **fields) -> Path:
    record = {"pid": 1, "host": socket.gethostname(), "started": "T0", "command": "aam x"}
    path.write_text(json.dumps({**record, **fields}))
    return path


@pytest.fixture
def no_file_locks(monkeypatch):
    """A file system without locks (NFS without lockd, some VAST/Lustre mounts)."""

    def flock(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", flock)


# --------------------------------------------------------------------------- the lock itself


def test_a_second_lock_is_refused_and_release_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with lock_directories([out, out / "checkpoints"], "aam pretrain") as locks:
        record = json.loads((out / LOCK_NAME).read_text())
        assert record["pid"] == os.getpid() and record["command"] == "aam pretrain"
        assert record["host"] == socket.gethostname()
        with pytest.raises(InputError) as refused:
            lock_directories([out], "aam finetune")
        line = str(refused.value)
        assert "\n" not in line
        assert line.startswith(f"{out}: another aam pretrain (pid {os.getpid()} on host ")
        assert line.endswith("is writing this run; wait for it or stop it (scancel/kill)")
        # the checkpoint directory alone (another run's --checkpoint-dir) is locked too
        with pytest.raises(InputError, match="another aam pretrain"):
            lock_directories([tmp_path / "other", out / "checkpoints"], "aam pretrain")
        assert not (tmp_path / "other").exists()  # the first lock it took was given back
        assert len(locks.locks) == 2
    assert list(out.iterdir()) == []  # lock files gone, the checkpoint dir it made too


def test_a_killed_holders_lock_is_taken_over(tmp_path, caplog):
    _record(tmp_path / LOCK_NAME, pid=_dead_pid(), command="aam pretrain")
    caplog.set_level(logging.WARNING)
    with lock_directories([tmp_path], "aam pretrain"):
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert "taking over the lock of aam pretrain pid" in caplog.text
    assert not (tmp_path / LOCK_NAME).exists()


def test_one_directory_given_twice_is_locked_once(tmp_path):
    with lock_directories([tmp_path, tmp_path / "."], "aam pretrain") as locks:
        assert len(locks.locks) == 1


def test_without_file_locks_a_dead_pid_of_this_host_is_stale(tmp_path, no_file_locks, caplog):
    _record(tmp_path / LOCK_NAME, pid=_dead_pid())
    caplog.set_level(logging.WARNING)
    with lock_directories([tmp_path], "aam pretrain"):
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
        with pytest.raises(InputError, match=f"another aam pretrain \\(pid {os.getpid()} "):
            lock_directories([tmp_path], "aam pretrain")  # a live record of this host
    assert "taking over the stale lock of aam x" in caplog.text
    assert not (tmp_path / LOCK_NAME).exists()


def test_without_file_locks_a_reused_pid_is_stale(tmp_path, no_file_locks):
    me = Holder.this_process("aam pretrain")
    _record(tmp_path / LOCK_NAME, pid=me.pid, pid_start=(me.pid_start or 0) + 1)
    with lock_directories([tmp_path], "aam pretrain"):
        pass


def test_without_file_locks_another_hosts_lock_is_refused_until_stale(tmp_path, no_file_locks):
    path = _record(tmp_path / LOCK_NAME, pid=4242, host="node-a17", slurm_job="9001")
    with pytest.raises(InputError) as refused:
        lock_directories([tmp_path], "aam pretrain")
    line = str(refused.value)
    assert "\n" not in line
    assert line.startswith(
        f"{tmp_path}: another aam x (pid 4242 on host node-a17, SLURM job 9001, since T0) is "
        "writing this run; wait for it or stop it (scancel/kill); this file system has no file "
        "locks and the lock file was touched "
    )
    assert line.endswith(f"s ago: if that process is gone, remove {path}")
    old = time.time() - run_lock.STALE_AFTER_S - 60  # no heartbeat for longer than that
    os.utime(path, (old, old))
    with lock_directories([tmp_path], "aam pretrain"):
        assert json.loads(path.read_text())["host"] == socket.gethostname()


def test_the_holder_touches_its_lock_file(tmp_path, monkeypatch):
    monkeypatch.setattr(run_lock, "HEARTBEAT_S", 0.05)
    with lock_directories([tmp_path], "aam pretrain"):
        path = tmp_path / LOCK_NAME
        old = time.time() - 1000
        os.utime(path, (old, old))
        time.sleep(0.5)
        assert time.time() - path.stat().st_mtime < 100


def test_the_workflow_lock_is_held_once_per_process(tmp_path):
    lock_workflow(tmp_path)
    lock_workflow(tmp_path)  # onstart of a second workflow in one process: already held
    with pytest.raises(InputError, match=r"another snakemake .* is running this workflow"):
        lock_directories([tmp_path], "snakemake", "running this workflow")
    unlock_workflow()
    assert not (tmp_path / LOCK_NAME).exists()


def test_workflow_tokens():
    assert parse_token(workflow_token(123)) == (123, socket.gethostname())
    assert parse_token("77") == (77, None)
    assert parse_token("x@h") is None and parse_token("0") is None
    assert stop_with_workflow({}) is None
    assert stop_with_workflow({ENV: f"{os.getpid()}@another-host"}) is None


# --------------------------------------------------------------------------- training commands


def _pretrain(study: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "aam",
        "pretrain",
        "--table",
        str(study / "table.biom"),
        "--unifrac",
        str(study / "unifrac.h5"),
        "--output-dir",
        str(out),
        "--batch-size",
        "4",
        *TINY_FLAGS,
        "--threads",
        "1",
        "--device",
        "cpu",
        "--seed",
        "7",
        "--no-progress",
        *extra,
    ]


def _wait_for(predicate, timeout: float = 120, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _locked_by(path: Path, pid: int) -> bool:
    try:
        return json.loads(path.read_text())["pid"] == pid
    except (OSError, ValueError):
        return False


def _mid_training(latest: Path) -> bool:
    try:
        state = load_checkpoint(latest) if latest.exists() else None
    except Exception:  # noqa: BLE001 (read while being replaced)
        return False
    return bool(state and state["epoch"] >= 1)


@pytest.mark.slow
def test_a_second_trainer_on_one_directory_fails_with_one_line(small_study, tmp_path, capsys):
    from aam.cli import main

    out = tmp_path / "out"
    first = subprocess.Popen(
        _pretrain(small_study, out, "--epochs", "3"), stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for(lambda: _locked_by(out / LOCK_NAME, first.pid), what="the first trainer")
        before = sorted(p.name for p in out.iterdir())
        rc = main(_pretrain(small_study, out, "--epochs", "3")[3:])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2
        assert len(err) == 1 and BUSY.match(err[0]), err
        match = BUSY.match(err[0])
        assert match["dir"] == str(out) and int(match["pid"]) == first.pid
        assert set(before) <= {p.name for p in out.iterdir()}  # nothing removed
        first_err = first.communicate(timeout=300)[1]
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, first_err[-3000:]
    assert (out / "encoder.pt").is_file()
    assert not (out / LOCK_NAME).exists() and not (out / "checkpoints" / LOCK_NAME).exists()


# What Snakemake does with a rule's shell: bash -c '...' as a child of the Snakemake process,
# the training command a child of that bash; AAM_STOP_WITH_PID names Snakemake (as the shell
# prefix of common.smk exports it). Killed, Snakemake leaves bash and the trainer behind;
# bash records its exit status.
WORKFLOW = textwrap.dedent(
    """
    import os, shlex, subprocess, sys, time
    from aam.training.checkpointing.orphan import ENV, workflow_token
    os.environ[ENV] = workflow_token()
    command, log, status = sys.argv[1], sys.argv[2], sys.argv[3]
    if sys.argv[4] == "bash":
        shell = f"{command} > {shlex.quote(log)} 2>&1; echo $? > {shlex.quote(status)}"
        subprocess.Popen(["bash", "-c", shell])
    else:  # the trainer itself is the child; the watched process stays alive
        os.environ[ENV] = workflow_token(int(sys.argv[5]))
        subprocess.Popen(shlex.split(command), stdout=open(log, "w"), stderr=subprocess.STDOUT)
    time.sleep(3600)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["workflow", "parent"])
def test_a_trainer_stops_when_its_workflow_or_parent_is_killed(small_study, tmp_path, how):
    out = tmp_path / "out"
    log, status = tmp_path / "train.log", tmp_path / "status"
    command = " ".join(_pretrain(small_study, out, "--epochs", "1000"))
    parent = [sys.executable, "-c", WORKFLOW, command, str(log), str(status)]
    if how == "workflow":
        parent.append("bash")
    else:  # the watched PID (this test) lives on: only PR_SET_PDEATHSIG can stop it
        parent += ["direct", str(os.getpid())]
    workflow = subprocess.Popen(parent)
    latest = out / "checkpoints" / "latest.pt"
    try:
        _wait_for(lambda: _mid_training(latest), what="latest.pt")
        trainer = json.loads((out / LOCK_NAME).read_text())["pid"]
        workflow.send_signal(signal.SIGKILL)
        workflow.wait(timeout=30)
        killed = time.monotonic()
        _wait_for(lambda: process_start(trainer) is None, timeout=60, what="the stop")
        stopped = time.monotonic() - killed
    finally:
        if workflow.poll() is None:
            workflow.kill()
        if "trainer" in locals() and process_start(trainer) is not None:
            os.kill(trainer, signal.SIGKILL)
    text = log.read_text()
    assert stopped < 30, text[-2000:]
    reason = f"its workflow, pid {workflow.pid}, is gone" if how == "workflow" else "SIGTERM"
    assert "preempted: SIGTERM" in text and reason in text, text[-2000:]
    assert "rerun to resume" in text
    if how == "workflow":  # the exit status its shell saw: 75 (to be rerun), not success
        _wait_for(status.exists, timeout=10, what="the shell's status")
        assert status.read_text().strip() == "75"
    assert load_checkpoint(latest)["epoch"] >= 1
    assert not (out / "encoder.pt").exists()
    assert not (out / LOCK_NAME).exists()  # a clean stop gives the lock back


# --------------------------------------------------------------------------- the workflow


@pytest.mark.workflow
def test_a_second_snakemake_on_one_work_dir_is_refused_even_after_unlock(tmp_path):
    repo = copy_checkout(tmp_path / "repo")
    work = tmp_path / "work"
    options = ["--profile", "profiles/local", "--configfile", "config/test.yaml"]
    options += ["--config", f"workdir={work}"]  # last: --config takes the words after it
    target = str(work / "data/demo/table.biom")  # `aam stage`: seconds

    def snakemake(*extra: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "snakemake", *extra, *options]
        return subprocess.run(command, cwd=repo, capture_output=True, text=True)

    other = lock_directories([work], "snakemake", "running this workflow")  # another one runs
    try:
        assert snakemake("--unlock").returncode == 0  # removes only .snakemake/locks
        assert snakemake(target, "--dry-run").returncode == 0  # dry runs are not blocked
        assert snakemake("--lint").returncode == 0
        refused = snakemake(target)
        assert refused.returncode != 0
        line = (
            f"{work}: another snakemake (pid {os.getpid()} on host {socket.gethostname()}, since "
        )
        assert line in refused.stderr, refused.stderr[-2000:]
        assert "is running this workflow; wait for it or stop it (scancel/kill)" in refused.stderr
        assert not (work / "data").exists()  # no job ran
    finally:
        other.release()
    done = snakemake(target)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (work / "data/demo/table.biom").is_file()
    assert not (work / LOCK_NAME).exists()  # given back at the end
