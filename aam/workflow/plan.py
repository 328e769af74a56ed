"""``plan(config, repo)``: everything the Snakefile needs from its config (checked against the
config schema, defaults filled in), at parse time, without reading a data file (each SLURM job
parses the Snakefile again).

Every problem of the config is one PlanError line naming the field and the fix; the Snakefile
turns it into its WorkflowError in one place. The data is checked by each dataset's check_data
job (``Plan.data_checks``: the flags of `aam check-data`), before any training.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from aam.errors import InputError
from aam.runtime.external_tools import rdp_unavailable
from aam.runtime.figures import figure_name
from aam.workflow import checks
from aam.workflow.config import (
    check_sweep_values,
    cli_flags,
    config_error_line,
    expand_cv,
    expand_ensembles,
    expand_learning_curves,
    expand_new_studies,
    expand_sweeps,
    from_scratch,
    run_option_names,
)
from aam.workflow.containers import built_image, lint_def
from aam.workflow.launch import Layout, layout_of
from aam.workflow.search_config import expand_searches, search_dir

CONFIG_SCHEMA = "workflow/schemas/config.schema.yaml"
RUN_OPTIONS_SCHEMA = "workflow/schemas/run_options.schema.json"


# Every form of ``Plan.split_part``, as a wildcard constraint (aam.workflow.snakefile.WILDCARDS).
SPLIT_PART = r"cv/\d+x-?\d+/fold\d+|lc/-?\d+/[0-9.e-]+|new_study/\d+/\d+"


class PlanError(InputError):
    """A config the workflow cannot run (one line: field, problem, fix)."""


@dataclass(frozen=True)
class Plan:
    """What the rules are built from.

    ``config``: the validated config with every fold and sweep point as a run, $VARS of the
    environment and a leading ``~`` expanded (``scratch`` is expanded by the job that uses it).
    ``cv``: run ->
    ``{"dataset", "folds", "seed", "pretrain", "members": {member: k}}``; ``sweeps``: run ->
    ``{member: {"section.option": value}}``; ``fold``: member -> (its cv plan, k);
    ``curves``: run -> ``{"dataset", "seed", "pretrain", "fractions", "points": {member:
    fraction}}``; ``ensembles``: run -> [the run, its members]; ``searches``: run -> its
    search (``aam.workflow.search_config.expand_searches``).
    ``image``: the image every rule runs in (None: no container); ``built_image``: the one
    rule build_container makes from ``container_def``, and ``image_input`` the file the rules
    wait for (None when the profile pins a prebuilt image). ``matrix_datasets``: the datasets
    whose N x N UniFrac matrix is a target. ``data_checks``: dataset -> the shell-quoted
    flags of its `aam check-data` job (rule check_data). ``notes``: what the plan left out
    (an optional taxonomy this machine cannot run), one line each: logged, and on the
    landing page."""

    config: dict[str, Any]
    work: Path
    runs: dict[str, dict[str, Any]]
    datasets: dict[str, dict[str, Any]]
    cv: dict[str, dict[str, Any]]
    sweeps: dict[str, dict[str, dict[str, Any]]]
    fold: dict[str, tuple[dict[str, Any], int]]
    curves: dict[str, dict[str, Any]]
    new_studies: dict[str, dict[str, Any]]
    ensembles: dict[str, list[str]]
    searches: dict[str, dict[str, Any]]
    image: str | None
    built_image: str | None
    container_def: Path | None
    image_input: str | None
    metric: str
    shards: int
    matrix_datasets: list[str]
    pretrain_layout: Layout
    profile_run: str
    data_checks: dict[str, str]
    notes: list[str]

    @property
    def compile_cache(self) -> Path:
        """The torch.compile cache every training job shares (``compile_cache``)."""
        return Path(self.config["compile_cache"] or self.work / "compile-cache")

    @property
    def sweep_runs(self) -> list[str]:
        """The runs of every sweep, in grid order."""
        return [member for members in self.sweeps.values() for member in members]

    @property
    def pretraining_runs(self) -> list[str]:
        """The runs that pretrain an encoder (the others reuse one, ``encoder_from``, or start
        from a random initialisation, ``pretrain: none``)."""
        return sorted(
            {
                spec["encoder_from"] or run
                for run, spec in self.runs.items()
                if not from_scratch(spec)
            }
        )

    @property
    def importance_runs(self) -> list[str]:
        """The runs whose ASV importance is a target: not a sweep's point, not a fold, not a
        learning curve's point, not an ensemble's member beside its run."""
        members = {m for spec in self.cv.values() for m in spec["members"]}
        members |= {m for spec in self.curves.values() for m in spec["points"]}
        members |= {m for spec in self.new_studies.values() for m in spec["points"]}
        members |= {m for runs in self.ensembles.values() for m in runs[1:]}
        return [run for run in self.runs if run not in members and run not in self.sweep_runs]

    @property
    def scored(self) -> list[tuple[str, str, Path]]:
        """What the summary and the overview show: (name, dataset, metrics.json) of every run,
        then of every ensemble (``<run>_ensemble``)."""
        runs = [
            (run, spec["dataset"], self.work / f"runs/{run}/predict/metrics.json")
            for run, spec in self.runs.items()
        ]
        return runs + [
            (f"{run}_ensemble", self.runs[run]["dataset"], self.ensemble_metrics(run))
            for run in self.ensembles
        ]

    def search_file(self, run: str, name: str) -> Path:
        """File ``name`` of run ``run``'s search (``runs/<run>/search/<name>``)."""
        return search_dir(self.work, run) / name

    def search_folds(self, run: str) -> list[Path]:
        """The scoring folds of run ``run``'s search: drawn from its dataset's split's train
        and val samples (rule search_split)."""
        search, dataset = self.searches[run], self.runs[run]["dataset"]
        part = f"search/{search['folds']}x{search['seed']}"
        return [
            self.work / f"data/{dataset}/{part}/fold{k}.split.tsv"
            for k in range(1, search["folds"] + 1)
        ]

    def searched_forest(self, run: str) -> Path | None:
        """The predictions of run ``run``'s searched forest (rule search_forest), or None."""
        search = self.searches.get(run)
        if search is None or search["forest"] is None:
            return None
        return self.search_file(run, "forest/predictions.tsv")

    def options_file(self, run: str) -> Path | list:
        """The options file run ``run`` trains with: its search's best.yaml, or none (``[]``)."""
        return self.search_file(run, "best.yaml") if run in self.searches else []

    def baselines_file(self, run: str) -> Path:
        """The baseline predictions of ``run``'s split (rule baselines or subset_baselines)."""
        dataset, part = self.runs[run]["dataset"], self.split_part(run)
        return self.work / "baselines" / (f"{dataset}/{part}.tsv" if part else f"{dataset}.tsv")

    def pooled_split(self, dataset: str, part: str) -> Path | list:
        """The split whose train and val samples the pooled forest of ``dataset``'s split part
        ``part`` also fits on: a new-study point's, its dataset's (the other studies); none
        (``[]``) for another part."""
        if part.startswith("new_study/"):
            return self.work / f"data/{dataset}/split.tsv"
        return []

    def new_study_inputs(self, run: str) -> dict[str, Any]:
        """The inputs of rule new_study for run ``run``: each point's split, baselines and
        predictions (``new_studies`` order), its forests on the pretrained embeddings where
        they are fitted, the predictions of its from-scratch twin's point, if any, and the
        dataset's metadata (the subjects)."""
        study, twin = self.new_studies[run], self.scratch_new_study(run)
        points = list(study["points"])
        twins = list(self.new_studies[twin]["points"]) if twin else []
        predictions = [self.work / f"runs/{point}/predict/predictions.tsv" for point in points]
        return {
            "splits": [self.split_file(point) for point in points],
            "baselines": [self.baselines_file(point) for point in points],
            "predictions": predictions,
            "scratch": [self.work / f"runs/{point}/predict/predictions.tsv" for point in twins],
            "forests": [f for f in map(self.embedding_forest, points) if f],
            "metadata": self.work / f"data/{study['dataset']}/metadata.tsv",
        }

    def embedding_forest(self, run: str) -> Path | None:
        """The predictions of the forests on ``run``'s pretrained sample embeddings (rule
        embedding_forest), or None: a run without an encoder, or ``baselines.embeddings``
        off."""
        if not self.config["baselines"]["embeddings"] or self.encoder(run) is None:
            return None
        return self.work / f"runs/{run}/embedding_forest/predictions.tsv"

    def ensemble_metrics(self, run: str) -> Path:
        """The metrics.json of run ``run``'s ensemble (rule ensemble)."""
        return self.work / f"runs/{run}/ensemble/metrics.json"

    def encoder(self, run: str) -> Path | None:
        """The encoder.pt ``run`` fine-tunes from: its own, its ``encoder_from``'s, or none
        (``pretrain: none``)."""
        spec = self.runs[run]
        if from_scratch(spec):
            return None
        return self.work / f"runs/{spec['encoder_from'] or run}/pretrain/encoder.pt"

    def curve_runs(self, run: str | None) -> list[str]:
        """A learning curve's runs, its points (fractions ascending) then the run itself
        (none for None)."""
        return [*self.curves[run]["points"], run] if run else []

    def scratch_curve(self, run: str) -> str | None:
        """The from-scratch twin of pretraining run ``run``'s learning curve: a run with
        ``pretrain: none`` and a curve of the same dataset, model, fine-tuning, fractions and
        seed (None: there is none)."""
        curve, spec = self.curves[run], self.runs[run]
        if curve["pretrain"] == "none":
            return None
        same = ("dataset", "seed", "fractions")
        for other, theirs in self.curves.items():
            them = self.runs[other]
            if (
                theirs["pretrain"] == "none"
                and all(theirs[key] == curve[key] for key in same)
                and (them["model"], them["finetune"]) == (spec["model"], spec["finetune"])
            ):
                return other
        return None

    def scratch_new_study(self, run: str) -> str | None:
        """The from-scratch twin of pretraining run ``run``'s new study: a run with ``pretrain:
        none``, the same dataset, model and fine-tuning, and a new study of the same sizes and
        seeds (None: there is none)."""
        study, spec = self.new_studies[run], self.runs[run]
        if study["scratch"]:
            return None
        for other, theirs in self.new_studies.items():
            them = self.runs[other]
            if (
                theirs["scratch"]
                and all(theirs[key] == study[key] for key in ("dataset", "sizes", "seeds"))
                and (them["model"], them["finetune"]) == (spec["model"], spec["finetune"])
            ):
                return other
        return None

    def new_study_of(self, run: str) -> dict[str, Any] | None:
        """The new study whose point ``run`` is (None: it is none's)."""
        return next((s for s in self.new_studies.values() if run in s["points"]), None)

    def split_groups(self, run: str) -> str | None:
        """The column of the groups ``run``'s split kept whole: a new-study point's subjects,
        else its dataset's ``split_group_column``."""
        study = self.new_study_of(run)
        if study is not None:
            return study["group_column"]
        return self.datasets[self.runs[run]["dataset"]]["split_group_column"]

    def split_part(self, run: str) -> str | None:
        """Where a run's own split and baselines live under ``data/<dataset>/`` and
        ``baselines/<dataset>/``: ``cv/<folds>x<seed>/fold<k>`` for a fold (runs with the same
        folds and seed on a dataset share them), ``lc/<seed>/<fraction>`` for a learning-curve
        point, ``new_study/<seed>/<size>`` for a new-study point; None for a run on its
        dataset's split."""
        if run in self.fold:
            fold_plan, k = self.fold[run]
            return f"cv/{fold_plan['folds']}x{fold_plan['seed']}/fold{k}"
        for curve in self.curves.values():
            if run in curve["points"]:
                return f"lc/{curve['seed']}/{curve['points'][run]:g}"
        study = self.new_study_of(run)
        if study is not None:
            size, seed = study["points"][run]
            return f"new_study/{seed}/{size}"
        return None

    def split_file(self, run: str) -> Path:
        """The split of a run: its own (a fold's, a learning-curve point's), or its dataset's."""
        dataset, part = self.runs[run]["dataset"], self.split_part(run)
        return self.work / "data" / dataset / (f"{part}.split.tsv" if part else "split.tsv")

    def table_of(self, dataset: str) -> Path:
        """The table a dataset's jobs read: rarefied once (its ``rarefy:``), or unrarefied."""
        if self.datasets[dataset]["rarefy"]:
            return self.work / "data" / dataset / "rarefied.biom"
        return self.unrarefied_table(dataset)

    def unrarefied_table(self, dataset: str) -> Path:
        """A dataset's table before rarefaction: as staged, or without its samples that have
        no metadata row (``drop_samples_without_metadata``: rule match_samples)."""
        matched = self.datasets[dataset]["drop_samples_without_metadata"]
        return self.work / "data" / dataset / ("matched.biom" if matched else "table.biom")

    def tree_of(self, dataset: str) -> Path:
        """The staged tree of a dataset, or the one built from its sequences."""
        name = "tree.nwk" if self.datasets[dataset]["tree"] else "built_tree.nwk"
        return self.work / "data" / dataset / name

    def figure(self, stem: Path) -> Path:
        """Figure ``stem`` (no suffix) in the config's ``figure_format``: ``<stem>.png``."""
        return Path(figure_name(str(stem), self.config["figure_format"]))

    def color_metadata(self, dataset: str) -> Path | list:
        """The staged metadata that colours ``dataset``'s PCoA by its group_column, or none
        (``[]``) without one."""
        if self.datasets[dataset]["group_column"]:
            return self.work / "data" / dataset / "metadata.tsv"
        return []

    def taxonomy_file(self, dataset: str) -> Path | list:
        """The taxonomy.tsv of ``dataset``: staged (its ``taxonomy:`` names a TSV), classified
        by rule taxonomy (an RDP training set), or none (``[]``)."""
        spec = self.datasets[dataset]["taxonomy"]
        if spec is None:
            return []
        name = "taxonomy.tsv" if isinstance(spec, str) else "rdp_taxonomy.tsv"
        return self.work / "data" / dataset / name

    @property
    def checked_datasets(self) -> list[str]:
        """The datasets the runs train on or predict: rule check_data checks each."""
        names = {
            name for spec in self.runs.values() for name in (spec["dataset"], *spec["predict_on"])
        }
        return sorted(names)

    def profiling_benchmarks(self) -> list[Path]:
        """Snakemake benchmark TSVs of every stage of the profiled run (``profile_run``), its
        dataset's UniFrac matrix jobs included: inputs of the profiling report."""
        run, dataset = self.profile_run, self.runs[self.profile_run]["dataset"]
        matrix = f"{dataset}.{self.metric}"
        if dataset not in self.matrix_datasets:
            unifrac = []
        elif self.shards == 1:
            unifrac = [f"unifrac/{matrix}.tsv"]
        else:
            shards = range(1, self.shards + 1)
            unifrac = [f"unifrac_shard/{matrix}.{k}of{self.shards}.tsv" for k in shards]
            unifrac.append(f"unifrac_gather/{matrix}.tsv")
        stages = [f"{rule}/{run}.tsv" for rule in ("pretrain", "finetune", "predict", "profile")]
        return [
            self.work / "benchmarks" / name for name in [*unifrac, *stages, "validate/validate.tsv"]
        ]


def plan(
    config: Mapping[str, Any],
    repo: str | os.PathLike[str],
    resources: Mapping[str, Mapping[str, Any]] | None = None,
    configfiles: Sequence[str | os.PathLike[str]] = (),
) -> Plan:
    """The Plan of ``config`` for the checkout ``repo``; ``resources``: the profile's
    set-resources (rule -> raw values); ``configfiles``: the files it was read from. ``config``
    is checked against the config schema with Snakemake's validate, which fills in its defaults
    in place. PlanError (one line) for a config the workflow cannot run."""
    try:
        checks.check_config_files(configfiles)
        checks.check_config_size(config)  # before anything walks it: a YAML alias bomb
        checks.check_config_strings(config)  # the rule for every string, before its kind's cap
    except InputError as err:
        raise PlanError(str(err)) from None
    try:
        validate(config, str(Path(repo) / CONFIG_SCHEMA))
    except WorkflowError as err:
        raise PlanError(config_error_line(err)) from None
    try:
        return _plan(config, Path(repo), resources or {})
    except (InputError, ValueError) as err:
        raise PlanError(str(err)) from None


def _plan(config: Mapping[str, Any], repo: Path, resources: Mapping[str, Any]) -> Plan:
    schema = repo / RUN_OPTIONS_SCHEMA
    check_sweep_values(config["runs"], schema)
    runs, searches = expand_searches(
        config["runs"],
        run_option_names(schema),
        schema,
        config["datasets"],
        config["split"]["seed"],
    )
    runs, ensembles = expand_ensembles(runs)
    runs, curves = expand_learning_curves(runs, config["split"]["seed"])
    runs, new_studies = expand_new_studies(runs, config["split"]["seed"])
    runs, cv = expand_cv(runs, config["split"]["seed"])
    runs, sweeps = expand_sweeps(runs, run_option_names(schema))
    unset = [name for name in config["required_env"] if not os.environ.get(name)]
    if unset:
        raise PlanError(
            f"environment variable(s) {', '.join(unset)} not set; this site's profile needs "
            "them (see docs/clusters.md)"
        )
    expanded = {key: value if key == "scratch" else _expand(value) for key, value in config.items()}
    # a run's option sections may be left out of the config (the schema has no default there)
    sections = dict.fromkeys(("model", "pretrain", "finetune"), {})
    expanded["runs"] = runs = _expand({run: {**sections, **spec} for run, spec in runs.items()})
    checks.check_config_strings(expanded)
    datasets, unifrac = expanded["datasets"], expanded["unifrac"]
    notes = _skip_unavailable_taxonomy(datasets) + _one_draw_notes(new_studies)
    checks.check_references(runs, datasets)
    for name, data in datasets.items():
        checks.check_dataset_paths(name, data)
        checks.check_not_target(
            name,
            data["target"],
            data["categorical"],
            data["group_column"],
            data["split_group_column"],
        )
    for run, spec in runs.items():
        checks.check_run_metric(run, spec, datasets[spec["dataset"]]["classifier"])
        for other in spec["predict_on"]:
            checks.check_predict_on(run, spec, other, datasets)
    checks.check_new_studies(new_studies, datasets)
    for run, fold_plan in cv.items():
        checks.check_cv_split(run, fold_plan["dataset"], datasets[fold_plan["dataset"]])
    checks.check_unifrac_engine(unifrac)
    matrix = sorted({spec["dataset"] for spec in runs.values()}) if unifrac["matrix"] else []
    container = expanded["container"]
    built, definition = _container(container, repo)
    image = container["image"] or built
    given = {
        key: getattr(value, "raw", value) for key, value in resources.get("pretrain", {}).items()
    }
    return Plan(
        config=expanded,
        work=Path(expanded["workdir"]),
        runs=runs,
        datasets=datasets,
        cv=cv,
        sweeps=sweeps,
        fold={member: (p, k) for p in cv.values() for member, k in p["members"].items()},
        curves=curves,
        new_studies=new_studies,
        ensembles=ensembles,
        searches=searches,
        image=str(image) if image else None,
        built_image=built,
        container_def=definition,
        image_input=built if built and not container["image"] else None,
        metric=unifrac["metric"],
        shards=unifrac["shards"],
        matrix_datasets=matrix,
        pretrain_layout=layout_of("pretrain", {**given, "nodes": expanded["pretrain_nodes"]}),
        profile_run=expanded["profiling"]["run"] or next(iter(runs)),
        notes=notes,
        data_checks={
            name: _data_checks(
                name, runs, cv, datasets, expanded["split"], unifrac["shards"], name in matrix
            )
            for name in datasets
        },
    )


def _skip_unavailable_taxonomy(datasets: dict[str, dict[str, Any]]) -> list[str]:
    """Each dataset whose RDP ``taxonomy:`` is ``optional`` and cannot run on this machine (no
    java, no classifier jar, a training file missing) loses its taxonomy (its ASVs are named by
    short IDs); one line per such dataset saying why and how to get it."""
    notes = []
    for name, data in datasets.items():
        spec = data["taxonomy"]
        if not isinstance(spec, dict) or not spec.get("optional"):
            continue
        files = (spec["training_sequences"], spec["training_taxa"])
        missing = rdp_unavailable() + [path for path in files if not Path(path).is_file()]
        if missing:
            data["taxonomy"] = None
            notes.append(
                f"datasets.{name}.taxonomy skipped (optional): {', '.join(missing)} not found "
                "on this machine, so ASVs are named by short IDs; install the RDP classifier "
                "and its training set (Debian: rdp-classifier, rdp-classifier-doc) to name them"
            )
    return notes


def _one_draw_notes(new_studies: dict[str, dict[str, Any]]) -> list[str]:
    """A line for each new study whose largest size is its pool with several seeds: there every
    seed labels the whole pool (one draw of the labelled samples; the seeds differ only in
    their train/val assignment and fine-tuning)."""
    return [
        f"runs.{run}.new_study: at size {study['pool']} (= pool) every seed labels the same "
        f"{study['pool']} samples, one draw; set new_study.pool above {study['sizes'][-1]} for "
        "seeds that redraw them there"
        for run, study in new_studies.items()
        if study["pool"] == study["sizes"][-1] and len(study["seeds"]) > 1
    ]


def _expand(value: Any) -> Any:
    """$VARS of the environment, then a leading ``~`` (the home directory, as a shell does), in
    every string of ``value``."""
    if isinstance(value, dict):
        return {key: _expand(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand(item) for item in value]
    return os.path.expanduser(os.path.expandvars(value)) if isinstance(value, str) else value


def _container(container: Mapping[str, Any], repo: Path) -> tuple[str | None, Path | None]:
    """The image rule build_container makes and its definition file (relative: a moved
    checkout rebuilds nothing), linted; (None, None) without ``container.platform``."""
    if not container["platform"]:
        return None, None
    definition = Path(os.path.relpath(repo / "containers" / f"{container['platform']}.def"))
    try:
        problems = lint_def(definition)
    except InputError as err:
        raise PlanError(f"container.platform: {err}") from None
    if problems:
        raise PlanError("container definition has problems (aam lint-def): " + "; ".join(problems))
    return str(built_image(container, repo)), definition


def _data_checks(
    name: str,
    runs: Mapping[str, Any],
    cv: Mapping[str, Any],
    datasets: Mapping[str, Any],
    split: Mapping[str, Any],
    shards: int,
    matrix: bool,
) -> str:
    """The `aam check-data` flags that check dataset ``name``'s data: its config, its seeded
    ``split`` (drawn there where the dataset gives none), the folds of each run that
    cross-validates it, the datasets its runs predict (their covariate columns), and,
    where its UniFrac matrix is built (``matrix``), its ``shards`` and the sample IDs of its
    lsmat TSV."""
    data = datasets[name]
    return cli_flags(
        {
            "target_column": data["target"],
            "classifier": data["classifier"],
            "categorical_columns": ",".join(data["categorical"]) or None,
            "split_column": data["split_column"],
            "split_file": data["split_file"],
            "split_group_column": data["split_group_column"],
            "group_column": data["group_column"],
            "folds": [f"{run}={p['folds']}" for run, p in cv.items() if p["dataset"] == name]
            or None,
            "predict_on": [
                f"{run}={other}={datasets[other]['metadata']}"
                for run, spec in runs.items()
                if spec["dataset"] == name and data["categorical"]
                for other in spec["predict_on"]
            ]
            or None,
            "shards": shards if matrix and shards > 1 else None,
            "rarefied": data["rarefy"] is not None,
            "lsmat": matrix,
            "drop_samples_without_metadata": data["drop_samples_without_metadata"],
            "split_seed": split["seed"],
            "val_fraction": split["val_fraction"],
            "test_fraction": split["test_fraction"],
            "test_group": data["split_test_group"],
        }
    )
