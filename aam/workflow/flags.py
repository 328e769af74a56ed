"""The `aam` flags each rule passes, shell-quoted by ``cli_flags``: the config's values
(``params: options``) apart from the input files a flag names (``params: paths``).

A job reruns when a config value its command reads changes because that value is in a params
entry Snakemake compares with its record of the job's last run. Snakemake leaves out of that
comparison every params function that takes ``input``, ``output``, ``threads`` or
``resources``, so the two kinds never share a function:

* ``options=FLAGS.<rule>``: a method of ``Flags(plan)`` that takes the job's wildcards only and
  returns the flags of the config's values (compared: a changed value reruns the job);
* ``paths=input_flags(flag="input name", ...)``: the flags that name input files (not compared:
  a changed set of input files reruns the job through Snakemake's input trigger).

Standard library only (the Snakefile imports this on a login node).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aam.workflow.config import cli_flags
from aam.workflow.fingerprint import code_fingerprint
from aam.workflow.search_config import study_names


def input_flags(**flags: str) -> Callable[[Any, Any], str]:
    """Params function: ``--<flag> <path>`` for each ``flag="input name"`` whose input the job
    has (an input function may give none: ``[]``); a list input gives one word per file.
    File paths only: config values go in ``options`` (``Flags``), which Snakemake compares."""

    def paths(wildcards: Any, input: Any) -> str:
        named = {flag: getattr(input, name, None) for flag, name in flags.items()}
        return cli_flags({flag: _words(value) for flag, value in named.items()})

    return paths


def _words(value: Any) -> Any:
    """An input's value as ``cli_flags`` takes it: None if empty, a list of paths if several."""
    if not value:
        return None
    return value if isinstance(value, str) else list(value)


class Flags:
    """The flags of each rule's `aam` command (``plan``: an ``aam.workflow.plan.Plan``)."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self.config = plan.config

    def _dataset(self, wildcards: Any) -> dict[str, Any]:
        """The config of dataset {dataset}."""
        return self.plan.datasets[wildcards.dataset]

    def _run_dataset(self, wildcards: Any) -> dict[str, Any]:
        """The config of run {run}'s dataset."""
        return self.plan.datasets[self.plan.runs[wildcards.run]["dataset"]]

    def _rarefied(self, wildcards: Any) -> int | None:
        """Run {run}'s rarefaction depth (``finetune.rarefy_depth``; None: none)."""
        return self.plan.runs[wildcards.run]["finetune"].get("rarefy_depth")

    @property
    def scratch(self) -> Callable[[Any, Any], str]:
        """Params function: ``--scratch``, where a job copies its inputs: a launch detail that
        changes no result, so it takes ``threads`` and Snakemake leaves it out of the params it
        compares (a moved scratch reruns nothing)."""
        flag = cli_flags({"scratch": self.config["scratch"]})
        return lambda wildcards, threads: flag

    def check_data(self, wildcards: Any) -> str:
        """`aam check-data`: what the plan checks of dataset {dataset}."""
        return self.plan.data_checks[wildcards.dataset]

    def rarefy(self, wildcards: Any) -> str:
        """`aam rarefy`: the dataset's ``rarefy:`` depth and seed."""
        rarefy = self._dataset(wildcards)["rarefy"]
        return cli_flags({"rarefy_depth": rarefy["depth"], "seed": rarefy["seed"]})

    def split(self, wildcards: Any) -> str:
        """`aam split` of a dataset's split: seeded (config ``split:``), or the dataset's own
        (``split_column``; ``split_file`` is input ``given``)."""
        data = self._dataset(wildcards)
        return cli_flags(
            {
                "target_column": data["target"],
                "classifier": data["classifier"],
                "from_column": data["split_column"],
                "group_column": data["split_group_column"],
                "test_group": data["split_test_group"],
                **self.config["split"],
            }
        )

    def unifrac(self, wildcards: Any) -> str:
        """`aam unifrac` of a dataset's matrix (config ``unifrac:``; the metric is {metric})."""
        unifrac = self.config["unifrac"]
        return cli_flags({key: unifrac[key] for key in ("alpha", "engine", "device")})

    def unifrac_shards(self, wildcards: Any) -> str:
        """`aam unifrac-shard` and `aam unifrac-gather`: alpha and the number of shards."""
        return cli_flags({"alpha": self.config["unifrac"]["alpha"], "shards": self.plan.shards})

    def cv_split(self, wildcards: Any) -> str:
        """`aam split` of fold {fold} of a seeded {folds}-fold partition (rules cv_split and
        search_split: a search's folds partition the train and val samples of the split its
        input ``given`` names)."""
        data = self._dataset(wildcards)
        return cli_flags(
            {
                "target_column": data["target"],
                "classifier": data["classifier"],
                "folds": wildcards.folds,
                "fold": wildcards.fold,
                "group_column": data["split_group_column"],
                "seed": wildcards.seed,
                "val_fraction": self.config["split"]["val_fraction"],
            }
        )

    def learning_curve_split(self, wildcards: Any) -> str:
        """`aam split` of a learning-curve point: fraction {fraction} of train and val."""
        data = self._dataset(wildcards)
        return cli_flags(
            {
                "target_column": data["target"],
                "classifier": data["classifier"],
                "train_fraction": wildcards.fraction,
                "seed": wildcards.seed,
            }
        )

    def new_study_split(self, wildcards: Any) -> str:
        """`aam split` of a new-study point: {size} labelled samples drawn with seed {seed}
        from the pool of the dataset's new studies (alike: ``checks.check_new_studies``)."""
        data = self._dataset(wildcards)
        study = next(s for s in self.plan.new_studies.values() if s["dataset"] == wildcards.dataset)
        return cli_flags(
            {
                "target_column": data["target"],
                "classifier": data["classifier"],
                "new_study_size": wildcards.size,
                "seed": wildcards.seed,
                "pool_size": study["pool"],
                "pool_seed": study["pool_seed"],
                "val_fraction": study["val_fraction"],
                "group_column": study["group_column"],
            }
        )

    def baselines(self, wildcards: Any) -> str:
        """`aam baselines` of a dataset (rules baselines, subset_baselines, baselines_on): the
        forest also reads the covariates the dataset gives AAM (``categorical``)."""
        data = self._dataset(wildcards)
        return cli_flags(
            {
                "target_column": data["target"],
                "classifier": data["classifier"],
                "group_column": data["group_column"],
                "covariates": data["categorical"] or None,
                **self._forest(),
            }
        )

    def _forest(self) -> dict[str, Any]:
        """The random forest's flags (config ``baselines:`` trees and seed, where given)."""
        return {k: v for k, v in self.config["baselines"].items() if k in ("trees", "seed")}

    def embedding_forest(self, wildcards: Any) -> str:
        """`aam embedding-forest` of run {run}: its dataset's target, the forest's options."""
        data = self._run_dataset(wildcards)
        return cli_flags(
            {
                "target_column": data["target"],
                "classifier": data["classifier"],
                "device": self.config["device"],
                **self._forest(),
            }
        )

    def _unifrac(self) -> dict[str, Any]:
        """The runs' batch UniFrac (config ``unifrac:`` metric and alpha; a run's own
        ``unifrac_metric``/``unifrac_alpha`` come after it and win)."""
        unifrac = self.config["unifrac"]
        return {"unifrac_metric": unifrac["metric"], "unifrac_alpha": unifrac["alpha"]}

    def _pretrain_options(self, run: dict[str, Any]) -> dict[str, Any]:
        """The config values of `aam pretrain` of a run's sections ``run``."""
        return {
            "device": self.config["device"],
            "stale_checkpoints": "restart",  # a rerun job's config, data or code changed
            **self._unifrac(),
            **run["model"],
            **run["pretrain"],
        }

    def _finetune_options(self, run: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        """The config values of `aam finetune` of a run's sections ``run`` on dataset
        ``data``: its target and covariates, its model and fine-tuning options."""
        return {
            "target_column": data["target"],
            "categorical_columns": ",".join(data["categorical"]) or None,
            "classifier": data["classifier"],
            "device": self.config["device"],
            "stale_checkpoints": "restart",  # a rerun job's config, data or code changed
            **self._unifrac(),
            **run["model"],
            **run["finetune"],
        }

    def pretrain(self, wildcards: Any) -> str:
        """`aam pretrain` of run {run}: its model and pretraining options (the split it reads,
        if any, is input ``split``; a searched run's chosen values, input ``options``)."""
        return cli_flags(self._pretrain_options(self.plan.runs[wildcards.run]))

    def finetune(self, wildcards: Any) -> str:
        """`aam finetune` of run {run} (the encoder it starts from, if any, is input
        ``encoder``; a searched run's chosen values, input ``options``)."""
        run, data = self.plan.runs[wildcards.run], self._run_dataset(wildcards)
        return cli_flags(self._finetune_options(run, data))

    def _search_spec(self, run: str) -> str:
        """Run ``run``'s search as the JSON `aam search-worker` and `aam search-best` read:
        its space, budget, seed, folds, metric and study key, its target, the config values of
        its trials' `aam pretrain` (None where it never pretrains) and `aam finetune` before a
        trial's values are laid over them, and its studies' names (``study_names``: the code
        fingerprints are those of this plan, so all workers of one DAG run share a study)."""
        search = self.plan.searches[run]
        data = self.plan.datasets[search["dataset"]]
        base = search["base"]
        pretrains = base["pretrain"] != "none"
        spec = {
            **{key: search[key] for key in ("key", "space", "trials", "seed", "folds")},
            **{key: search[key] for key in ("metric", "direction", "forest")},
            "target": data["target"],
            "classifier": data["classifier"],
            "pretrain": self._pretrain_options(base) if pretrains else None,
            "finetune": self._finetune_options(base, data),
            "studies": study_names(
                search,
                code_fingerprint("aam.commands.search_worker"),
                code_fingerprint("aam.commands.search_forest"),
            ),
        }
        return json.dumps(spec, sort_keys=True)

    def search_worker(self, wildcards: Any) -> str:
        """`aam search-worker` {worker} of run {run}: its search (``_search_spec``)."""
        return cli_flags({"spec": self._search_spec(wildcards.run), "worker": wildcards.worker})

    def search_forest(self, wildcards: Any) -> str:
        """`aam search-forest` of run {run}: its search, the forests' seed (``baselines:``)."""
        seed = {k: v for k, v in self._forest().items() if k == "seed"}
        return cli_flags({"spec": self._search_spec(wildcards.run), **seed})

    def search_best(self, wildcards: Any) -> str:
        """`aam search-best` of run {run}: its search, the run's name, the figures' format."""
        spec = self._search_spec(wildcards.run)
        return cli_flags({"spec": spec, "run": wildcards.run, **self._figures()})

    def validate(self, wildcards: Any) -> str:
        """`aam validate compare`: on the config's device."""
        return cli_flags({"device": self.config["device"]})

    def _figures(self) -> dict[str, Any]:
        """The flag of the format of a command's figures (config ``figure_format``)."""
        return {"figure_format": self.config["figure_format"]}

    def _labels(self, wildcards: Any) -> dict[str, Any]:
        """Run {run}'s names and its target's unit: its figures' titles and axis labels."""
        spec = self.plan.runs[wildcards.run]
        unit = self.plan.datasets[spec["dataset"]]["target_unit"]
        return {"dataset": spec["dataset"], "run": wildcards.run, "target_unit": unit}

    def taxonomy(self, wildcards: Any) -> str:
        """`aam taxonomy`: the confidence of a dataset's RDP ``taxonomy:``, if given."""
        return cli_flags({"confidence": self._dataset(wildcards)["taxonomy"].get("confidence")})

    def pcoa(self, wildcards: Any) -> str:
        """`aam pcoa`: points coloured by the dataset's group_column, if it has one (input
        ``metadata``); the title names the dataset and the metric."""
        return cli_flags(
            {
                "color_column": self._dataset(wildcards)["group_column"],
                "dataset": wildcards.dataset,
                "metric": wildcards.metric,
                **self._figures(),
            }
        )

    def predict(self, wildcards: Any) -> str:
        """`aam predict` of a run's test split."""
        return cli_flags(
            {
                "rarefy_depth": self._rarefied(wildcards),
                "group_column": self._run_dataset(wildcards)["group_column"],
                "split_group_column": self.plan.split_groups(wildcards.run),
                "device": self.config["device"],
                **self._labels(wildcards),
                **self._figures(),
            }
        )

    def predict_on(self, wildcards: Any) -> str:
        """`aam predict` of a run on dataset {dataset}: its target, where it has one."""
        return cli_flags(
            {
                "target_column": self._dataset(wildcards)["target"],
                "rarefy_depth": self._rarefied(wildcards),
                "device": self.config["device"],
                "dataset": wildcards.dataset,
                "run": wildcards.run,
                "target_unit": self._dataset(wildcards)["target_unit"],
                **self._figures(),
            }
        )

    def importance(self, wildcards: Any) -> str:
        """`aam importance`: the forest's options are config ``baselines:`` (the dataset's
        taxonomy, where it has one, is input ``taxonomy``)."""
        return cli_flags(
            {
                "rarefy_depth": self._rarefied(wildcards),
                "device": self.config["device"],
                **self._forest(),
                **self._figures(),
                **self._labels(wildcards),
            }
        )

    def learning_curve(self, wildcards: Any) -> str:
        """`aam learning-curve`: the fractions of the points (then 1, the run itself); the
        from-scratch twin's metrics (``Plan.scratch_curve``), if any, are input ``scratch``."""
        data = self._run_dataset(wildcards)
        return cli_flags(
            {
                "fractions": [*self.plan.curves[wildcards.run]["points"].values(), 1],
                "target_column": data["target"],
                "group_column": data["group_column"],
                **self._labels(wildcards),
            }
        )

    def new_study(self, wildcards: Any) -> str:
        """`aam new-study`: each point's size and seed, in the order of its inputs
        (``Plan.new_studies``), and the subjects' column of the draws."""
        study = self.plan.new_studies[wildcards.run]
        data = self._run_dataset(wildcards)
        return cli_flags(
            {
                "sizes": [size for size, _ in study["points"].values()],
                "seeds": [seed for _, seed in study["points"].values()],
                "group_column": study["group_column"],
                "target_column": data["target"],
                **self._labels(wildcards),
            }
        )

    def plot_history(self, wildcards: Any) -> str:
        """`aam plot-history` of stage {stage} of run {run}."""
        target = self._run_dataset(wildcards)["target"]
        return cli_flags(
            {"target_column": target, "stage": wildcards.stage, **self._labels(wildcards)}
        )

    def profile(self, wildcards: Any) -> str:
        """`aam profile`: steps and batch sizes (config ``profiling:``), the run's model."""
        return cli_flags(
            {
                "device": self.config["device"],
                "steps": self.config["profiling"]["steps"],
                "batch_sizes": self.config["profiling"]["batch_sizes"],
                **self.plan.runs[wildcards.run]["model"],
            }
        )

    def overview(self, wildcards: Any) -> str:
        """`aam overview`: ``--run run=dataset=metrics`` of every run and ensemble (in the order
        of ``Plan.scored``; the metrics files are the rule's input ``metrics``) and ``--note``
        each thing the plan left out (``Plan.notes``)."""
        runs = [f"{run}={dataset}={path}" for run, dataset, path in self.plan.scored]
        return cli_flags({"run": runs, "note": self.plan.notes or None})
