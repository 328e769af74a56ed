"""An optional RDP taxonomy (the demo's) on a machine without the RDP classifier: the plan leaves
it out with one line per dataset (logged, and on the landing page), so `make demo` runs where
Debian's rdp-classifier packages are not installed; a required one stays in the plan."""

import os
import subprocess
import sys
from pathlib import Path

import yaml
from planning import REPO, planned

from aam.analysis.overview import Page, overview_html


def _path_without_java(tmp_path: Path) -> str:
    """A PATH with every tool of this one but java (links in one folder), python's first."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not Path(folder).is_dir():
            continue
        for tool in Path(folder).iterdir():
            if tool.name != "java" and not os.path.lexists(tools / tool.name):
                (tools / tool.name).symlink_to(tool)
    return os.pathsep.join([str(Path(sys.executable).parent), str(tools)])


def test_the_plan_leaves_out_an_optional_taxonomy_without_java(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no java there
    plan = planned(REPO / "config/config.yaml")
    assert plan.datasets["demo"]["taxonomy"] is None and plan.taxonomy_file("demo") == []
    assert len(plan.notes) == 2  # demo and demo_study
    assert plan.notes[0].startswith("datasets.demo.taxonomy skipped (optional): java (on PATH)")

    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["datasets"]["demo"]["taxonomy"]["optional"] = False  # demo_study's too (an alias)
    required = tmp_path / "required.yaml"
    required.write_text(yaml.safe_dump(config))
    plan = planned(required)
    assert plan.datasets["demo"]["taxonomy"]["training_sequences"].endswith("new_trainset.fasta")
    assert plan.notes == []


def test_an_optional_taxonomy_with_a_missing_training_file_is_left_out(tmp_path):
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["datasets"]["demo"]["taxonomy"]["training_taxa"] = str(tmp_path / "absent.txt")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    plan = planned(path)
    assert plan.datasets["demo"]["taxonomy"] is None
    assert any(str(tmp_path / "absent.txt") in note for note in plan.notes)


def test_the_demo_dag_without_java_has_no_taxonomy_job_and_says_so(tmp_path, checkout_copy):
    env = {**os.environ, "PATH": _path_without_java(tmp_path)}
    cmd = [sys.executable, "-m", "snakemake", "all", "-n", "--profile", "profiles/local"]
    cmd += ["--config", f"workdir={tmp_path / 'work'}"]
    run = subprocess.run(cmd, cwd=checkout_copy, env=env, capture_output=True, text=True)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "datasets.demo.taxonomy skipped (optional)" in out
    assert "rule taxonomy:" not in out and "rule importance:" in out
    assert "--note 'datasets.demo.taxonomy skipped (optional)" in out


def test_the_landing_page_shows_what_was_left_out_escaped():
    page = overview_html(Page(runs=[], notes=["datasets.<b>x</b>.taxonomy skipped"]))
    assert "<p class=warn>Left out: datasets.&lt;b&gt;x&lt;/b&gt;.taxonomy skipped</p>" in page
