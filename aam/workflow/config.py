"""Config expansion: cross-validation folds and sweep points as runs, config values as shell
words, and schema errors as one line (standard library only: the Snakefile imports this on a
login node).

Everything that turns config values into shell words goes through ``cli_flags``, so nothing
from a config file or a metadata header can execute: values are quoted with ``shlex.quote``.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import shlex
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from aam.options import option_fields, value_type
from aam.training.config import RuntimeConfig, TrainConfig
from aam.workflow.suggest import did_you_mean

FROM_SCRATCH = "none"  # a run's ``pretrain:`` that fine-tunes from a random initialisation
DEFAULT_SEED = TrainConfig.__dataclass_fields__["seed"].default


NEW_STUDY_VAL_FRACTION = 0.2  # a new-study point's labelled samples that choose its epoch


def from_scratch(spec: Mapping[str, Any]) -> bool:
    """Whether a run fine-tunes from a random initialisation (``pretrain: none``)."""
    return spec.get("pretrain") == FROM_SCRATCH


# Options whose unset value (None) is a choice of its own, so ``false`` is ``--no-<flag>``.
NEGATABLE = frozenset(
    f.name
    for f in option_fields(RuntimeConfig)
    if value_type(RuntimeConfig, f.name) == (bool, True)
)


def cli_flags(options: Mapping[str, Any]) -> str:
    """Shell-quoted CLI flags from a config mapping, sorted by name.

    ``{"sizes": [4, 8], "batch_size": 8, "freeze_base": True, "x": None}`` ->
    ``--batch-size 8 --freeze-base --sizes 4 8``. ``None`` drops the flag, so does ``False``
    but for the ``NEGATABLE`` options (``{"progress": False}`` -> ``--no-progress``); a list gives
    one quoted word per item. Sorted: the same options give the same string (a rule's params,
    which Snakemake compares with the last run's) whatever the order of the config's keys.
    """
    words: list[str] = []
    for key, value in sorted(options.items()):
        flag = "--" + key.replace("_", "-")
        if value is True:
            words.append(flag)
        elif value is False and key in NEGATABLE:
            words.append("--no-" + flag[2:])
        elif value is False or value is None:
            continue
        elif isinstance(value, list | tuple):
            words += [flag, *(str(item) for item in value)]
        else:
            words += [flag, str(value)]
    return shlex.join(words)


def config_error_line(error: BaseException) -> str:
    """One line for a config that fails the JSON schema: where, what, and the field's purpose.

    ``error`` is Snakemake's ``WorkflowError`` from ``snakemake.utils.validate``, raised while
    handling the jsonschema ``ValidationError`` (its ``__context__``), or that error itself.
    """
    candidates = (error, error.__cause__, error.__context__, *error.args)
    cause = next((c for c in candidates if hasattr(c, "json_path")), None)
    if cause is None:
        return " ".join(str(error).split())
    while cause.validator == "anyOf" and cause.context:  # the branch the value came closest to
        cause = max(cause.context, key=lambda sub: len(sub.absolute_path))
    return _schema_line(cause, cause.json_path.removeprefix("$").lstrip(".") or "(top level)")


def _schema_line(cause: Any, where: str) -> str:
    """One line for a jsonschema ValidationError ``cause`` of the config value at ``where``."""
    described = cause.schema.get("description") if isinstance(cause.schema, dict) else None
    hint = f" ({' '.join(described.split())})" if described else ""
    message = " ".join(cause.message.split())
    if cause.validator == "additionalProperties" and isinstance(cause.instance, dict):
        known = list(cause.schema.get("properties", {}))
        key = sorted(k for k in cause.instance if k not in known)[0]
        where = f"{where}.{key}" if where != "(top level)" else key
        message = "unknown key" + did_you_mean(key, known)
    elif cause.validator == "maxLength":  # jsonschema's message quotes the whole string
        message = f"{len(cause.instance):,} characters; at most {cause.validator_value} here"
    elif cause.validator == "not" and isinstance(cause.instance, float):
        message = f"{cause.instance} is not a finite number"  # the schema's NaN guard
    return f"config {where}: {message}{hint}; fix it in the config file or --config"


def run_option_names(schema_file: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Each run section's option names, from the generated run-options schema (its sections
    are the objects of ``$defs``; the others are single values, e.g. ``device``)."""
    schema = json.loads(Path(schema_file).read_text())
    defs = schema["$defs"].items()
    return {section: list(spec["properties"]) for section, spec in defs if "properties" in spec}


def check_sweep_values(
    runs: Mapping[str, Mapping[str, Any]], schema_file: str | os.PathLike[str]
) -> None:
    """Every value of every run's ``sweep:`` grid fits its option's schema (the generated
    run-options schema, which the config schema's run sections use); ValueError (one line)
    naming the grid key. Unknown keys are left to ``expand_sweeps``."""
    from jsonschema import Draft202012Validator  # Snakemake's dependency: no torch

    sections = json.loads(Path(schema_file).read_text())["$defs"]
    for name, spec in runs.items():
        for key, values in (spec.get("sweep") or {}).items():
            section, _, option = key.partition(".")
            schema = sections.get(section, {}).get("properties", {}).get(option)
            for value in values if schema else ():
                error = next(Draft202012Validator(schema).iter_errors(value), None)
                if error is not None:
                    raise ValueError(_schema_line(error, f"runs.{name}.sweep.{key}"))


def expand_learning_curves(
    runs: Mapping[str, Mapping[str, Any]], default_seed: int
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Runs with each fraction of a run's ``learning_curve:`` (``{fractions, seed, pretrain}``)
    as a run of its own, ``<run>_lc<k>`` (k from 1, fractions ascending), beside the run itself
    (the whole training set), and the learning curves: ``{run: {"dataset", "seed", "pretrain",
    "points": {member: fraction}}}`` (``seed`` defaults to ``default_seed``, ``pretrain`` to
    ``per_point``).

    ``per_point`` (strict): every member pretrains on its own training samples. ``shared``: the
    members fine-tune from the run's encoder (``encoder_from``). Members predict no other
    dataset. ValueError (one line) for a run that also has a sweep, a cv or an
    ``encoder_from``, or a member name that is already a run."""
    expanded: dict[str, dict[str, Any]] = {}
    curves: dict[str, dict[str, Any]] = {}
    for name, spec in runs.items():
        curve = spec.get("learning_curve")
        base = {key: value for key, value in spec.items() if key != "learning_curve"}
        expanded[name] = copy.deepcopy(base)
        if not curve:
            continue
        for clash in ("sweep", "cv", "encoder_from"):
            if spec.get(clash):
                raise ValueError(
                    f"config runs.{name}.{clash}: not with learning_curve; give the learning "
                    f"curve a run of its own (learning_curve.pretrain chooses the encoder)"
                )
        scratch = from_scratch(spec)
        pretrain = curve.get("pretrain", FROM_SCRATCH if scratch else "per_point")
        if scratch != (pretrain == FROM_SCRATCH):
            raise ValueError(
                f"config runs.{name}.learning_curve.pretrain: {pretrain} with the run's "
                f"pretrain {'none' if scratch else 'section'}; a curve's points and the run "
                "itself start alike: give both pretrain: none, or neither"
            )
        curves[name] = {
            "dataset": spec["dataset"],
            "seed": curve.get("seed", default_seed),
            "pretrain": pretrain,
            "fractions": sorted(float(f) for f in curve["fractions"]),
            "points": {},
        }
        for k, fraction in enumerate(sorted(curve["fractions"]), start=1):
            member = f"{name}_lc{k}"
            if member in runs:
                raise ValueError(
                    f"config runs.{name}.learning_curve: member {member} is already a run; "
                    "rename it"
                )
            run = {**copy.deepcopy(base), "predict_on": []}
            if curves[name]["pretrain"] == "shared":
                run["encoder_from"] = name
            expanded[member] = run
            curves[name]["points"][member] = float(fraction)
    return expanded, curves


def expand_new_studies(
    runs: Mapping[str, Mapping[str, Any]], default_seed: int
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Runs with each size and seed of a run's ``new_study:`` as a run of its own,
    ``<run>_n<size>_s<seed>``, and the new studies: ``{run: {"dataset", "sizes", "seeds",
    "pool", "pool_seed", "val_fraction", "group_column", "scratch", "points": {member: (size,
    seed)}}}`` (sizes and seeds ascending; ``pool`` defaults to the largest size, ``pool_seed``
    to ``default_seed``, ``val_fraction`` to NEW_STUDY_VAL_FRACTION). A member fine-tunes with
    its seed from the run's encoder (``encoder_from``), or from a random initialisation where
    the run has ``pretrain: none``.
    ValueError (one line) for a run that also has a sweep, a cv, a learning curve or an
    ``encoder_from``, a pool below the largest size, or a member name that is already a run."""
    expanded: dict[str, dict[str, Any]] = {}
    studies: dict[str, dict[str, Any]] = {}
    for name, spec in runs.items():
        study = spec.get("new_study")
        base = {key: value for key, value in spec.items() if key != "new_study"}
        expanded[name] = copy.deepcopy(base)
        if not study:
            continue
        for clash in ("sweep", "cv", "learning_curve", "encoder_from"):
            if spec.get(clash):
                raise ValueError(
                    f"config runs.{name}.{clash}: not with new_study; give the new study a run "
                    "of its own"
                )
        sizes, seeds = sorted(study["sizes"]), sorted(study["seeds"])
        pool = study.get("pool", sizes[-1])
        if pool < sizes[-1]:
            raise ValueError(
                f"config runs.{name}.new_study.pool: {pool} is below the largest size "
                f"{sizes[-1]}; raise it or drop the size"
            )
        scratch = from_scratch(spec)
        studies[name] = {
            "dataset": spec["dataset"],
            "sizes": sizes,
            "seeds": seeds,
            "pool": pool,
            "pool_seed": study.get("pool_seed", default_seed),
            "val_fraction": study.get("val_fraction", NEW_STUDY_VAL_FRACTION),
            "group_column": study.get("group_column"),
            "scratch": scratch,
            "points": {},
        }
        for size in sizes:
            for seed in seeds:
                member = f"{name}_n{size}_s{seed}"
                if member in runs:
                    raise ValueError(
                        f"config runs.{name}.new_study: member {member} is already a run; rename it"
                    )
                run = {**copy.deepcopy(base), "predict_on": []}
                run["finetune"] = {**run.get("finetune", {}), "seed": seed}
                if not scratch:
                    run["encoder_from"] = name
                expanded[member] = run
                studies[name]["points"][member] = (size, seed)
    return expanded, studies


def expand_sweeps(
    runs: Mapping[str, Mapping[str, Any]], options: Mapping[str, Collection[str]]
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, dict[str, Any]]]]:
    """Runs with every point of a run's ``sweep:`` grid (``"section.option": [values]``) as a run
    of its own, ``<run>_s<k>`` (k from 1; the last key varies fastest), and the sweeps:
    ``{run: {member: {"section.option": value, ...}}}``. Members whose ``model`` and
    ``pretrain`` sections are equal share one pretrained encoder (``encoder_from`` the first
    such member), so a grid over fine-tuning options pretrains once. ``options`` holds each
    section's option names; ValueError (one line) for a key that is not one, or a member name
    that is already a run."""
    expanded: dict[str, dict[str, Any]] = {}
    sweeps: dict[str, dict[str, dict[str, Any]]] = {}
    for name, spec in runs.items():
        grid = spec.get("sweep") or {}
        base = {key: value for key, value in spec.items() if key != "sweep"}
        if not grid:
            expanded[name] = copy.deepcopy(base)
            continue
        keys, encoders = list(grid), {}
        for key in keys:
            section, _, option = key.partition(".")
            if option not in options.get(section, ()):
                known = [f"{sec}.{opt}" for sec, names in options.items() for opt in names]
                hint = did_you_mean(key, known)
                raise ValueError(
                    f"config runs.{name}.sweep.{key}: not a run option{hint}; use "
                    "<section>.<option> with a section of model, pretrain, finetune"
                )
        sweeps[name] = {}
        for k, values in enumerate(itertools.product(*grid.values()), start=1):
            member, run = f"{name}_s{k}", copy.deepcopy(base)
            if member in runs:
                raise ValueError(f"runs.{name}.sweep: member {member} is already a run; rename it")
            for key, value in zip(keys, values, strict=True):
                section, option = key.split(".", 1)
                if section == "pretrain" and from_scratch(run):
                    raise ValueError(
                        f"config runs.{name}.sweep.{key}: the run has pretrain: none; sweep "
                        "model or finetune options"
                    )
                run.setdefault(section, {})[option] = value
            if not run.get("encoder_from") and not from_scratch(run):
                shape = json.dumps([run.get("model"), run.get("pretrain")], sort_keys=True)
                first = encoders.setdefault(shape, member)
                run["encoder_from"] = first if first != member else None
            expanded[member] = run
            sweeps[name][member] = dict(zip(keys, values, strict=True))
    return expanded, sweeps


def expand_cv(
    runs: Mapping[str, Mapping[str, Any]], default_seed: int
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Runs with each fold of a run's ``cv:`` (``{folds, seed, pretrain}``) as a run of its own,
    ``<run>_f<k>`` (k from 1), and the cross-validated runs: ``{run: {"dataset", "folds",
    "seed", "pretrain", "members": {member: k}}}`` (``seed`` defaults to ``default_seed``,
    ``pretrain`` to ``per_fold``).

    ``pretrain: per_fold`` (strict): every member pretrains on its own fold's training samples.
    ``shared``: ``<run>_f1`` pretrains once on every sample of the table (no split; no targets
    are used) and the others reuse its encoder (``encoder_from``). ValueError (one line) for a
    run that also has a sweep, an ``encoder_from`` or a ``predict_on``, or a member name that is
    already a run.
    """
    expanded: dict[str, dict[str, Any]] = {}
    cv: dict[str, dict[str, Any]] = {}
    for name, spec in runs.items():
        plan = spec.get("cv")
        base = {key: value for key, value in spec.items() if key != "cv"}
        if not plan:
            expanded[name] = copy.deepcopy(base)
            continue
        if spec.get("sweep"):
            raise ValueError(
                f"config runs.{name}.sweep: not with cv; cross-validate one setting per run"
            )
        if spec.get("encoder_from"):
            raise ValueError(
                f"config runs.{name}.encoder_from: not with cv; remove it (cv.pretrain chooses "
                "the encoder: per_fold or shared)"
            )
        if spec.get("predict_on"):
            raise ValueError(
                f"config runs.{name}.predict_on: not with cv; predict other datasets from a run "
                "without cv (a fold's model saw only part of the samples)"
            )
        folds = int(plan["folds"])
        cv[name] = {
            "dataset": spec["dataset"],
            "folds": folds,
            "seed": plan.get("seed", default_seed),
            "pretrain": plan.get("pretrain", "per_fold"),
            "members": {},
        }
        for k in range(1, folds + 1):
            member = f"{name}_f{k}"
            if member in runs:
                raise ValueError(
                    f"config runs.{name}.cv: member {member} is already a run; rename it"
                )
            run = copy.deepcopy(base)
            if cv[name]["pretrain"] == "shared" and k > 1 and not from_scratch(base):
                run["encoder_from"] = f"{name}_f1"
            expanded[member] = run
            cv[name]["members"][member] = k
    return expanded, cv


def expand_ensembles(
    runs: Mapping[str, Mapping[str, Any]],
) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """Runs with each seed of a run's ``ensemble:`` (``{seeds}``) as a run of its own,
    ``<run>_e<k>`` (k from 1): the run's model and training, fine-tuning seed k, from the run's
    encoder (none for a run with ``pretrain: none``), predicting no other dataset; and the
    ensembles, ``{run: [run, its members]}``. ValueError (one line) for a run that also has a
    sweep, a cv or a learning curve, a seed equal to the run's own, or a member name that is
    already a run."""
    expanded: dict[str, dict[str, Any]] = {}
    ensembles: dict[str, list[str]] = {}
    for name, spec in runs.items():
        plan = spec.get("ensemble")
        base = {key: value for key, value in spec.items() if key != "ensemble"}
        expanded[name] = copy.deepcopy(base)
        if not plan:
            continue
        for clash in ("sweep", "cv", "learning_curve"):
            if spec.get(clash):
                raise ValueError(
                    f"config runs.{name}.{clash}: not with ensemble; give the ensemble a run of "
                    "its own"
                )
        own = (spec.get("finetune") or {}).get("seed", DEFAULT_SEED)
        if own in plan["seeds"]:
            raise ValueError(
                f"config runs.{name}.ensemble.seeds: {own} is the run's own fine-tuning seed "
                "(the run is the ensemble's first member); list other seeds"
            )
        ensembles[name] = [name]
        for k, seed in enumerate(plan["seeds"], start=1):
            member = f"{name}_e{k}"
            if member in runs:
                raise ValueError(
                    f"config runs.{name}.ensemble: member {member} is already a run; rename it"
                )
            run = {**copy.deepcopy(base), "predict_on": []}
            run["finetune"] = {**(run.get("finetune") or {}), "seed": seed}
            if not from_scratch(run):
                run["encoder_from"] = run.get("encoder_from") or name
            expanded[member] = run
            ensembles[name].append(member)
    return expanded, ensembles
