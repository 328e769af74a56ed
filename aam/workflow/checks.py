"""Pre-flight checks of the config alone, at parse time: they read no data file (a path is
only looked up), so every SLURM job's re-parse stays cheap. What needs the data (columns,
labels, sample counts) is checked by its rule check_data job (``aam.workflow.dataset_checks``).
Each raises InputError with one line naming the config field and the fix."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aam.errors import InputError
from aam.options import OptionError
from aam.training.config import CLASSIFIER_METRICS, REGRESSION_METRICS, check_best_metric

Config = Mapping[str, Any]
# What no config string may hold: it reaches rule params, which Snakemake's report.html embeds
# in a script element unescaped (a '<' can close it), TSV headers (a tab or newline splits a
# cell), pages, figures and paths. Column names, units, paths, labels: every string, keys
# included. Besides '<' and '>', every Unicode control, format or line/paragraph separator
# character (categories Cc, Cf, Zl, Zp: C0 and C1 controls, bidi overrides, zero-width ones).
MARKUP = "<>"
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
MAX_STRING = 4096  # characters of one config string (PATH_MAX): a longer one is no name or path


MAX_VALUES = 100_000  # keys, values and items of a config, YAML aliases counted where used
MAX_CONFIG_BYTES = 1 << 20  # of a config file: its data are files it names, not values in it


def check_config_files(paths: Sequence[str | os.PathLike[str]]) -> None:
    """Each config file ``paths`` is at most ``MAX_CONFIG_BYTES``: InputError in one line.
    (Snakemake has read them by then, about 3 s per MB; this stops the plan from walking one.)"""
    for path in paths:
        size = Path(path).stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise InputError(
                f"{path}: {size / (1 << 20):,.1f} MiB; a workflow config holds at most "
                f"{MAX_CONFIG_BYTES >> 20} MiB (data are files it names by path, not values in it)"
                ": check that it is the config"
            )


def check_config_size(config: Any) -> None:
    """``config`` holds at most ``MAX_VALUES`` keys, values and items, each alias counted
    where it is used (nested YAML anchors, a "billion laughs", expand past any budget when
    walked): InputError in one line, found within the budget's own time."""
    count, stack = 0, [config]
    while stack:
        value = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise InputError(
                f"config: more than {MAX_VALUES:,} keys and values (YAML aliases counted where "
                "used); no workflow config is this large: look for nested anchors (&, *) or a "
                "data file given as a config"
            )
        if isinstance(value, Mapping):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)


def unsafe_characters(text: str) -> list[str]:
    """The characters of ``text`` no config string may hold, sorted, each once."""
    return sorted({c for c in text if c in MARKUP or unicodedata.category(c) in UNSAFE_CATEGORIES})


def check_config_strings(value: Any, where: str = "config") -> None:
    """Every string of ``value`` (a config: keys and values, nested) is at most
    ``MAX_STRING`` characters and free of ``unsafe_characters``; InputError naming the first
    key that breaks either."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            check_config_strings(key, f"{where} key {key!r}")
            check_config_strings(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_config_strings(item, f"{where}[{index}]")
    elif isinstance(value, str):
        if len(value) > MAX_STRING:
            raise InputError(
                f"{where}: a string of {len(value):,} characters ({value[:20]!r}...); config "
                f"strings hold at most {MAX_STRING:,}: shorten it"
            )
        bad = unsafe_characters(value)
        if bad:
            raise InputError(
                f"{where}: {value!r} holds {', '.join(map(ascii, bad))}; config strings may not "
                "hold '<', '>' or control characters (Unicode control, format and separator "
                "characters: they reach Snakemake's report page, table headers and figures): "
                "rename it (a metadata column too)"
            )


def check_dataset_paths(name: str, data: Config) -> None:
    """A dataset names one split source at most, and each of its files exists."""
    if data["split_column"] and data["split_file"]:
        raise InputError(f"datasets.{name}: split_column and split_file both set; keep one of them")
    given = "split_column" if data["split_column"] else "split_file" if data["split_file"] else None
    if given and data["split_group_column"]:
        raise InputError(
            f"datasets.{name}: {given} and split_group_column both set; a given split is kept as "
            "it is: keep one of them"
        )
    if data["split_test_group"] is not None and not data["split_group_column"]:
        raise InputError(
            f"datasets.{name}.split_test_group: needs split_group_column, the column of the "
            "groups; set it (e.g. the study or subject column)"
        )
    for label in ("table", "metadata", "sequences", "tree", "split_file"):
        path = data[label]
        if path is not None and not Path(path).is_file():
            raise InputError(f"datasets.{name}.{label}: {path} not found; fix the path in config")


def check_not_target(
    name: str,
    target: str,
    categorical: Sequence[str] = (),
    group_column: str | None = None,
    split_group_column: str | None = None,
) -> None:
    """No covariate nor grouping column of dataset ``name`` is its ``target``: a covariate
    would feed the model (and the forest) the answer, a grouping would split by it (at parse
    time, and again by `aam check-data`)."""
    if target in categorical:
        raise InputError(
            f"datasets.{name}.categorical: {target!r} is the target; as a covariate it feeds "
            "the model the answer: drop it from categorical"
        )
    for key, column in (("group_column", group_column), ("split_group_column", split_group_column)):
        if column is not None and column == target:
            raise InputError(
                f"datasets.{name}.{key}: {column!r} is the target; grouping by it would split "
                "by the answer: name another column (e.g. the study or subject) or null"
            )


def check_references(runs: Config, datasets: Config) -> None:
    """Every run names a dataset, and an encoder run, that the config has."""
    for run, spec in runs.items():
        if spec["dataset"] not in datasets:
            raise InputError(f"runs.{run}.dataset: {spec['dataset']!r} is not a key of datasets")
        source = spec["encoder_from"]
        if source not in (None, *runs):
            raise InputError(f"runs.{run}.encoder_from: {source!r} is not a run")
        if source and spec["pretrain"] == "none":
            raise InputError(
                f"runs.{run}.encoder_from: {source!r} with pretrain: none; a run starts from an "
                "encoder or from a random initialisation: drop one"
            )
        if source and runs[source]["pretrain"] == "none":
            raise InputError(
                f"runs.{run}.encoder_from: {source!r} has pretrain: none (no encoder); name a "
                "run that pretrains"
            )


def check_predict_on(run: str, spec: Config, name: str, datasets: Config) -> None:
    """Dataset ``name`` of ``runs.<run>.predict_on`` (run config ``spec``) is another configured
    dataset with a target of the same kind (its covariate columns: ``dataset_checks``)."""
    if name not in datasets or name == spec["dataset"]:
        others = [d for d in datasets if d != spec["dataset"]]
        raise InputError(
            f"runs.{run}.predict_on: {name!r} is not a dataset other than the run's own "
            f"({spec['dataset']}); datasets: {', '.join(others) or 'none other'}"
        )
    own, other = datasets[spec["dataset"]], datasets[name]
    if other["classifier"] != own["classifier"]:
        kinds = {True: "classes", False: "numbers"}
        raise InputError(
            f"runs.{run}.predict_on: datasets.{name}.target holds {kinds[other['classifier']]}, "
            f"the run's model predicts {kinds[own['classifier']]}; set datasets.{name}.classifier "
            "to match or drop it from predict_on"
        )


def check_run_metric(run: str, spec: Config, classifier: bool) -> None:
    """``runs.<run>.finetune.best_metric`` (run config ``spec``) is measured for its dataset's
    target kind (``classifier``), as `aam finetune` checks it when its job starts."""
    name = (spec.get("finetune") or {}).get("best_metric")
    if name is None:
        return
    measured, kind = (
        (CLASSIFIER_METRICS, "a classifier") if classifier else (REGRESSION_METRICS, "a regression")
    )
    try:
        check_best_metric(name, measured, f"for {kind} target (datasets.{spec['dataset']})")
    except OptionError as err:
        raise InputError(
            f"config runs.{run}.finetune.best_metric: {err.value!r} {err.reason}"
        ) from None


def check_cv_split(run: str, dataset: str, data: Config) -> None:
    """A cross-validated run's dataset (config ``data``) has no split of its own nor a group
    left out (the folds' fit to the labelled samples: ``dataset_checks``)."""
    own = [k for k in ("split_column", "split_file", "split_test_group") if data[k] is not None]
    if own:
        given = own[0]
        raise InputError(
            f"config runs.{run}.cv: dataset {dataset} has its own split ({given}); "
            f"cross-validation makes its own folds: give the run a dataset entry without {given}"
        )


def check_new_studies(studies: Config, datasets: Config) -> None:
    """Each new study's dataset has a regression target (`aam new-study` scores MAE) and leaves
    one group out (``split_test_group``: the new study), and the new studies of one dataset draw
    alike (their points share splits and baselines)."""
    drawn: dict[str, tuple] = {}
    for run, study in studies.items():
        name = study["dataset"]
        if datasets[name]["classifier"]:
            raise InputError(
                f"config runs.{run}.new_study: dataset {name} has a categorical target; a new "
                "study is scored in MAE (a regression target): drop new_study or classifier"
            )
        if datasets[name]["split_test_group"] is None:
            raise InputError(
                f"config runs.{run}.new_study: dataset {name} leaves no study out; give it "
                "split_group_column and split_test_group (the new study)"
            )
        draw = tuple(study[k] for k in ("pool", "pool_seed", "val_fraction", "group_column"))
        if drawn.setdefault(name, draw) != draw:
            raise InputError(
                f"config runs.{run}.new_study: pool, pool_seed, val_fraction and group_column "
                f"differ from another new study of dataset {name}; give them the same values"
            )


def check_unifrac_engine(unifrac: Config) -> None:
    """``unifrac.shards`` > 1 runs the built-in engine on the CPU (a sample per shard:
    ``dataset_checks``)."""
    shards = unifrac["shards"]
    if shards > 1 and (unifrac["engine"], unifrac["device"]) != ("builtin", "cpu"):
        raise InputError(
            f"config unifrac.shards: {shards} shards run the builtin engine on the cpu, not "
            f"engine {unifrac['engine']} on {unifrac['device']}; set unifrac.engine: builtin "
            "and unifrac.device: cpu, or unifrac.shards: 1"
        )
