"""LICENSE and CITATION.cff say what pyproject.toml and the package say: one license, one
version; every DOI docs/citations.md cites is well formed."""

import re
from pathlib import Path

import yaml

import aam

REPO = Path(__file__).resolve().parents[1]


def test_citation_and_license_match_the_package():
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    license_line = re.search(r'^license = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert citation["cff-version"] == "1.2.0" and citation["authors"]
    assert re.fullmatch(r"https://\S+/aam-hpc", citation["repository-code"])
    assert str(citation["version"]) == aam.__version__
    assert citation["license"] == license_line.group(1) == "BSD-3-Clause"
    assert (REPO / "LICENSE").read_text().startswith("BSD 3-Clause License")


def test_citations_page_dois_are_well_formed():
    page = (REPO / "docs/citations.md").read_text(encoding="utf-8")
    dois = re.findall(r"doi:(\S+?)(?=[;,) |]|$)", page, flags=re.M)
    assert len(dois) >= 12
    assert all(re.fullmatch(r"10\.\d{4,9}/[-._;()/:A-Za-z0-9]+", doi) for doi in dois), dois
