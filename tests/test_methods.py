"""The landing page's Methods paragraph (aam.analysis.methods): a sentence for each tool the
stages' records say ran, with its version and references, and those references as BibTeX
(docs/citations.bib, the same as docs/citations.md's)."""

import json
import re
from pathlib import Path

import pytest
from test_cli_training import aam
from test_overview import regression

from aam.analysis.methods import BIBTEX, METHODS, methods_html, read_bibtex, short_cite
from aam.analysis.overview import software_versions
from aam.analysis.workdir_index import StageRecord

REPO = Path(__file__).resolve().parents[1]
# A tool's record name -> how the paragraph names it.
NAMED = {
    "snakemake": "Snakemake",
    "mafft": "MAFFT",
    "fasttree": "FastTree",
    "rdp-classifier": "RDP naive Bayesian classifier",
    "java": "Java",
    "striped-unifrac": "Striped UniFrac",
    "rocprofv3": "rocprofv3",
}
VERSIONS = {
    "snakemake": "9.27.1",
    "mafft": "v7.505 (2022/Apr/10)",
    "fasttree": "FastTree 2.1.11 Double precision (No SSE3):",
    "rdp-classifier": "rdp_classifier.jar sha256:0123456789abcdef",
    "java": 'openjdk version "17.0.15" 2025-04-15',
    "striped-unifrac": "1.4",
    "rocprofv3": "rocprofv3 1.0.0",
}


def stages(*tools: dict[str, str]) -> list[StageRecord]:
    """One stage record per ``tools`` (a job's ``tools``), with python, torch and aam."""
    record = {"python": "3.11.7", "torch": "2.13.0+cpu", "packages": {"aam": "0.1.0"}}
    return [StageRecord(f"s{k}/p.json", {**record, "tools": t}) for k, t in enumerate(tools)]


@pytest.mark.parametrize(
    "ran",
    [
        ("snakemake", "mafft", "fasttree"),
        ("snakemake", "rdp-classifier", "java"),
        ("striped-unifrac",),
        ("rocprofv3", "mafft"),
        (),
    ],
)
def test_the_methods_name_exactly_the_tools_that_ran(ran):
    tree = {tool: VERSIONS[tool] for tool in ran if tool in ("mafft", "fasttree")}
    others = {tool: VERSIONS[tool] for tool in ran if tool not in tree}
    paragraph = methods_html(software_versions(stages(tree, others)))
    named = {tool for tool, name in NAMED.items() if name in paragraph}
    assert named == set(ran), paragraph
    assert "aam-hpc 0.1.0" in paragraph and "PyTorch 2.13.0 (Paszke et al. 2019)" in paragraph


def test_each_tool_has_its_version_and_references():
    paragraph = methods_html(software_versions(stages(VERSIONS)), "citations.bib")
    for sentence in (
        "The workflow ran with Snakemake 9.27.1 (Mölder et al. 2021).",
        "aligned with MAFFT v7.505 in its --auto mode (Katoh and Standley 2013).",
        "FastTree 2.1.11 under the GTR model and midpoint-rooted (Price et al. 2010).",
        "classifier rdp_classifier.jar sha256:0123456789abcdef (Wang et al. 2007).",
        "The RDP classifier ran on Java 17.0.15.",
        "Striped UniFrac 1.4 (Lozupone and Knight 2005; McDonald et al. 2018).",
    ):
        assert sentence in paragraph
    assert "<a href='citations.bib'>citations.bib</a>" in paragraph


def test_two_versions_of_a_tool_are_both_named():
    paragraph = methods_html(software_versions(stages({"mafft": "v7.505"}, {"mafft": "v7.520"})))
    assert "MAFFT v7.505 and v7.520" in paragraph


def test_every_reference_the_methods_cite_is_in_the_bibtex_of_docs_citations():
    entries = read_bibtex()
    assert BIBTEX == REPO / "docs/citations.bib" and len(entries) >= 14
    assert {key for method in METHODS.values() for key in method.cite} <= set(entries)
    assert short_cite(entries["katoh2013"][1]) == "Katoh and Standley 2013"
    assert short_cite(entries["scikitbio"][1]) == "The scikit-bio development team"
    # the same references as docs/citations.md's model, pipeline and methods (its data apart)
    page = (REPO / "docs/citations.md").read_text(encoding="utf-8").split("## The bundled data")[0]
    dois = set(re.findall(r"doi:(\S+?)(?=[;,) |]|$)", page, flags=re.M))
    assert dois == {fields["doi"] for _, fields in entries.values() if "doi" in fields}


def test_the_overview_writes_the_references_it_cites_beside_the_page(tmp_path):
    work = tmp_path / "work"
    (work / "data/demo").mkdir(parents=True)
    record = {"python": "3.11.7", "packages": {"aam": "0.1.0"}, "tools": {"mafft": "v7.505"}}
    (work / "data/demo/built_tree.provenance.json").write_text(json.dumps(record))
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps(regression([-0.5, -0.9, -0.1])))
    page, bib = work / "overview.html", work / "citations.bib"
    argv = ["--run", f"r=demo={metrics}", "--output", page, "--citations", bib]
    assert aam("overview", *argv) == 0
    keys = re.findall(r"^@\w+\{([\w-]+),", bib.read_text(encoding="utf-8"), flags=re.M)
    assert keys == ["aam", "vaswani2017", "katoh2013"]  # in the order the paragraph cites them
    text = page.read_text()
    assert "<a href='citations.bib'>citations.bib</a>" in text and "FastTree" not in text
    assert (
        aam("overview", "--run", f"r=demo={metrics}", "--output", page, "--citations", "c.txt") == 2
    )
