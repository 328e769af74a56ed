"""A config edit reruns exactly what it changes (issue 58): for every key of the config schema
(tests/config_edits.py: generated from the schema), on a copy of the finished test run, the jobs
a dry run schedules are the jobs whose params or files the edit changes and everything that
reads their outputs; a key no job reads reruns only the landing page (it shows the config's
text). The same for the features the test config leaves off: test_workflow_extended.py (tier
`extended`)."""

import os
import shutil
import subprocess
import sys

import pytest
from config_edits import rerun_plans
from dag_run import OPTIONS

pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("workflow")]

# Keys the test config gives no other valid value: it has one dataset (the extended config has
# more: test_workflow_extended.py).
NO_OTHER_VALUE = {
    "runs.tiny.dataset": "the test config has one dataset",
    "runs.tiny.predict_on": "the test config has no dataset other than the run's own",
    "datasets.demo.split_test_group": "needs a split_group_column (test_grouped_split.py)",
    "runs.tiny.new_study": "needs a dataset that leaves a study out (test_new_study.py)",
}


@pytest.fixture(scope="module")
def reruns(completed, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("reruns")
    root = tmp / "repo"
    shutil.copytree(completed, root, symlinks=True)
    return rerun_plans(root, "config/test.yaml", ("all",), tmp)


def test_the_finished_run_schedules_nothing(reruns):
    assert reruns["base"] == []


def test_every_key_reruns_what_it_changes_and_what_reads_it(reruns):
    wrong = {
        key: {
            "missed": sorted(set(edit["downstream"]) - set(edit["scheduled"])),
            "extra": sorted(set(edit["scheduled"]) - set(edit["downstream"])),
        }
        for key, edit in reruns["edits"].items()
        if "refused" not in edit and set(edit["scheduled"]) != set(edit["downstream"])
    }
    assert not wrong, wrong


def test_every_key_has_a_valid_edit(reruns):
    refused = {key: e["refused"] for key, e in reruns["edits"].items() if "refused" in e}
    assert set(refused) == set(NO_OTHER_VALUE), refused


def test_the_edits_of_issue_58_rerun_their_stages(reruns):
    """Each of these scheduled nothing (or too little) when params functions took `input`."""
    edits = reruns["edits"]

    def rules(key: str, part: str = "changed") -> set[str]:
        """The rules of the jobs an edit of ``key`` changes (or schedules) but `overview`,
        which every edit reruns (it shows the config's text)."""
        assert "overview[]" in edits[key][part]
        return {job.split("[")[0] for job in edits[key][part]} - {"overview"}

    assert {"split"} <= rules("split.seed")
    assert rules("runs.tiny.finetune.epochs") == {"finetune"}
    assert {"pretrain", "finetune"} <= rules("runs.tiny.model.embedding_dim")
    assert rules("baselines.trees") == {"baselines", "embedding_forest", "importance"}
    assert {"predict", "importance", "pcoa", "plot_history"} <= rules("figure_format")
    assert {"pretrain", "finetune", "predict", "summary"} <= rules("split.seed", "scheduled")
    # keys no job of `all` reads (the profiling target's; threads, a resource; where jobs copy
    # their inputs, which changes no result) rerun only the landing page (the config's text)
    for key in ("profiling.steps", "threads", "required_env", "scratch"):
        assert rules(key) == rules(key, "scheduled") == set(), key


@pytest.mark.parametrize("seed", ["1", "2", "3"])
def test_a_finished_run_plans_nothing_under_any_hash_seed(completed, seed):
    """Params hold no set or hash order: another PYTHONHASHSEED changes no params string."""
    cmd = [sys.executable, "-m", "snakemake", "all", *OPTIONS, "--dry-run"]
    env = {**os.environ, "PYTHONHASHSEED": seed}
    run = subprocess.run(cmd, cwd=completed, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Nothing to be done" in run.stdout + run.stderr, run.stdout[-3000:]
