import functools
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

REPO = Path(workflow.basedir).parent
sys.path.insert(0, str(REPO))
# No torch and no data file at parse time: every SLURM job parses this again, on any node.
from aam.cli import COMMANDS  # noqa: E402
from aam.workflow.fingerprint import code_fingerprint  # noqa: E402
from aam.workflow.flags import Flags, input_flags  # noqa: E402
from aam.workflow.plan import PlanError, plan  # noqa: E402
from aam.workflow.snakefile import WILDCARDS, digests, out_dir  # noqa: E402
from aam.workflow.snakefile import final_outputs, job_prefix  # noqa: E402
from aam.workflow.snakefile import report_entry, shared_directives  # noqa: E402

# The schema check (Snakemake's validate fills in the defaults) and the rest: one error type.
try:
    RESOURCES = workflow.resource_settings.overwrite_resources
    PLAN = plan(config, REPO, RESOURCES, workflow.configfiles)
except PlanError as err:
    raise WorkflowError(str(err)) from None
config.update(PLAN.config)
for note in PLAN.notes:  # what the plan left out (an optional taxonomy): one line each
    logger.warning(note)


wildcard_constraints:
    **WILDCARDS,


WORK, IMAGE, RUNS, DATASETS = PLAN.work, PLAN.image, PLAN.runs, PLAN.datasets
# options=FLAGS.<rule> (config values), paths=input_flags(...) (files): aam/workflow/flags.py
FLAGS = Flags(PLAN)
# Rules that run in the image wait for its build (`container:` makes no DAG edge).
IMAGE_INPUT = ancient(PLAN.image_input) if PLAN.image_input else []


# Jobs run in the site's image (none locally), all but build_container's.
container: IMAGE


CONDA_ENV = "../envs/aam.yaml"  # used only with --software-deployment-method conda
# Every job's exports (PYTHONPATH, the orphan token, the compile cache): not rerun triggers.
shell.prefix(job_prefix(REPO, IMAGE, PLAN.compile_cache))


@functools.cache
def code(command):
    """Fingerprint of the aam code that `aam <command>` runs (rerun trigger via params)."""
    return code_fingerprint(COMMANDS[command][0])


def get_final_output():
    """The targets of rule all (aam.workflow.snakefile.final_outputs)."""
    return final_outputs(PLAN)


def in_report(path):
    """Output ``path`` in the report, as aam.workflow.snakefile.REPORT describes it."""
    caption, category, subcategory, labels = report_entry(path, WORK)
    return report(path, f"../report/{caption}.rst", category, subcategory, labels)


table_of, tree_of, figure, split_file = (
    PLAN.table_of,
    PLAN.tree_of,
    PLAN.figure,
    PLAN.split_file,
)


def given(name):
    """Input function: the file `name` (table, tree, ...) a dataset's config names, if any."""
    return lambda wildcards: DATASETS[wildcards.dataset][name] or []


def staged(name):
    """Input function: the staged file `name` of a run's dataset."""
    return lambda wildcards: WORK / "data" / RUNS[wildcards.run]["dataset"] / name


def dataset_table(wildcards):
    """Input function: table_of the job's dataset."""
    return table_of(wildcards.dataset)


def run_table(section):
    """Input function: the table of a run's `section` stage (and what reads its model):
    unrarefied where it draws afresh each epoch (rarefy_each_epoch), else table_of its dataset.
    """

    def table(wildcards):
        run = RUNS[wildcards.run]
        if run[section].get("rarefy_each_epoch"):
            return PLAN.unrarefied_table(run["dataset"])
        return table_of(run["dataset"])

    return table


def split_of(wildcards):
    """Input function: split_file of the job's run."""
    return split_file(wildcards.run)


def pretrain_split_of(wildcards):
    """Input function: the split pretraining reads; none for the shared pretraining of a
    cross-validated run, which learns from every sample of the table (no targets)."""
    fold = PLAN.fold.get(wildcards.run)
    return [] if fold and fold[0]["pretrain"] == "shared" else split_of(wildcards)


def encoder_of(wildcards):
    """Input function: the encoder a run fine-tunes (none with `pretrain: none`)."""
    return PLAN.encoder(wildcards.run) or []


def baselines_of(wildcards):
    """Input function: the baseline predictions of a run's split, its forests on the
    pretrained sample embeddings (Plan.embedding_forest) and its searched forest
    (Plan.searched_forest) where it has them."""
    forests = PLAN.embedding_forest(wildcards.run), PLAN.searched_forest(wildcards.run)
    return [PLAN.baselines_file(wildcards.run), *filter(None, forests)]


def run_tree(wildcards):
    """Input function: the tree of a run's dataset (each batch's UniFrac is computed from it)."""
    return tree_of(RUNS[wildcards.run]["dataset"])


def curve_inputs(wildcards):
    """Input function: a learning curve's splits and metrics, its from-scratch twin's metrics."""
    runs, twin = PLAN.curve_runs(wildcards.run), PLAN.scratch_curve(wildcards.run)
    splits = [split_file(run) for run in runs]
    metrics, scratch = metrics_of(runs), metrics_of(PLAN.curve_runs(twin))
    return dict(splits=splits, metrics=metrics, scratch=scratch)


def metrics_of(runs):
    """The test metrics of `runs`."""
    return [WORK / f"runs/{run}/predict/metrics.json" for run in runs]


def run_taxonomy(wildcards):
    """Input function: the taxonomy.tsv of a run's dataset, if it has one."""
    return PLAN.taxonomy_file(RUNS[wildcards.run]["dataset"])
