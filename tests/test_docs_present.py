"""The docs state the present: no page names an issue number or a git commit hash (history stays
in git). Scanned: README.md, tests/README.md, benchmarks/README.md and docs/*.md."""

from __future__ import annotations

import re

from checkout import REPO

ISSUE = re.compile(r"\b[Ii]ssues? #?\d+")
# 7 to 12 lowercase hex characters as a whole word, with a digit and a letter: a short commit
# hash. A longer run of hex (an md5 feature ID, a sha256) is no whole word of this length; the
# lookarounds keep out parts of DOIs, URLs, paths and identifiers (10.1038/s41587-..., a-1b2c3d4).
HEX = re.compile(r"(?<![\w./:#-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}(?![\w/-])")
# a hash of digits only where a commit is named ("commit 7856938"), a commit's URL
COMMIT = re.compile(r"\bcommits?[ /](?:of )?[0-9a-f]{7,40}\b")
# a short ASV ID after its taxon ("g__Prevotella e1913f14", docs/taxonomy.md) is no commit
ASV_ID = re.compile(r"\b[a-z]__\w+ ([0-9a-f]{8,12})\b")


def pages() -> list:
    found = [REPO / "README.md", REPO / "tests/README.md", REPO / "benchmarks/README.md"]
    found += sorted((REPO / "docs").glob("*.md"))
    unique = {}
    for page in found:
        unique.setdefault(page.resolve(), page)  # docs/benchmarks.md is benchmarks/README.md
    return list(unique.values())


def hits(text: str) -> list[tuple[int, str]]:
    """(line number, match) of every issue number and commit hash in ``text``."""
    asv_ids = set(ASV_ID.findall(text))
    return [
        (number, found.group(0))
        for number, line in enumerate(text.splitlines(), 1)
        for pattern in (ISSUE, HEX, COMMIT)
        for found in pattern.finditer(line)
        if found.group(0) not in asv_ids
    ]


def test_the_patterns_catch_hashes_and_issue_numbers_only():
    text = "at 9cbea2d; as issue 40 asked; Issue #7; commit 7856938; github.com/o/r/commit/1a2b3c4"
    assert [word for _, word in hits(text)] == [
        "issue 40",
        "Issue #7",
        "9cbea2d",
        "commit 7856938",
        "commit/1a2b3c4",
    ]
    clean = (
        "doi 10.1038/s41587-0a1b2c3d, 1234567 samples, deadbeef, "
        "e1913f14e1913f14e1913f14e1913f14, https://x.org/ab12cd3, a-1b2c3d4e, issues of 2026, "
        "`g__Prevotella e1913f14`, `e1913f14` without a taxon"
    )
    assert hits(clean) == []


def test_no_page_names_an_issue_number_or_a_commit_hash():
    assert len(pages()) >= 15
    found = [
        f"{page.relative_to(REPO)}:{number}: {word}"
        for page in pages()
        for number, word in hits(page.read_text(encoding="utf-8"))
    ]
    assert found == [], "\n".join(found)
