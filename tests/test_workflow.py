"""The Snakemake workflow on a copy of the repository: a full run of the tiny config
(``dag_run.completed``) and its outputs, then which rules a dry run schedules after each kind of
code edit (every other feature in one more run: test_workflow_extended.py).

The run's target column has a hostile name (spaces, quotes, `$(...)`, backticks, `;`), as a
metadata file from someone else may have: it must work end to end and execute nothing."""

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import skbio
import yaml
from checkout import job_counts
from dag_run import edit, run_snakemake, scheduled
from page_links import broken_links, links

from aam.analysis.overview import skill_caveat, verdict
from aam.unifrac.io import read_distance_matrix
from aam.workflow.provenance import declared_dependencies

# one worker runs the shared DAG once
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("workflow")]
TRAINING = {
    *("pretrain", "finetune", "embedding_forest", "predict", "importance", "plot_history"),
    *("summary", "overview", "all"),
}


def reasons(cwd: Path) -> dict[str, str]:
    """Rule -> why a dry run schedules its job (the test config has one job per rule)."""
    run = run_snakemake(cwd, "--dry-run")
    assert run.returncode == 0, run.stderr[-3000:]
    job = r"^(?:local)?rule (\w+):\n(?:    .*\n)*?    reason: (.*)$"
    return dict(re.findall(job, run.stdout, flags=re.M))


def test_outputs_of_the_whole_dag(completed):
    run = completed / "results/test/runs/tiny"
    split = pd.read_csv(completed / "results/test/data/demo/split.tsv", sep="\t", dtype=str)
    predictions = pd.read_csv(run / "predict/predictions.tsv", sep="\t", dtype={"sample_id": str})
    assert set(predictions["sample_id"]) == set(split.loc[split["split"] == "test", "sample_id"])
    metrics = (run / "predict/metrics.json").read_text()
    assert '"mae"' in metrics and '"mean_baseline"' in metrics
    assert '"random_forest_baseline"' in metrics and '"intervals"' in metrics
    # the random split puts studies on both sides: metrics.json and the landing page say so
    assert json.loads(metrics)["split_groups"]["in_training"]
    assert "<p class=warn>Split: " in (completed / "results/test/overview.html").read_text()
    assert (run / "predict/predicted_vs_true.png").read_bytes()[:4] == b"\x89PNG"
    assert (run / "finetune/history.png").read_bytes()[:4] == b"\x89PNG"
    summary = pd.read_csv(completed / "results/test/summary.tsv", sep="\t")
    assert list(summary["run"]) == ["tiny"] and summary.loc[0, "dataset"] == "demo"
    assert summary.loc[0, "target"].startswith("host age $(touch ")
    assert summary.loc[0, "n"] == len(predictions)
    assert {"AAM_mae", "mean_baseline_mae", "AAM_r2", "mean_baseline_r2"} <= set(summary)
    assert "random_forest_baseline_mae" in summary and "group_mean_baseline_mae" in summary
    low, high = summary.loc[0, "AAM_mae_low"], summary.loc[0, "AAM_mae_high"]
    assert low <= summary.loc[0, "AAM_mae"] <= high  # the bootstrap interval beside it
    # the report's front page: the run's table, AAM minus the forest, the verdict, per study
    scored = json.loads(metrics)
    page = (completed / "results/test/overview.html").read_text()
    forest = scored["differences"]["random_forest_baseline"]["mae"]
    low, high = forest["interval"]
    assert f"{forest['value']:+.3g} <span class=ci>[{low:+.3g}, {high:+.3g}]</span>" in page
    assert html.escape(verdict(scored)) in page and "mean of each qiita_study_id" in page
    assert scored["group_column"] == "qiita_study_id" and "<h3>MAE by qiita_study_id</h3>" in page
    # the landing page: made last, the run's figures inline, every link to a file that exists
    assert broken_links(completed / "results/test/overview.html") == []
    hrefs, images = links(page)
    assert "runs/tiny/predict/predictions.tsv" in hrefs and len(images) >= 3
    assert sum(group["n"] for group in scored["by_group"]) == scored["n"]
    for stage in ("pretrain", "finetune", "predict"):
        provenance = (run / stage / "provenance.json").read_text()
        assert '"code_fingerprint"' in provenance and '"torch"' in provenance
    # the software each job ran, read in the jobs: on the page and in software_versions.tsv
    versions = pd.read_csv(completed / "results/test/software_versions.tsv", sep="\t", dtype=str)
    trained = json.loads((run / "finetune/provenance.json").read_text())["packages"]
    assert versions.loc[versions.software == "torch", "version"].tolist() == [trained["torch"]]
    declared = set(declared_dependencies().values())
    assert {"numpy", "biom-format", "scikit-learn", "h5py"} <= set(versions.software)
    assert set(versions.software) - declared == {"python", "aam"}  # no tool but Snakemake ran
    snakemake = versions.loc[versions.software == "snakemake", "stages"].tolist()
    assert snakemake == [str(len(list((completed / "results/test").rglob("*provenance.json"))))]
    assert "<h2>Software</h2>" in page and "The workflow ran with Snakemake " in page
    assert "MAFFT" not in page and "<a href='citations.bib'>" in page  # the demo has its tree
    stages = ("stage", "unifrac", "baselines", "pretrain", "finetune", "predict", "plot_history")
    for rule in (*stages, "summary"):
        assert list((completed / "results/test/benchmarks" / rule).glob("*.tsv")), rule
    # the test config asks for the UniFrac matrix (unifrac.matrix: true): all builds it
    ids, matrix = read_distance_matrix(completed / "results/test/unifrac/demo.unweighted.h5")
    assert len(ids) == 400 and matrix.shape == (400, 400)
    # what the model learned: every training ASV ranked by AAM and by the forest
    importance = pd.read_csv(run / "importance/importance.tsv", sep="\t", comment="#")
    first = (run / "importance/importance.tsv").read_text().splitlines()[0]
    caveat = skill_caveat(scored)  # the tiny model's skill, as its metrics.json shows it
    assert first == (f"# {caveat}" if caveat else first) and first.startswith("#") == bool(caveat)
    assert json.loads((run / "importance/importance.json").read_text())["skill_caveat"] == caveat
    assert list(importance.columns) == [
        *("asv_id", "taxon", "confidence", "aam_rank", "aam_score", "forest_rank"),
        *("forest_score", "forest_scored", "prevalence", "mean_abundance", "asv"),
    ]
    assert importance["asv_id"].is_unique and importance["taxon"].isna().all()  # no taxonomy
    scored = importance[importance["forest_scored"]]
    assert (
        0 < len(scored) <= 50
        and (importance.loc[~importance["forest_scored"], "forest_score"] == 0).all()
    )
    assert importance["aam_rank"].is_monotonic_increasing and importance["aam_rank"].iloc[0] == 1
    assert (importance["aam_score"] >= 0).all() and importance["aam_score"].iloc[0] > 0
    assert (importance["forest_score"] != 0).any() and importance["prevalence"].between(0, 1).all()
    ranked = importance.sort_values("forest_rank").dropna(subset="forest_rank")
    assert (ranked["forest_rank"].iloc[0] == 1) and ranked["forest_scored"].all()
    summary = json.loads((run / "importance/importance.json").read_text())
    spearman = scored["aam_score"].corr(scored["forest_score"], method="spearman")
    assert summary["spearman_aam_forest"] == pytest.approx(spearman)
    assert summary["asvs"] == len(importance) and summary["explained_test_samples"] == 80
    assert (run / "importance/importance.png").read_bytes()[:4] == b"\x89PNG"
    # ... and its PCoA, with the ordination and the lsmat that QIIME 2 imports
    pcoa = completed / "results/test/unifrac/demo.unweighted.pcoa"
    assert (pcoa / "pcoa.png").read_bytes()[:4] == b"\x89PNG"
    lsmat = skbio.DistanceMatrix.read(str(pcoa / "distance-matrix.tsv"), format="lsmat")
    assert list(lsmat.ids) == ids and np.array_equal(lsmat.data, matrix)
    ordination = skbio.OrdinationResults.read(str(pcoa / "ordination.txt"), format="ordination")
    assert list(ordination.samples.index) == ids and ordination.samples.shape[1] == 10


def test_nothing_changed_schedules_nothing(copy):
    assert scheduled(copy) == set()


def test_touching_every_source_file_schedules_nothing(copy):
    for path in (copy / "aam").rglob("*.py"):
        path.touch()
    assert scheduled(copy) == set()


def test_comment_docstring_and_formatting_edits_schedule_nothing(copy):
    for path in (copy / "aam").rglob("*.py"):
        text = path.read_text()
        if text.startswith('"""'):  # reword the module docstring
            text = '"""Reworded.' + text[3:]
        path.write_text(f"# an added comment\n\n{text}\n\n# a closing comment\n")
    edit(copy / "aam/models/layers.py", "1.0 / math.sqrt(dim)", "1.0/math.sqrt( dim )")
    assert scheduled(copy) == set()


def test_model_change_reruns_training_prediction_and_validation_only(copy):
    edit(copy / "aam/models/layers.py", "1.0 / math.sqrt(dim)", "0.5 / math.sqrt(dim)")
    assert scheduled(copy) == {*TRAINING, "validate"}


def test_prediction_code_change_reruns_predict_only(copy):
    edit(
        copy / "aam/analysis/prediction_plots.py",
        "bottom.scatter(y[mask], predicted[mask] - y[mask], s=8",
        "bottom.scatter(y[mask], predicted[mask] - y[mask], s=9",
    )
    # importance reads predict's metrics.json (whether the model beat the training mean)
    assert scheduled(copy) == {"predict", "importance", "summary", "overview", "all"}


def test_unifrac_kernel_change_reruns_the_matrix_and_training_not_split_or_baselines(copy):
    # the matrix (the test config asks for it) and the training stages, which compute each
    # batch's UniFrac with the same kernel; not split, baselines or validate (no UniFrac there)
    edit(copy / "aam/unifrac/cpu_kernel.py", "TILE = 128", "TILE = 64")
    assert scheduled(copy) == {"unifrac", "pcoa", *TRAINING}


def test_tokenizer_edit_reruns_split_training_and_validation_not_unifrac(copy):
    edit(
        copy / "aam/data/tokenize.py",
        "    tokens[:, 0] = START\n",
        "    tokens[:, 0] = START\n    tokens[:, 0] = START\n",
    )
    why = reasons(copy)
    # split tokenizes too (load_study)
    assert set(why) == {"split", "baselines", "validate", *TRAINING}
    # baselines and the training stages already rerun for the new split; split and validate
    # for their code
    changed = {rule for rule, reason in why.items() if "Params have changed" in reason}
    assert changed == {"split", "validate"}


def test_metadata_reader_edit_reruns_split_and_its_dependants_not_unifrac(copy):
    edit(
        copy / "aam/data/metadata.py",
        "    lines = _LINE_BREAK.split(text)\n",
        "    lines = list(_LINE_BREAK.split(text))\n",
    )
    why = reasons(copy)
    assert set(why) == {"check_data", "split", "baselines", "pcoa", *TRAINING}
    # pretrain's own code is unchanged: it reruns only because the split is rebuilt
    assert why["pretrain"].startswith("Input files updated by another job")
    assert "Params" not in why["pretrain"]


# --- the UniFrac matrix: an analysis output, built only when the config asks for it ---------

UNIFRAC_RULES = {"unifrac", "unifrac_shard", "unifrac_gather"}


def _unifrac_config(tmp_path: Path, checkout: Path, unifrac: dict | None, **pretrain) -> Path:
    """The test config writing under ``tmp_path/work``, its `unifrac:` section replaced by
    ``unifrac`` (None: left out, the schema's defaults), ``pretrain`` added to the run's."""
    config = yaml.safe_load((checkout / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config.pop("unifrac", None)
    if unifrac is not None:
        config["unifrac"] = unifrac
    config["runs"]["tiny"]["pretrain"].update(pretrain)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _planned(checkout: Path, config: Path, *targets: str) -> tuple[dict[str, int], dict]:
    """Jobs per rule of a dry run of ``targets``, and the `aam` command line of each rule that
    runs one (the test config has one job per rule)."""
    cmd = [sys.executable, "-m", "snakemake", *targets, "--profile", "profiles/local"]
    cmd += ["--configfile", str(config), "--dry-run", "--printshellcmds"]
    run = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    jobs = job_counts(run.stdout)
    lines = re.findall(r" -m aam (?:--provenance \S+ )?([\w-]+) (.*)$", run.stdout, flags=re.M)
    return jobs, {command.replace("-", "_"): line for command, line in lines}


def test_by_default_training_reads_the_tree_and_no_unifrac_job_runs(tmp_path, checkout_copy):
    config = _unifrac_config(tmp_path, checkout_copy, None)  # unifrac.matrix: false
    jobs, commands = _planned(checkout_copy, config, "all", "profiling_report")
    assert jobs["pretrain"] == jobs["finetune"] == jobs["profile"] == 1
    assert not UNIFRAC_RULES & set(jobs), jobs  # nor the profiling report's benchmarks
    tree = f"--tree {tmp_path}/work/data/demo/tree.nwk "
    for rule in ("pretrain", "finetune", "profile"):
        assert tree in commands[rule] and "--unifrac " not in commands[rule], commands[rule]
    for rule in ("pretrain", "finetune"):
        assert "--unifrac-alpha 0.5 --unifrac-metric unweighted " in commands[rule]
    assert not (tmp_path / "work").exists()


def test_the_matrix_when_asked_for_and_a_runs_own_unifrac_options(tmp_path, checkout_copy):
    unifrac = {"matrix": True, "metric": "generalized", "alpha": 0.3}
    config = _unifrac_config(tmp_path, checkout_copy, unifrac, unifrac_metric="weighted_normalized")
    jobs, commands = _planned(checkout_copy, config, "all")
    assert jobs["unifrac"] == jobs["pretrain"] == 1
    matrix = f"--output {tmp_path}/work/unifrac/demo.generalized.h5 --alpha 0.3 "
    assert "--metric generalized " in commands["unifrac"] and matrix in commands["unifrac"]
    # the config's metric and alpha, unless the run's own options say otherwise
    assert "--unifrac-alpha 0.3 --unifrac-metric weighted_normalized " in commands["pretrain"]
    assert "--unifrac-alpha 0.3 --unifrac-metric generalized " in commands["finetune"]
    for rule in ("pretrain", "finetune"):
        assert "--unifrac " not in commands[rule] and " --tree " in commands[rule]
    assert not (tmp_path / "work").exists()
