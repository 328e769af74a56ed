"""The `aam` flags each rule passes (its ``params: options``), from the plan and the job's
wildcards, shell-quoted by ``cli_flags``.

``Flags(plan)`` has one method per rule (or family of rules); a rule names it as its params
function (``options=FLAGS.split``) and Snakemake calls it with the job's wildcards, and with its
input where the flags name an input file (Snakemake then leaves the value out of its params
rerun trigger: the input's own change reruns the job). The training rules spell out their flags
in train.smk. Standard library only (the Snakefile imports this on a login node).
"""

from __future__ import annotations

from typing import Any

from aam.workflow.config import cli_flags


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

    def check_data(self, wildcards: Any) -> str:
        """`aam check-data`: what the plan checks of dataset {dataset}."""
        return self.plan.data_checks[wildcards.dataset]

    def rarefy(self, wildcards: Any) -> str:
        """`aam rarefy`: the dataset's ``rarefy:`` depth and seed."""
        rarefy = self._dataset(wildcards)["rarefy"]
        return cli_flags({"rarefy_depth": rarefy["depth"], "seed": rarefy["seed"]})

    def split(self, wildcards: Any, input: Any) -> str:
        """`aam split` of a dataset's split: seeded (config ``split:``), or the dataset's own
        (``split_column``, or ``split_file``: input ``given``)."""
        data = self._dataset(wildcards)
        return cli_flags(
            {
                "target_column": data["target"],
                "classifier": data["classifier"],
                "from_column": data["split_column"],
                "from_file": input.given or None,
                **self.config["split"],
            }
        )

    def cv_split(self, wildcards: Any) -> str:
        """`aam split` of fold {fold} of a seeded {folds}-fold partition."""
        data = self._dataset(wildcards)
        return cli_flags(
            {
                "target_column": data["target"],
                "classifier": data["classifier"],
                "folds": wildcards.folds,
                "fold": wildcards.fold,
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
                **self.config["baselines"],
            }
        )

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

    def pcoa(self, wildcards: Any, input: Any) -> str:
        """`aam pcoa`: points coloured by the dataset's group_column, if it has one; the title
        names the dataset and the metric."""
        group = self._dataset(wildcards)["group_column"]
        return cli_flags(
            {
                "metadata": input.metadata if group else None,
                "color_column": group,
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
                "device": self.config["device"],
                "scratch": self.config["scratch"],
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
                "scratch": self.config["scratch"],
                "dataset": wildcards.dataset,
                "run": wildcards.run,
                "target_unit": self._dataset(wildcards)["target_unit"],
                **self._figures(),
            }
        )

    def importance(self, wildcards: Any, input: Any) -> str:
        """`aam importance`: the forest's options are config ``baselines:``; the dataset's
        taxonomy, where it has one (input ``taxonomy``)."""
        return cli_flags(
            {
                "rarefy_depth": self._rarefied(wildcards),
                "device": self.config["device"],
                **self.config["baselines"],
                **self._figures(),
                **self._labels(wildcards),
                "taxonomy": input.taxonomy or None,
            }
        )

    def learning_curve(self, wildcards: Any, input: Any) -> str:
        """`aam learning-curve`: the fractions of the points (then 1, the run itself), the
        from-scratch twin's metrics (input ``scratch``, ``Plan.scratch_curve``) if any."""
        data = self._run_dataset(wildcards)
        return cli_flags(
            {
                "fractions": [*self.plan.curves[wildcards.run]["points"].values(), 1],
                "scratch_metrics": list(input.scratch) or None,
                "target_column": data["target"],
                "group_column": data["group_column"],
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

    def overview_runs(self, wildcards: Any, input: Any) -> list[str]:
        """`aam overview --run` values: ``run=dataset=metrics`` of every run and ensemble
        (input ``metrics``, in the order of ``Plan.scored``)."""
        runs = zip(self.plan.scored, input.metrics, strict=True)
        return [f"{run}={dataset}={path}" for (run, dataset, _), path in runs]
