"""A search's Optuna study, shared by its workers through a journal file in the work directory
(Optuna's JournalStorage: appends under a file lock, fit for NFS/VAST where SQLite is not).

Each worker asks for a trial under a lock of its own (``ask_within_budget``), so the workers
together finish exactly the budget: a trial counts once it is complete, pruned or failed by its
values (a non-finite loss, an option the model refuses); a trial whose worker died (killed,
preempted, out of memory) is failed as ``killed``, does not count, and is asked again with the
same values (``fail_stale``). A worker is alive while its heartbeat file is fresh (or, on this
host, while its process exists).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pandas as pd
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock
from optuna.trial import FrozenTrial, Trial, TrialState

log = logging.getLogger(__name__)
JOURNAL = "journal.log"
HEARTBEAT_SECONDS = 30.0  # how often a worker touches its heartbeat file
STALE_AFTER = 600.0  # a heartbeat older than this: the worker is gone (other hosts)
LOCK_GRACE = 300  # seconds after which a held ask-lock is a dead worker's (Optuna's lock)
PRUNE_AFTER = 5  # completed trials before the median pruner may stop a trial after a fold


def storage(directory: Path) -> JournalStorage:
    """The journal storage of the search in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = str(directory / JOURNAL)
    return JournalStorage(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path + ".lock")))


def open_study(directory: Path, name: str, direction: str, seed: int) -> optuna.Study:
    """Study ``name`` in ``directory``'s journal (created if new): TPE seeded by ``seed``, the
    median pruner after PRUNE_AFTER trials, from the first fold on."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(
        study_name=name,
        storage=storage(directory),
        direction=direction,
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=PRUNE_AFTER, n_warmup_steps=0),
        load_if_exists=True,
    )


def load_study(directory: Path, name: str) -> optuna.Study:
    """Study ``name`` of ``directory``'s journal, for reading."""
    return optuna.load_study(study_name=name, storage=storage(directory))


def counted(trial: FrozenTrial) -> bool:
    """Whether ``trial`` uses the budget: complete, pruned, or failed by its values."""
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
        return True
    return trial.state == TrialState.FAIL and not trial.user_attrs.get("killed")


class Worker:
    """This process as a search worker: its name, and its heartbeat file (touched every
    HEARTBEAT_SECONDS by a thread while the worker runs)."""

    def __init__(self, directory: Path, label: str) -> None:
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.name = f"{label}@{self.host}:{self.pid}"
        self.heartbeat = directory / "alive" / f"{self.host}-{self.pid}"

    @contextlib.contextmanager
    def alive(self) -> Iterator[None]:
        """Keep the heartbeat file fresh while the block runs; remove it after."""
        self.heartbeat.parent.mkdir(parents=True, exist_ok=True)
        self.heartbeat.touch()
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(HEARTBEAT_SECONDS):
                with contextlib.suppress(OSError):
                    self.heartbeat.touch()

        thread = threading.Thread(target=beat, name="search-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.heartbeat.unlink(missing_ok=True)

    def claim(self, trial: Trial) -> None:
        """Mark ``trial`` as this worker's."""
        trial.set_user_attr("worker", self.name)
        trial.set_user_attr("host", self.host)
        trial.set_user_attr("pid", self.pid)
        trial.set_user_attr("heartbeat", str(self.heartbeat))


def _alive(trial: FrozenTrial, host: str, now: float) -> bool:
    """Whether the worker of RUNNING ``trial`` still runs: on this host, its process exists
    and its heartbeat file does; elsewhere, its heartbeat is younger than STALE_AFTER."""
    attrs = trial.user_attrs
    if "heartbeat" not in attrs:  # its worker died between asking and claiming it
        return False
    heartbeat = Path(attrs["heartbeat"])
    if attrs.get("host") == host:
        try:
            os.kill(int(attrs["pid"]), 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process: alive
            pass
        return heartbeat.exists()
    with contextlib.suppress(OSError):
        return now - heartbeat.stat().st_mtime < STALE_AFTER
    return False


def fail_stale(study: optuna.Study, trials_dir: Path) -> list[int]:
    """Fail each RUNNING trial of ``study`` whose worker is gone (``killed``: it does not use
    the budget), remove its files under ``trials_dir`` and ask its values again (a WAITING
    trial the next ``ask`` takes). The numbers of the failed trials."""
    host, now, failed = socket.gethostname(), time.time(), []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if _alive(trial, host, now):
            continue
        give_back(study, trial._trial_id, trial.number, dict(trial.params))
        shutil.rmtree(trials_dir / str(trial.number), ignore_errors=True)
        log.warning(
            "trial %d: its worker %s is gone; failed as killed, its values asked again",
            trial.number,
            trial.user_attrs.get("worker", "(unknown)"),
        )
        failed.append(trial.number)
    return failed


def give_back(study: optuna.Study, trial_id: int, number: int, params: dict[str, Any]) -> None:
    """Fail trial ``number`` as ``killed`` (it does not use the budget) and ask its values
    ``params`` again: a WAITING trial the next ``ask`` takes."""
    study._storage.set_trial_user_attr(trial_id, "killed", True)
    study._storage.set_trial_state_values(trial_id, TrialState.FAIL)
    study.enqueue_trial(params, user_attrs={"retry_of": number})


def ask_within_budget(
    study: optuna.Study, budget: int, worker: Worker, directory: Path, trials_dir: Path
) -> Trial | None:
    """The next trial for ``worker``, or None when the budget is used: the counted trials and
    the running ones (of live workers) reach ``budget``. Under the search's ask-lock, so two
    workers never both take the last trial."""
    lock = JournalFileOpenLock(str(directory / "ask.lock"), grace_period=LOCK_GRACE)
    lock.acquire()
    try:
        fail_stale(study, trials_dir)
        trials = study.get_trials(deepcopy=False)
        used = sum(counted(t) or t.state == TrialState.RUNNING for t in trials)
        if used >= budget:
            return None
        trial = study.ask()
        worker.claim(trial)
        return trial
    finally:
        lock.release()


def suggest(trial: Trial, space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The values of ``trial`` for each key of ``space`` (``{low, high, log, integer}`` or
    ``{choices}``; ``aam.workflow.search_config``)."""
    values = {}
    for key, spec in space.items():
        if "choices" in spec:
            values[key] = trial.suggest_categorical(key, spec["choices"])
        elif spec["integer"]:
            values[key] = trial.suggest_int(key, spec["low"], spec["high"], log=spec["log"])
        else:
            values[key] = trial.suggest_float(key, spec["low"], spec["high"], log=spec["log"])
    return values


def trials_table(study: optuna.Study, folds: int) -> pd.DataFrame:
    """Every trial of ``study`` as a row: number, state (``killed`` for a dead worker's),
    score, each fold's score, the training median's mean score, the near-constant folds,
    seconds, worker, error, then its values (one column per searched key)."""
    rows = []
    for trial in study.get_trials(deepcopy=False):
        attrs = trial.user_attrs
        fold_records = attrs.get("folds", [])
        state = "killed" if attrs.get("killed") else trial.state.name.lower()
        medians = [f["median"] for f in fold_records if "median" in f]
        row = {
            "number": trial.number,
            "state": state,
            "score": trial.value if trial.state == TrialState.COMPLETE else None,
            **{
                f"fold{k}": (fold_records[k - 1]["score"] if k <= len(fold_records) else None)
                for k in range(1, folds + 1)
            },
            "median_baseline": float(np.mean(medians)) if medians else None,
            "near_constant_folds": sum(bool(f.get("near_constant")) for f in fold_records),
            "seconds": attrs.get("seconds"),
            "worker": attrs.get("worker"),
            "retry_of": attrs.get("retry_of"),
            "error": attrs.get("error"),
            **{f"value.{key}": value for key, value in trial.params.items()},
        }
        rows.append(row)
    return pd.DataFrame(rows)


def best_summary(study: optuna.Study, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The search at a glance (search.json): trials by state, the best trial's values, its
    mean score and its folds' (spread: SD over folds), the training median's mean score on the
    same folds and whether the best beats it, its near-constant folds. InputError (one line)
    when no trial completed."""
    from aam.errors import InputError

    trials = study.get_trials(deepcopy=False)
    states: dict[str, int] = {}
    for trial in trials:
        name = "killed" if trial.user_attrs.get("killed") else trial.state.name.lower()
        states[name] = states.get(name, 0) + 1
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if not complete:
        errors = [t.user_attrs["error"] for t in trials if t.user_attrs.get("error")]
        why = f"; the first error: {errors[0]}" if errors else ""
        raise InputError(
            f"search {study.study_name}: no trial completed ({states}){why}; fix the space or "
            "the run's options"
        )
    best = study.best_trial
    folds = best.user_attrs.get("folds", [])
    scores = [f["score"] for f in folds]
    medians = [f["median"] for f in folds if "median" in f]
    median = float(np.mean(medians)) if medians else None
    better = (lambda a, b: a < b) if spec["direction"] == "minimize" else (lambda a, b: a > b)
    seconds = sum(t.user_attrs.get("seconds") or 0 for t in trials)
    return {
        "study": study.study_name,
        "metric": spec["metric"],
        "direction": spec["direction"],
        "budget": spec["trials"],
        "trials": states,
        "best": {
            "number": best.number,
            "score": best.value,
            "folds": scores,
            "fold_sd": float(np.std(scores, ddof=1)) if len(scores) > 1 else None,
            "values": dict(best.params),
            "near_constant_folds": sum(bool(f.get("near_constant")) for f in folds),
        },
        "median_baseline": median,
        "beats_median": None if median is None else bool(better(best.value, median)),
        "trial_seconds": round(seconds, 1),
    }


def chosen_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """A trial's values as an options file (``aam.workflow.options_file``): ``section ->
    option -> value``; ``pretrain: none`` where it chose no pretraining (its pretraining
    options then dropped)."""
    chosen: dict[str, Any] = {}
    for key, value in sorted(values.items()):
        section, _, option = key.partition(".")
        if option:
            chosen.setdefault(section, {})[option] = value
    if values.get("pretrain") == "none":
        chosen["pretrain"] = "none"
    return chosen


def plot_search(
    table: pd.DataFrame,
    summary: Mapping[str, Any],
    importances: Mapping[str, float],
    path: Path,
    title: str,
) -> None:
    """Two panels: each completed trial's score by trial number with the best so far and the
    training median's score (the line a search must beat), and the values' importances
    (Optuna's fANOVA; empty with fewer than two completed trials)."""
    from aam.runtime.figures import pyplot, save_figure

    plt = pyplot()
    fig, (history, weights) = plt.subplots(1, 2, figsize=(11, 4))
    done = table[table["state"] == "complete"].sort_values("number")
    history.scatter(done["number"], done["score"], s=18, label="completed trial")
    best = done["score"].cummin() if summary["direction"] == "minimize" else done["score"].cummax()
    history.step(done["number"], best, where="post", color="C3", label="best so far")
    pruned = table[table["state"] == "pruned"]
    if len(pruned):
        fold1 = pruned["fold1"].astype(float)
        history.scatter(
            pruned["number"], fold1, s=14, marker="x", color="0.5", label="pruned (fold 1)"
        )
    if summary.get("median_baseline") is not None:
        history.axhline(summary["median_baseline"], color="0.3", ls="--", label="training median")
    history.set_xlabel("trial")
    history.set_ylabel(f"{summary['metric']} (mean over folds)")
    history.set_title(title)
    history.legend(fontsize=8)
    if importances:
        names = list(importances)[::-1]
        weights.barh(names, [importances[n] for n in names], color="C0")
        weights.set_xlabel("importance (fANOVA)")
    else:
        weights.text(0.5, 0.5, "fewer than two completed trials", ha="center", va="center")
        weights.set_axis_off()
    save_figure(fig, path)


def importances(study: optuna.Study) -> dict[str, float]:
    """Optuna's parameter importances of ``study`` (empty with fewer than two completed
    trials or nothing varied)."""
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
    if len(complete) < 2:
        return {}
    try:
        return dict(optuna.importance.get_param_importances(study))
    except (RuntimeError, ValueError, ZeroDivisionError):  # one value only: nothing to weigh
        return {}
