"""The landing page's Methods paragraph: one sentence for each tool the stages ran (the rows of
the software table, read from their provenance records), with the versions the jobs read and
the references to cite, and those references as BibTeX.

The references are ``docs/citations.bib`` of the checkout (every reference of
docs/citations.md's model, pipeline and methods; none where aam runs without its checkout),
cited by key; `aam overview --citations` writes the ones the paragraph cites beside the page.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BIBTEX = Path(__file__).resolve().parents[2] / "docs" / "citations.bib"
_ENTRY = re.compile(r"^@\w+\{([\w-]+),\n(.*?)^\}\n", re.M | re.S)
_FIELD = re.compile(r"^  (\w+) = \{(.*)\},$", re.M)
_VERSION = re.compile(r"v?\d+(?:\.\d+)+")


@dataclass(frozen=True)
class Method:
    """A tool's sentence (``{version}`` where its versions go) and the BibTeX keys it cites."""

    sentence: str
    cite: tuple[str, ...] = ()


# A name of the software table -> its sentence, in the order the paragraph reads.
METHODS = {
    "snakemake": Method("The workflow ran with Snakemake {version}", ("molder2021",)),
    "aam": Method(
        "AAM (Attention All Microbes), transformers over each ASV's nucleotides and each "
        "sample's ASVs, was trained and scored with aam-hpc {version}",
        ("aam", "vaswani2017"),
    ),
    "torch": Method("Training and prediction ran on PyTorch {version}", ("paszke2019",)),
    "scikit-learn": Method(
        "The random-forest baselines were fitted with scikit-learn {version}",
        ("breiman2001", "pedregosa2011"),
    ),
    "mafft": Method(
        "ASV sequences were aligned with MAFFT {version} in its --auto mode", ("katoh2013",)
    ),
    "fasttree": Method(
        "A tree of the alignment was inferred with FastTree {version} under the GTR model and "
        "midpoint-rooted",
        ("price2010",),
    ),
    "striped-unifrac": Method(
        "UniFrac distances were computed with Striped UniFrac {version}",
        ("lozupone2005", "mcdonald2018"),
    ),
    "rdp-classifier": Method(
        "ASVs were classified with the RDP naive Bayesian classifier {version}", ("wang2007",)
    ),
    "java": Method("The RDP classifier ran on Java {version}"),
    "rocprofv3": Method("GPU kernels were profiled with rocprofv3 {version}"),
    "rocprof": Method("GPU kernels were profiled with rocprof {version}"),
}


def read_bibtex(path: Path = BIBTEX) -> dict[str, tuple[str, dict[str, str]]]:
    """Key -> (the entry's text, its fields) of a BibTeX file written one field a line; none
    where there is no file."""
    if not path.is_file():
        return {}
    return {
        key: (match.group(0), dict(_FIELD.findall(body)))
        for match in _ENTRY.finditer(path.read_text(encoding="utf-8"))
        for key, body in [match.groups()]
    }


def short_cite(fields: dict[str, str]) -> str:
    """'Katoh and Standley 2013', 'Price et al. 2010': the first authors' family names (an
    author in braces: whole) and the year, if any."""
    authors = [a.strip() for a in fields["author"].split(" and ")]
    families = [a.split(",")[0].strip("{}") if not a.startswith("{") else a[1:-1] for a in authors]
    if len(families) > 2 or families[-1] == "others":
        names = f"{families[0]} et al."
    else:
        names = " and ".join(families)
    return f"{names} {fields['year']}" if "year" in fields else names


def short_version(line: str) -> str:
    """The version number of a tool's version line ('v7.505' of 'v7.505 (2022/Apr/10)'), or
    the whole line where it has none (a jar's name and digest)."""
    match = _VERSION.search(line)
    return match.group() if match else line


def cited(rows: Sequence[tuple[str, str, int]]) -> list[tuple[str, str]]:
    """(name, sentence with its versions) of each software of ``rows`` (``software_versions``)
    that has a sentence, in ``METHODS`` order; two versions of one name are both given."""
    versions: dict[str, list[str]] = {}
    for name, version, _ in rows:
        short = short_version(version)
        if name in METHODS and short not in versions.setdefault(name, []):
            versions[name].append(short)
    return [
        (name, method.sentence.format(version=" and ".join(versions[name])))
        for name, method in METHODS.items()
        if name in versions
    ]


def methods_keys(rows: Sequence[tuple[str, str, int]]) -> list[str]:
    """The BibTeX keys the paragraph of ``rows`` cites, in the order it cites them."""
    keys = [key for name, _ in cited(rows) for key in METHODS[name].cite]
    return list(dict.fromkeys(keys))


def methods_html(rows: Sequence[tuple[str, str, int]], citations: str = "") -> str:
    """The paragraph: a sentence per tool that ran (``cited``), each citing its references;
    ``citations``, where given, the BibTeX file of them to link (relative to the page)."""
    sentences = cited(rows)
    if not sentences:
        return ""
    bibtex = read_bibtex()
    parts = []
    for name, sentence in sentences:
        keys = [key for key in METHODS[name].cite if key in bibtex]
        cites = "; ".join(short_cite(bibtex[key][1]) for key in keys)
        parts.append(html.escape(sentence + (f" ({cites})" if cites else "")))
    link = f" <a href='{html.escape(citations)}'>{html.escape(citations)}</a>" if citations else ""
    return (
        f"<p class=methods><b>Methods.</b> {'. '.join(parts)}.</p>"
        f"<p class=note>References: docs/citations.md of aam-hpc (cite aam-hpc itself by its "
        f"CITATION.cff); the BibTeX of those above:{link or ' docs/citations.bib'}.</p>"
    )


def methods_bibtex(rows: Sequence[tuple[str, str, int]]) -> str:
    """The BibTeX entries the paragraph of ``rows`` cites, in citation order."""
    bibtex = read_bibtex()
    entries = [bibtex[key][0] for key in methods_keys(rows) if key in bibtex]
    return "% The references of the landing page's Methods paragraph\n\n" + "\n".join(entries)
