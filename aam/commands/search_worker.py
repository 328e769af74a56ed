"""`aam search-worker`: one worker of a run's hyperparameter search. It takes trials of the
shared Optuna study (``aam.analysis.search``) until the budget is used; a trial scores one
point of the space on each scoring fold: `aam pretrain` (where pretraining is chosen),
`aam finetune` and `aam predict` of the fold's held-out samples, run in this process with
the flags the workflow's rules would pass, and the fold's score beside the training median's.

A fold's score is the model's metric, except that a near-constant model (its predictions'
SD below ``aam.analysis.spread.NEAR_CONSTANT`` of the target's on the fold) scores no better
than the training median: a collapsed model can never win the search."""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from aam.analysis.search import Worker, ask_within_budget, give_back, open_study, suggest
from aam.analysis.spread import prediction_spread
from aam.commands import finetune as finetune_command
from aam.commands import predict as predict_command
from aam.commands import pretrain as pretrain_command
from aam.commands.common import InputErrorParser
from aam.data.metadata import metadata_column
from aam.data.split import read_split
from aam.errors import InputError, NonFiniteError
from aam.options import OptionError, add_options, check_options, from_args, option
from aam.runtime.atomic import own_output_set, write_json
from aam.training.metrics import regression_metrics
from aam.workflow.config import cli_flags
from aam.workflow.search_config import MINIMIZED, PRETRAIN_KEY

log = logging.getLogger(__name__)


@dataclass
class SearchWorkerOptions:
    """The options of `aam search-worker`."""

    table: Path = option(None, "BIOM table of the run", required=True)
    metadata: Path = option(None, "metadata TSV (the target)", required=True)
    tree: Path = option(None, "newick tree of the table", required=True)
    split: Path = option(None, "the run's split: no fold may hold its test", required=True)
    folds: list[Path] = option(None, "the scoring folds' split files", required=True)
    search_dir: Path = option(None, "the search's journal, trials, workers", required=True)
    spec: str = option(
        None, "the search as JSON (the workflow's Flags.search_worker)", required=True
    )
    worker: int = option(1, "this worker's number (1..)", minimum=1)
    threads: int = option(1, "CPU threads of each command")
    output: Path = option(None, "the worker's record (JSON)", required=True)

    def __post_init__(self) -> None:
        check_options(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam search-worker`."""
    add_options(parser, SearchWorkerOptions)


def run(args: argparse.Namespace) -> None:
    """Take trials until the search's budget is used; write OUTPUT (the trials it ran)."""
    opts = from_args(SearchWorkerOptions, args)
    spec = json.loads(opts.spec)
    check_folds(opts.split, opts.folds)
    name = spec["studies"]["aam"]
    study = open_study(opts.search_dir, name, spec["direction"], spec["seed"] + opts.worker)
    worker = Worker(opts.search_dir, f"worker{opts.worker}")
    trials_dir = opts.search_dir / "trials" / name
    for sig in (signal.SIGTERM, signal.SIGUSR1):  # SLURM's walltime or preemption: stop, retry
        signal.signal(sig, _stop)
    ran: list[int] = []
    with worker.alive():
        while True:
            trial = ask_within_budget(study, spec["trials"], worker, opts.search_dir, trials_dir)
            if trial is None:
                break
            ran.append(trial.number)
            _run_trial(study, trial, spec, opts, trials_dir / str(trial.number))
    log.info("%s: budget of %d trials used; this worker ran %s", name, spec["trials"], ran)
    write_json(opts.output, {"study": name, "worker": worker.name, "trials": ran})


def _stop(signum: int, frame: object) -> None:
    """Between trainings, SLURM's signal stops the worker (exit 75): its trial is asked again
    (during one, the trainer saves its checkpoint and exits 75 the same way)."""
    raise SystemExit(75)


def check_folds(split: Path, folds: list[Path]) -> None:
    """InputError unless every fold's samples are train or val samples of the run's
    ``split`` (no trial may read a test sample)."""
    test = set(read_split(split).pipe(lambda s: s[s == "test"]).index)
    for path in folds:
        fold = read_split(path)
        used = set(fold[fold != "unused"].index)
        leaked = sorted(used & test)
        if leaked:
            raise InputError(
                f"{path}: {len(leaked)} test sample(s) of {split} in a scoring fold (e.g. "
                f"{leaked[0]}); draw the folds with `aam split --from-file {split} --folds K`"
            )


def _run_trial(study, trial, spec: dict[str, Any], opts: SearchWorkerOptions, where: Path) -> None:
    """Score ``trial`` and tell the study: complete, pruned, or failed by its values (the
    error line kept); any other error fails it and stops the worker."""
    import optuna

    started = time.monotonic()
    try:
        value = _objective(trial, spec, opts, where)
    except optuna.TrialPruned:
        trial.set_user_attr("seconds", round(time.monotonic() - started, 1))
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        log.info("trial %d pruned", trial.number)
    except (InputError, OptionError, NonFiniteError, _out_of_memory()) as err:
        trial.set_user_attr("error", " ".join(str(err).split())[:300])
        trial.set_user_attr("seconds", round(time.monotonic() - started, 1))
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        log.warning("trial %d failed: %s", trial.number, trial.user_attrs["error"])
    except (SystemExit, KeyboardInterrupt):  # SLURM's signal (a trainer saw it), Ctrl-C
        give_back(study, trial._trial_id, trial.number, dict(trial.params))
        log.warning("trial %d stopped with the worker; its values are asked again", trial.number)
        raise
    except BaseException as err:
        trial.set_user_attr("error", f"{type(err).__name__}: {err}"[:300])
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        raise
    else:
        trial.set_user_attr("seconds", round(time.monotonic() - started, 1))
        study.tell(trial, value)
        log.info("trial %d: %s %.4g", trial.number, spec["metric"], value)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _out_of_memory() -> type[BaseException]:
    """torch's out-of-memory error: a trial whose values do not fit the device."""
    import torch

    return torch.OutOfMemoryError


def _objective(trial, spec: dict[str, Any], opts: SearchWorkerOptions, where: Path) -> float:
    """The mean over the folds of the trial's fold scores, reported after each fold (the
    pruner may stop the trial there)."""
    values = suggest(trial, spec["space"])
    default = "pretrained" if spec["pretrain"] is not None else "none"
    pretrained = values.get(PRETRAIN_KEY, default) == "pretrained"
    options = {
        stage: _overlay(spec[stage] or {}, values, stage) for stage in ("pretrain", "finetune")
    }
    scores, folds = [], []
    for k, fold in enumerate(opts.folds, start=1):
        fold_dir = where / f"fold{k}"
        result = _score_fold(fold, fold_dir, options, pretrained, spec, opts)
        folds.append(result)
        scores.append(result["score"])
        trial.set_user_attr("folds", folds)
        trial.report(float(np.mean(scores)), k)
        if k < len(opts.folds) and trial.should_prune():
            import optuna

            raise optuna.TrialPruned()
    return float(np.mean(scores))


def _overlay(base: dict[str, Any], values: dict[str, Any], stage: str) -> dict[str, Any]:
    """``base`` (a command's flags as config values) with the trial's model options and its
    ``stage`` options laid over."""
    out = dict(base)
    for key, value in values.items():
        section, _, option = key.partition(".")
        if option and section in ("model", stage):
            out[option] = value
    return out


def _score_fold(
    fold: Path,
    fold_dir: Path,
    options: dict[str, dict[str, Any]],
    pretrained: bool,
    spec: dict[str, Any],
    opts: SearchWorkerOptions,
) -> dict[str, Any]:
    """Train on ``fold``'s train (and val) samples, predict its test samples; the fold's
    score, the model's and the training median's metric, and both spreads."""
    common = ["--table", str(opts.table), "--split", str(fold), "--threads", str(opts.threads)]
    encoder: list[str] = []
    if pretrained:
        out = fold_dir / "pretrain"
        flags = ["--tree", str(opts.tree), "--no-progress", "--output-dir", str(out)]
        _run(pretrain_command, "pretrain", [*common, *flags], options["pretrain"])
        encoder = ["--pretrained-encoder", str(out / "encoder.pt")]
    finetuned = fold_dir / "finetune"
    flags = ["--metadata", str(opts.metadata), "--tree", str(opts.tree), "--no-progress"]
    _run(
        finetune_command,
        "finetune",
        [*common, *flags, "--output-dir", str(finetuned), *encoder],
        options["finetune"],
    )
    predicted = fold_dir / "predict"
    _run(
        predict_command,
        "predict",
        [
            *common,
            *["--metadata", str(opts.metadata), "--model", str(finetuned / "model.pt")],
            *["--subset", "test", "--output-dir", str(predicted)],
        ],
        {"device": options["finetune"].get("device")},
    )
    return fold_score(predicted, fold, opts.metadata, spec)


def _run(module: ModuleType, name: str, argv: list[str], options: dict[str, Any]) -> None:
    """`aam NAME` of ``argv`` and the config values ``options`` in this process (its outputs
    published at its end, as the CLI would: ``own_output_set``)."""
    parser = InputErrorParser(prog=f"aam {name}")
    module.add_arguments(parser)
    args = parser.parse_args([*argv, *cli_split(options)])
    with own_output_set():
        module.run(args)


def cli_split(options: dict[str, Any]) -> list[str]:
    """``options`` as argv words (``cli_flags``, unquoted)."""
    import shlex

    return shlex.split(cli_flags(options))


def fold_score(predicted: Path, fold: Path, metadata: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """A fold's record: the model's metric (metrics.json), and for a regression target the
    training median's metric on the same samples, both predictions' spread beside the
    target's, and ``score``: the model's metric, or the median's where the model is
    near-constant and not better than it."""
    metric = spec["metric"]
    metrics = json.loads((predicted / "metrics.json").read_text())
    model = metrics["model"].get(metric)
    if model is None or not math.isfinite(model):
        raise NonFiniteError(f"{predicted / 'metrics.json'}: model {metric} is {model}")
    record: dict[str, Any] = {"model": model, "score": model, "n": metrics["n"]}
    if spec["classifier"]:
        return record
    table = pd.read_csv(predicted / "predictions.tsv", sep="\t")
    truth = table["true"].to_numpy(dtype=float)
    split = read_split(fold)
    targets = pd.to_numeric(
        metadata_column(metadata, spec["target"], "--target-column"), errors="coerce"
    )
    median = float(np.nanmedian(targets.reindex(split[split == "train"].index)))
    constant = regression_metrics(np.full(len(truth), median), truth)[metric]
    spread = prediction_spread({"model": table["prediction"].to_numpy(dtype=float)}, truth)
    collapsed = bool(spread["models"]["model"]["near_constant"])
    worse = max if metric in MINIMIZED else min
    record.update(
        median=constant,
        prediction_sd=spread["models"]["model"]["prediction_sd"],
        target_sd=spread["target_sd"],
        near_constant=collapsed,
        score=worse(model, constant) if collapsed else model,
    )
    return record
