"""The report's front page (`aam overview`): the headline table of every run, AAM minus each
baseline with its paired interval, the verdict, the output folders."""

import html
import json
import re

import pandas as pd
import pytest
from test_cli_training import aam, assert_failed, error_line

from aam.analysis.overview import (
    OUTPUT_FOLDERS,
    Page,
    RunMetrics,
    best_constant,
    cost_text,
    overview_html,
    skill_caveat,
    software_versions,
    verdict,
)
from aam.analysis.split_groups import split_groups
from aam.analysis.workdir_index import training_cost
from aam.errors import InputError


def regression(mae_difference: list[float | None]) -> dict:
    """A metrics.json of `aam predict` with baselines; AAM - forest MAE = value, low, high."""
    value, low, high = mae_difference
    sections = {
        "model": {"mae": 4.0, "rmse": 7.1, "r2": 0.3},
        "mean_baseline": {"mae": 6.0, "rmse": 9.0, "r2": -0.01},
        "random_forest_baseline": {"mae": 4.5, "rmse": 7.5, "r2": 0.2},
        "group_mean_baseline": {"mae": 3.9, "rmse": 7.0, "r2": 0.31},
    }
    return {
        "n": 80,
        "target": "age",
        "group_column": "qiita_study_id",
        **sections,
        "intervals": {
            name: {k: [v - 1, v + 1] for k, v in m.items()} for name, m in sections.items()
        },
        "differences": {
            "random_forest_baseline": {
                "mae": {"value": value, "interval": [low, high]},
                "rmse": {"value": -0.4, "interval": [-1.0, 0.2]},
                "r2": {"value": None, "interval": [None, None]},
            },
            "group_mean_baseline": {"mae": {"value": 0.1, "interval": [0.05, 0.2]}},
        },
        "by_group": [
            {"group": f"s{k}", "n": 20 - k, **{name: {"mae": k + 0.5} for name in sections}}
            for k in range(17)
        ],
    }


@pytest.mark.parametrize(
    "difference, expected",
    [
        ([-0.5, -0.9, -0.1], "AAM is better than the random forest in MAE"),
        ([0.5, 0.1, 0.9], "AAM is worse than the random forest in MAE"),
        ([-0.2, -0.6, 0.3], "No clear difference in MAE"),
        ([None, None, None], "MAE undefined"),
    ],
)
def test_verdict_reads_the_paired_interval_of_the_first_metric(difference, expected):
    line = verdict(regression(difference))
    assert line.startswith(expected) or expected in line, line
    if difference[0] is not None:
        assert f"{difference[1]:+.3g} to {difference[2]:+.3g}" in line


def test_verdict_of_a_classifier_knows_higher_accuracy_is_better():
    metrics = {
        "differences": {
            "random_forest_baseline": {"accuracy": {"value": 0.1, "interval": [0.02, 0.2]}}
        }
    }
    assert verdict(metrics).startswith("AAM is better than the random forest in accuracy")
    metrics["differences"]["random_forest_baseline"]["accuracy"] = {
        "value": -0.1,
        "interval": [-0.2, -0.02],
    }
    assert verdict(metrics).startswith("AAM is worse")
    assert verdict({}) == "no paired comparison with the random forest in this run"


def test_no_verdict_against_the_forest_when_aam_reads_covariates_it_lacks():
    """Issue 41: AAM given covariates against a forest of the microbiome alone is no
    like-for-like comparison; the verdicts against the means stay (they read no microbiome)."""
    metrics = regression([-0.5, -0.9, -0.1])
    metrics["inputs"] = {
        "model": ["microbiome", "qiita_study_id"],
        "mean_baseline": [],
        "random_forest_baseline": ["microbiome"],
        "group_mean_baseline": ["qiita_study_id"],
    }
    line = verdict(metrics)
    assert line == (
        "AAM (microbiome + qiita_study_id) and the random forest (microbiome) read different "
        "inputs: no like-for-like verdict (their paired difference is in the table)."
    )
    assert verdict(metrics, "group_mean_baseline", "qiita_study_id").startswith("AAM is worse")
    page = overview_html(Page(runs=[(RunMetrics("tiny", "demo", metrics), [])]))
    assert "<p class=verdict>AAM (microbiome + qiita_study_id) and the random forest" in page
    read = dict(re.findall(r"<tr><th>([^<]+)</th><td class=l>([^<]*)</td>", page))
    assert read == {  # every model row names what it read
        "AAM": "microbiome + qiita_study_id",
        "training mean": "none",
        "random forest": "microbiome",
        "mean of each qiita_study_id": "qiita_study_id",
    }
    metrics["inputs"]["model"] = ["microbiome"]
    assert verdict(metrics).startswith("AAM is better than the random forest in MAE")


def test_the_headline_verdict_is_against_the_forest_that_reads_what_aam_reads():
    """AAM given the study: its headline verdict is against the forest given the study too
    (`aam baselines --covariates`), never the microbiome-only one; that pair keeps its line."""
    metrics = regression([-0.5, -0.9, -0.1])
    both = ["microbiome", "qiita_study_id"]
    metrics["inputs"] = {
        "model": both,
        "random_forest_baseline": ["microbiome"],
        "random_forest_covariates_baseline": both,
    }
    metrics["random_forest_covariates_baseline"] = {"mae": 4.2, "rmse": 7.3, "r2": 0.25}
    metrics["intervals"]["random_forest_covariates_baseline"] = {"mae": [3.2, 5.2]}
    metrics["differences"]["random_forest_covariates_baseline"] = {
        "mae": {"value": 0.3, "interval": [0.1, 0.6]}
    }
    line = verdict(metrics)
    assert line.startswith("AAM is worse than the random forest + covariates in MAE"), line
    page = overview_html(Page(runs=[(RunMetrics("tiny", "demo_study", metrics), [])]))
    assert f"<p class=verdict>{line}" in page
    assert "read different inputs" in verdict(metrics, "random_forest_baseline")
    del metrics["inputs"]["random_forest_covariates_baseline"]  # no forest with AAM's inputs
    assert "read different inputs" in verdict(metrics)


def cells(page: str, row: str) -> list[str]:
    """The text of the cells of the table row headed ``row``."""
    match = re.search(rf"<tr(?: class=diff)?><th>{re.escape(row)}</th>(.*?)</tr>", page)
    assert match, row
    return [re.sub("<[^>]+>", "", cell) for cell in re.findall(r"<td>(.*?)</td>", match.group(1))]


def test_the_page_has_each_runs_table_with_intervals_differences_and_verdict():
    page = overview_html(
        Page(runs=[(RunMetrics("tiny", "demo", regression([-0.5, -0.9, -0.1])), [])])
    )
    assert "<h2>run tiny <small>dataset demo, target age</small></h2>" in page
    assert cells(page, "AAM") == ["4 [3, 5]", "7.1 [6.1, 8.1]", "0.3 [-0.7, 1.3]"]
    assert cells(page, "random forest")[0] == "4.5 [3.5, 5.5]"
    assert cells(page, "training mean")[0] == "6 [5, 7]"
    assert cells(page, "mean of each qiita_study_id")[0] == "3.9 [2.9, 4.9]"
    assert cells(page, "AAM - random forest") == [
        "-0.5 [-0.9, -0.1]",
        "-0.4 [-1, +0.2]",
        "undefined",
    ]
    assert "<p class=verdict>AAM is better than the random forest in MAE" in page
    assert "AAM is worse than the mean of each qiita_study_id in MAE" in page
    assert "<th>MAE, lower is better</th>" in page and "<th>R², higher is better</th>" in page
    assert "AAM did not beat the training mean on its test split (no paired comparison" in page
    # per group: the largest 15, each model's MAE
    assert "<h3>MAE by qiita_study_id</h3>" in page
    assert cells(page, "s0") == ["20", "0.5", "0.5", "0.5", "0.5"]
    assert cells(page, "s14")[0] == "6" and "s15" not in page
    assert "2 smaller groups in metrics.json (by_group)" in page


def test_every_run_and_ensemble_compares_at_a_glance():
    runs = [("tiny", [-0.5, -0.9, -0.1]), ("tiny_ensemble", [0.2, -0.1, 0.5])]
    page = overview_html(
        Page(runs=[(RunMetrics(name, "demo", regression(d)), []) for name, d in runs])
    )
    glance = page.split("<h2>At a glance</h2>")[1].split("</table>")[0]
    rows = [
        [re.sub("<[^>]+>", "", c) for c in re.findall(r"<td class=l>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(<td.*?)</tr>", glance)
    ]
    assert [row[0] for row in rows] == ["tiny", "tiny_ensemble"]
    assert rows[0][2:] == [
        "MAE, lower is better",
        "4 [3, 5]",
        "4.5 [3.5, 5.5]",
        "-0.5 [-0.9, -0.1]",
        "the 80 samples",  # what its intervals resample
    ]
    assert rows[1][5] == "+0.2 [-0.1, +0.5]"
    assert "At a glance" not in overview_html(Page(runs=[]))


def test_names_are_escaped_and_an_unscored_run_says_why():
    unscored = {"n": 0, "target": "age", "no_metrics": "metadata has no column 'age'"}
    page = overview_html(Page(runs=[(RunMetrics("<b>x", "d&d", unscored), [])]))
    assert "&lt;b&gt;x" in page and "d&amp;d" in page and "<b>x" not in page
    assert "Not scored: metadata has no column &#x27;age&#x27;" in page


def test_cli_writes_the_page_and_refuses_bad_runs_leaving_nothing(tmp_path, capsys):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps(regression([-0.5, -0.9, -0.1])))
    pages = tmp_path / "pages"
    pages.mkdir()
    out = pages / "overview.html"
    run = f"tiny=demo={metrics}"
    assert aam("overview", "--run", run, "--output", out) == 0
    assert "mean of each qiita_study_id" in out.read_text()
    out.unlink()
    for bad, words in [
        (["--run", "tiny=demo"], ["--run tiny=demo", "RUN=DATASET=METRICS"]),
        (["--run", f"tiny=demo={tmp_path}/absent.json"], ["absent.json", "aam predict"]),
    ]:
        rc = aam("overview", *bad, "--output", out)
        assert_failed(rc, capsys, "overview", pages, *words)
    rc = aam("overview", "--run", run, "--output", pages / "page.txt")
    assert_failed(rc, capsys, "overview", pages, "page.txt", "*.html")


def test_the_page_says_how_each_runs_table_and_metadata_met(tmp_path, capsys):
    """rule check_data's line (data/<dataset>/samples.json) under the run's heading; a
    samples.json that is not JSON stops the page naming it."""
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps(regression([-0.5, -0.9, -0.1])))
    counted = tmp_path / "data/demo/samples.json"
    counted.parent.mkdir(parents=True)
    line = "datasets.demo: 470 samples in the table (470) and the metadata (646 rows), ..."
    counted.write_text(json.dumps({"matched": 470, "line": line}))
    out, run = tmp_path / "overview.html", f"tiny=demo={metrics}"
    assert aam("overview", "--run", run, "--output", out) == 0
    assert f"<p class=note>Samples: {html.escape(line)}</p>" in out.read_text()
    out.unlink()
    counted.write_text("{")
    assert aam("overview", "--run", run, "--output", out) == 2 and not out.exists()
    assert f"{counted}: cannot read it" in error_line(capsys, "overview")


def test_an_ensemble_costs_its_members_training_jobs(tmp_path):
    """The cost line sums the Snakemake benchmarks of the members' pretraining and fine-tuning
    jobs (a shared pretraining counted once, where it ran)."""
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    jobs = {"pretrain/a": (1800, 3600), "finetune/a": (900, 1800), "finetune/a_e1": (1800, 3600)}
    for name, (wall, cpu) in jobs.items():
        path = tmp_path / "benchmarks" / f"{name}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + f"{wall}\t0:00:00\t1\t1\t1\t1\t0\t0\t100\t{cpu}\n")
    cost = training_cost(tmp_path, ["a", "a_e1"])
    assert cost == {"wall_s": 4500.0, "cpu_s": 9000.0, "jobs": 3}
    models = [f"results/runs/{r}/finetune/model.pt" for r in ("a", "a_e1")]
    metrics = {**regression([-0.5, -0.9, -0.1]), "ensemble": models}
    line = cost_text(RunMetrics("a_ensemble", "demo", metrics, cost))
    assert "its 2 members (a, a_e1)" in line and "1.25 job hours" in line and "2.50 CPU" in line
    assert training_cost(tmp_path, ["b"]) is None
    (tmp_path / "benchmarks/finetune/b.tsv").write_text("s\tcpu_time\nlong\t1\n")
    with pytest.raises(InputError, match="b.tsv: not a Snakemake benchmark"):
        training_cost(tmp_path, ["b"])


def test_the_landing_page_shows_figures_provenance_config_and_every_file_linked(tmp_path):
    """A work directory as the workflow leaves it: the page shows the run's figures inline
    (PNG and SVG as data URIs that decode to the files' bytes, PDF as a link), every
    provenance record's command and commit, the config with its digest, and every file
    linked (no broken link); folders the run never made are not named."""
    import base64
    import hashlib

    from page_links import broken_links, links

    work = tmp_path / "work"
    predict = work / "runs/tiny/predict"
    predict.mkdir(parents=True)
    (predict / "metrics.json").write_text(json.dumps(regression([-0.5, -0.9, -0.1])))
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    (predict / "predicted_vs_true.png").write_bytes(png)
    (work / "runs/tiny/finetune").mkdir()
    (work / "runs/tiny/finetune/history.svg").write_text("<svg xmlns='x'></svg>")
    (work / "runs/tiny/importance").mkdir()
    (work / "runs/tiny/importance/importance.pdf").write_bytes(b"%PDF-1.4")
    (work / "unifrac/demo.unweighted.pcoa").mkdir(parents=True)
    (work / "unifrac/demo.unweighted.pcoa/pcoa.png").write_bytes(png)
    record = {
        "command": ["aam", "predict", "--table", "a b.biom"],
        "git_commit": "abc123",
        "git_dirty": True,
        "device": "AMD EPYC",
        "python": "3.11",
        "torch": "2.13",
    }
    (predict / "provenance.json").write_text(json.dumps(record))
    (work / "logs").mkdir()
    (work / "logs/predict.log").write_text("done")
    config = tmp_path / "config.yaml"
    config.write_text("runs: {tiny: {dataset: demo}}\n")
    out = work / "overview.html"
    run = f"tiny=demo={predict / 'metrics.json'}"
    assert aam("overview", "--run", run, "--config", config, "--output", out) == 0
    page = out.read_text()
    assert broken_links(out) == []
    hrefs, images = links(page)
    assert images == [
        "data:image/png;base64," + base64.b64encode(png).decode(),
        "data:image/svg+xml;base64," + base64.b64encode(b"<svg xmlns='x'></svg>").decode(),
        "data:image/png;base64," + base64.b64encode(png).decode(),  # the dataset's PCoA
    ]
    assert "runs/tiny/importance/importance.pdf" in hrefs and "pretraining history" not in page
    # each inline figure is a link to its file (click to see it at full size, offline), as
    # wide as the page allows
    assert "<a href='runs/tiny/predict/predicted_vs_true.png'><img src='data:image/png" in page
    assert "figure img{max-width:100%" in page and "width:47%" not in page
    files = {p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file()} - {
        "overview.html"
    }
    assert files <= set(hrefs)
    assert "<code>aam predict --table &#x27;a b.biom&#x27;</code>" in page
    assert "from commit abc123 (dirty); device AMD EPYC" in page
    assert hashlib.sha256(config.read_bytes()).hexdigest() in page
    assert f"<code>logs/</code> (1 files) {html.escape(OUTPUT_FOLDERS['logs'])}" in page
    assert "<code>cv/</code>" not in page
    assert "<code>learning_curve/</code>" not in page


def test_the_page_warns_when_a_test_group_has_training_samples_and_says_when_none_has():
    """metrics.json ``split_groups`` (`aam predict` with --split and --group-column): a random
    split of a few people's time series puts a person on both sides (issue 59)."""
    tested = pd.Series(["a", "a", "b", "c", "unknown"], name="qiita_study_id")
    seen = split_groups(tested, pd.Series(["a", "d", "c"], name="qiita_study_id"))
    assert seen == {
        "column": "qiita_study_id",
        "test_groups": 3,
        "in_training": ["a", "c"],
        "test_samples": 4,
        "test_samples_in_trained_groups": 3,
    }
    page = overview_html(
        Page(runs=[(RunMetrics("r", "d", regression([0, -1, 1]) | {"split_groups": seen}), [])])
    )
    assert (
        "<p class=warn>Split: 2 of the 3 qiita_study_id groups of the test samples also "
        "have training samples (3 of 4 test samples)" in page
    )
    new = split_groups(tested, pd.Series(["d", "e"], name="qiita_study_id"))
    page = overview_html(
        Page(runs=[(RunMetrics("r", "d", regression([0, -1, 1]) | {"split_groups": new}), [])])
    )
    assert "<p class=warn>Split" not in page
    assert "none of the 3 qiita_study_id groups of the test samples has training samples" in page
    assert "Split:" not in overview_html(
        Page(runs=[(RunMetrics("r", "d", regression([0, -1, 1])), [])])
    )


def test_software_versions_come_from_each_stages_record(tmp_path):
    """The page's software table and software_versions.tsv: every package and tool the stages'
    records name, one row per version seen (two versions of one package: two rows)."""
    from aam.analysis.workdir_index import StageRecord

    records = [
        {"python": "3.11.7", "torch": "2.13.0", "packages": {"numpy": "2.4.6"}, "tools": {}},
        {"python": "3.11.7", "packages": {"numpy": "2.3.0", "<b>": "1"}, "tools": {"mafft": "v7"}},
    ]
    for k, record in enumerate(records):
        (tmp_path / f"s{k}").mkdir()
        (tmp_path / f"s{k}/provenance.json").write_text(json.dumps(record))
    stages = [StageRecord(f"s{k}/provenance.json", r) for k, r in enumerate(records)]
    assert software_versions(stages) == [
        ("<b>", "1", 1),
        ("mafft", "v7", 1),
        ("numpy", "2.3.0", 1),
        ("numpy", "2.4.6", 1),
        ("python", "3.11.7", 2),
        ("torch", "2.13.0", 1),
    ]
    page = overview_html(Page(runs=[], stages=stages))
    assert "<td class=l>&lt;b&gt;</td>" in page and "<td>2 of 2</td>" in page
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps(regression([-0.5, -0.9, -0.1])))
    out, versions = tmp_path / "overview.html", tmp_path / "software_versions.tsv"
    assert (
        aam("overview", "--run", f"r=demo={metrics}", "--output", out, "--versions", versions) == 0
    )
    table = pd.read_csv(versions, sep="\t", dtype=str)
    assert list(table.columns) == ["software", "version", "stages"]
    assert table.loc[table.software == "python", "stages"].tolist() == ["2"]


def test_a_stage_records_the_packages_it_imported_and_the_tools_it_ran(monkeypatch):
    import sys

    from aam.runtime import external_tools
    from aam.workflow.provenance import imported_packages, provenance_record

    monkeypatch.setattr(external_tools, "TOOLS", {})
    external_tools.record_tool("python", [sys.executable, "--version"])
    external_tools.record_tool("absent", ["/nonexistent/tool", "--version"])
    assert external_tools.TOOLS == {
        "python": f"Python {sys.version.split()[0]}",
        "absent": "unknown",
    }
    packages = imported_packages()
    assert packages["numpy"] == np_version() and packages["pandas"] == pd.__version__
    assert "scikit-learn" not in packages or "sklearn" in sys.modules
    from datetime import datetime, timezone

    record = provenance_record(["x"], "aam.commands.overview", datetime.now(timezone.utc))
    assert record["tools"]["absent"] == "unknown" and record["packages"]["numpy"] == np_version()


def np_version() -> str:
    import numpy

    return numpy.__version__


@pytest.mark.parametrize(
    ("interval", "caveat"), [((-2.0, -0.5), False), ((-2.0, 0.3), True), ((0.2, 1.0), True)]
)
def test_a_model_that_does_not_beat_the_mean_is_marked_and_units_head_the_columns(interval, caveat):
    metrics = regression([-0.5, -0.9, -0.1])
    metrics["target_unit"] = "years"
    low, high = interval
    metrics["differences"]["mean_baseline"] = {
        "mae": {"value": (low + high) / 2, "interval": [low, high]}
    }
    page = overview_html(Page(runs=[(RunMetrics("tiny", "demo", metrics), [])]))
    assert ("its ASV importance is that of a model without shown skill" in page) == caveat
    assert (skill_caveat(metrics) is not None) == caveat
    assert (
        "<th>MAE (years), lower is better</th>" in page and "<th>R², higher is better</th>" in page
    )
    assert "[its 95% bootstrap interval]" in page  # the glance table says what its brackets are


def test_the_skill_caveat_judges_aam_against_the_better_constant():
    metrics = regression([-0.5, -0.9, -0.1])
    metrics["median_baseline"] = {"mae": 5.5, "rmse": 7.5, "r2": -0.1}  # better than the mean's 6
    metrics["differences"]["mean_baseline"] = {"mae": {"value": -1.0, "interval": [-1.5, -0.5]}}
    metrics["differences"]["median_baseline"] = {"mae": {"value": -0.2, "interval": [-0.6, 0.2]}}
    assert best_constant(metrics) == "median_baseline"
    caveat = skill_caveat(metrics)  # AAM beats the mean, not the median: no skill shown
    assert caveat is not None and caveat.startswith("AAM did not beat the training median")
    metrics["median_baseline"]["mae"] = 6.5  # now the mean is the better constant
    assert best_constant(metrics) == "mean_baseline" and skill_caveat(metrics) is None
