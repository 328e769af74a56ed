import os
import shlex
import shutil
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

REPO = Path(workflow.basedir).parent
sys.path.insert(0, str(REPO))
from aam.cli import (
    COMMANDS,
)  # noqa: E402  (standard library only: no torch on the login node)
from aam.containers import built_image, lint_def  # noqa: E402
from aam.data.check import (  # noqa: E402
    check_cv,
    check_dataset,
    check_predict_on,
    check_run_metric,
    check_unifrac_shards,
)
from aam.errors import InputError  # noqa: E402
from aam.training.launch import (  # noqa: E402
    check_partition_nodes,
    container_exec,
    launch_prefix,
    layout_of,
    slurm_resources,
)
from aam.provenance import code_fingerprint  # noqa: E402
from aam.workflow_config import (  # noqa: E402
    cli_flags,
    config_error_line,
    expand_cv,
    expand_sweeps,
    run_option_names,
)

try:
    validate(config, "../schemas/config.schema.yaml")
    # Every fold and every sweep point becomes a run; validating again types each value.
    _options = run_option_names(
        Path(workflow.basedir) / "schemas/run_options.schema.json"
    )
    config["runs"], CV = expand_cv(config["runs"], config["split"]["seed"])
    config["runs"], SWEEPS = expand_sweeps(config["runs"], _options)
    validate(config, "../schemas/config.schema.yaml")
except WorkflowError as err:
    raise WorkflowError(config_error_line(err)) from None
except ValueError as err:
    raise WorkflowError(str(err)) from None
_unset = [name for name in config["required_env"] if not os.environ.get(name)]
if _unset:
    raise WorkflowError(
        f"environment variable(s) {', '.join(_unset)} not set; this site's profile needs them "
        "(see the README section of your site)"
    )


def _expand(value):
    """$VARS of the environment in every string of the config."""
    if isinstance(value, dict):
        return {key: _expand(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand(item) for item in value]
    return os.path.expandvars(value) if isinstance(value, str) else value


config.update(_expand({k: v for k, v in config.items() if k != "scratch"}))

WORK = Path(config["workdir"])
# The image every stage runs in: pinned by the profile, or built from containers/<platform>.def
# (rules/container.smk), or none (local runs).
IMAGE = config["container"]["image"] or built_image(config["container"], REPO)
IMAGE = str(IMAGE) if IMAGE else None

BUILT_IMAGE = None
IMAGE_INPUT = []

if config["container"]["platform"]:  # rules/container.smk builds the image
    CONTAINER_DEF = Path(
        os.path.relpath(REPO / "containers" / f"{config['container']['platform']}.def")
    )
    try:
        _def_problems = lint_def(CONTAINER_DEF)
    except InputError as err:
        raise WorkflowError(f"container.platform: {err}") from None
    if _def_problems:
        raise WorkflowError(
            "container definition has problems (aam lint-def):\n"
            + "\n".join(_def_problems)
        )
    BUILT_IMAGE = str(built_image(config["container"], REPO))
    if not config["container"]["image"]:
        IMAGE_INPUT = ancient(BUILT_IMAGE)

# Used only with --software-deployment-method conda, and named in each rule's own conda
# directive. A global one would not give jobs an environment: Snakemake's global conda directive
# injects an environment into the running Snakemake process (conda-inject), i.e. the login node.
CONDA_ENV = "../envs/aam.yaml"
# Every job runs `python -m aam` from this checkout: in a container with the image's python
# (the image holds dependencies only), locally with the python running Snakemake.
_exports = [
    f'PYTHONPATH={shlex.quote(str(REPO))}"{os.pathsep}${{{{PYTHONPATH:-}}}}"'
]  # {{ }}: shell format
if not IMAGE:
    _exports.append(
        f'PATH={shlex.quote(str(Path(sys.executable).parent))}"{os.pathsep}$PATH"'
    )
shell.prefix("".join(f"export {e}; " for e in _exports))
DATASETS = config["datasets"]
RUNS = config["runs"]
SWEEP_RUNS = [member for members in SWEEPS.values() for member in members]
# Each fold run of a cross-validated run: member -> (its cv plan, k).
FOLD = {
    member: (plan, k) for plan in CV.values() for member, k in plan["members"].items()
}

for _run, _spec in RUNS.items():
    if _spec["dataset"] not in DATASETS:
        raise WorkflowError(
            f"runs.{_run}.dataset: {_spec['dataset']!r} is not a key of datasets"
        )
    if _spec["encoder_from"] not in (None, *RUNS):
        raise WorkflowError(
            f"runs.{_run}.encoder_from: {_spec['encoder_from']!r} is not a run"
        )
LABELLED = {}  # dataset -> its samples' target values (those with one)
for _name, _data in DATASETS.items():
    try:
        LABELLED[_name] = check_dataset(
            _name,
            Path(_data["table"]),
            Path(_data["metadata"]),
            _data["target"],
            _data["categorical"],
            Path(_data["tree"]) if _data["tree"] else None,
            _data["split_column"],
            Path(_data["split_file"]) if _data["split_file"] else None,
            classifier=_data["classifier"],
        )
    except InputError as err:
        raise WorkflowError(str(err)) from None
for _run, _spec in RUNS.items():
    try:
        check_run_metric(_run, _spec, DATASETS[_spec["dataset"]]["classifier"])
        for _other in _spec["predict_on"]:
            check_predict_on(_run, _spec, _other, DATASETS)
    except InputError as err:
        raise WorkflowError(str(err)) from None
for _run, _plan in CV.items():
    try:
        check_cv(_run, _plan, DATASETS[_plan["dataset"]], LABELLED[_plan["dataset"]])
    except InputError as err:
        raise WorkflowError(str(err)) from None
METRIC = config["unifrac"]["metric"]
# K > 1 splits each UniFrac matrix into K unifrac_shard jobs and one unifrac_gather (1: one job)
SHARDS = config["unifrac"]["shards"]
# unifrac.matrix: the datasets of the runs get their N x N UniFrac matrix (an analysis output,
# a target of all); none otherwise. Training never reads it: each batch's UniFrac is computed
# from the staged table and the dataset's tree.
MATRIX_DATASETS = (
    sorted({spec["dataset"] for spec in RUNS.values()})
    if config["unifrac"]["matrix"]
    else []
)
try:
    check_unifrac_shards(config["unifrac"], DATASETS, MATRIX_DATASETS)
except InputError as err:
    raise WorkflowError(str(err)) from None


def code(command):
    """Fingerprint of the aam code that `aam <command>` runs (rerun trigger via params)."""
    return code_fingerprint(COMMANDS[command][0])


# The runs' batch UniFrac: config unifrac's metric and alpha, before a run's own options (which
# override them) in a training rule's flags.
RUN_UNIFRAC = {
    "unifrac_metric": config["unifrac"]["metric"],
    "unifrac_alpha": config["unifrac"]["alpha"],
}


def training_layout(stage):
    """Nodes (config `<stage>_nodes`) and GPUs per node (the profile's set-resources) of a
    training stage, at parse time."""
    given = workflow.resource_settings.overwrite_resources.get(stage, {})
    values = {key: getattr(value, "raw", value) for key, value in given.items()}
    try:
        return layout_of(stage, {**values, "nodes": config[f"{stage}_nodes"]})
    except ValueError as err:
        raise WorkflowError(str(err)) from None


def check_partitions():
    """Before the first job is submitted to SLURM: the partition of a multi-node stage has
    enough nodes (`sinfo`; the executor is known only once the workflow runs)."""
    if PRETRAIN_LAYOUT.multi_node and workflow.executor_plugin.name == "slurm":
        given = workflow.resource_settings.overwrite_resources.get("pretrain", {})
        defaults = workflow.resource_settings.default_resources or {}
        partition = next(
            (
                getattr(value, "raw", value)
                for value in (
                    given.get("slurm_partition"),
                    defaults.get("slurm_partition"),
                )
                if getattr(value, "raw", value)
            ),
            "",
        )
        partition = os.path.expandvars(str(partition))
        try:
            check_partition_nodes(
                "pretrain", PRETRAIN_LAYOUT.nodes, partition.strip("'\"")
            )
        except ValueError as err:
            raise WorkflowError(str(err)) from None


PRETRAIN_LAYOUT = training_layout("pretrain")
# A multi-node job runs its shell on the host (srun is not in the image); srun then starts the
# image on each node, as Snakemake would have (`exec --home <workdir> <apptainer-args> <image>`).
_apptainer = (
    DeploymentMethod.APPTAINER in workflow.deployment_settings.deployment_method
)
PER_NODE_CONTAINER = (
    container_exec(
        shutil.which("singularity") and "singularity" or "apptainer",
        IMAGE,
        workflow.deployment_settings.apptainer_args,
        os.getcwd(),
    )
    if IMAGE and _apptainer
    else []
)


def launcher(stage, resources):
    """The command before `-m aam` of a training job (aam.training.launch.launch_prefix)."""
    return launch_prefix(layout_of(stage, resources), PER_NODE_CONTAINER)


def dataset_of(wildcards):
    """The dataset config of a run."""
    return DATASETS[RUNS[wildcards.run]["dataset"]]


def staged(name):
    """Input function: the staged file `name` of a run's dataset."""

    def staged_file(wildcards):
        return WORK / "data" / RUNS[wildcards.run]["dataset"] / name

    return staged_file


def fold_part(run):
    """`cv/<folds>x<seed>/fold<k>` of a fold run (its split and baselines), else None: runs
    with the same folds and seed on a dataset share them."""
    if run not in FOLD:
        return None
    plan, k = FOLD[run]
    return f"cv/{plan['folds']}x{plan['seed']}/fold{k}"


def split_of(wildcards):
    """Input function: the split of a run: its fold's, or its dataset's."""
    dataset, part = RUNS[wildcards.run]["dataset"], fold_part(wildcards.run)
    return WORK / "data" / dataset / (f"{part}.split.tsv" if part else "split.tsv")


def pretrain_split_of(wildcards):
    """Input function: the split pretraining reads; none for the shared pretraining of a
    cross-validated run, which learns from every sample of the table (no targets)."""
    if wildcards.run in FOLD and FOLD[wildcards.run][0]["pretrain"] == "shared":
        return []
    return split_of(wildcards)


def baselines_of(wildcards):
    """Input function: the baseline predictions of a run's split."""
    dataset, part = RUNS[wildcards.run]["dataset"], fold_part(wildcards.run)
    return WORK / "baselines" / (f"{dataset}/{part}.tsv" if part else f"{dataset}.tsv")


def baselines_options(dataset):
    """`aam baselines` flags of a dataset (rules baselines, cv_baselines)."""
    return cli_flags(
        {
            "target_column": DATASETS[dataset]["target"],
            "classifier": DATASETS[dataset]["classifier"],
            **config["baselines"],
        }
    )


def rarefied(run):
    """The run's rarefaction depth (`finetune.rarefy_depth`; None: none): how its model reads a
    sample."""
    return RUNS[run]["finetune"].get("rarefy_depth")


def tree_of(dataset):
    """The staged tree of a dataset, or the one built from its sequences."""
    name = "tree.nwk" if DATASETS[dataset]["tree"] else "built_tree.nwk"
    return WORK / "data" / dataset / name


def run_tree(wildcards):
    """Input function: the tree of a run's dataset (each batch's UniFrac is computed from it)."""
    return tree_of(RUNS[wildcards.run]["dataset"])


def encoder_run(wildcards):
    """The run whose pretrained encoder a run fine-tunes from."""
    return RUNS[wildcards.run]["encoder_from"] or wildcards.run


def unifrac_matrices():
    """The UniFrac matrices all builds (unifrac.matrix: true), one per dataset of a run."""
    return [WORK / f"unifrac/{dataset}.{METRIC}.h5" for dataset in MATRIX_DATASETS]


def unifrac_benchmarks(dataset):
    """Benchmark TSVs of the jobs that make a dataset's UniFrac matrix (none when the config
    builds no matrix)."""
    if dataset not in MATRIX_DATASETS:
        return []
    if SHARDS == 1:
        return [WORK / f"benchmarks/unifrac/{dataset}.{METRIC}.tsv"]
    return [
        *(
            WORK / f"benchmarks/unifrac_shard/{dataset}.{METRIC}.{k}of{SHARDS}.tsv"
            for k in range(1, SHARDS + 1)
        ),
        WORK / f"benchmarks/unifrac_gather/{dataset}.{METRIC}.tsv",
    ]


def benchmark_files(run):
    """Snakemake benchmark TSVs of every stage of a run (inputs of the profiling report)."""
    dataset = RUNS[run]["dataset"]
    return [
        *unifrac_benchmarks(dataset),
        *(
            WORK / f"benchmarks/{rule}/{run}.tsv"
            for rule in ("pretrain", "finetune", "predict")
        ),
        WORK / f"benchmarks/profile/{run}.tsv",
        WORK / "benchmarks/validate/validate.tsv",
    ]


def final_outputs():
    runs = list(RUNS)
    return [
        *expand(WORK / "runs/{run}/predict/predictions.tsv", run=runs),
        *expand(WORK / "runs/{run}/predict/metrics.json", run=runs),
        *expand(WORK / "runs/{run}/finetune/history.png", run=runs),
        *(
            WORK / f"runs/{run}/predict_on/{other}/{name}"
            for run in runs
            for other in RUNS[run]["predict_on"]
            for name in ("predictions.tsv", "metrics.json", "domain_shift.json")
        ),
        WORK / "summary.tsv",
        *([WORK / "leaderboard.tsv"] if SWEEPS else []),
        *expand(WORK / "cv/{run}.tsv", run=list(CV)),
        *unifrac_matrices(),
        WORK / "validation/golden.json",
    ]
