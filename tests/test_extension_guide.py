"""The extension guide (docs/development.md, "Extending": a loss term, an option, an evaluation
stage, a cluster site) names files that exist: every repository path in backticks, a
placeholder (`aam/commands/<name>.py`) by the folder above it, so the guide cannot drift from
the tree silently."""

from __future__ import annotations

import re
from pathlib import Path

from checkout import REPO

GUIDE = REPO / "docs/development.md"
EXTENSIONS = ("A loss term", "An option", "An evaluation stage", "A cluster site")
CODE = re.compile(r"`([^`\n]+)`")
# A path: words joined by slashes, no space; `<name>` a placeholder; `file::test` a test in it.
PATH = re.compile(r"[\w.<>-]+(?:/[\w.<>-]+)+/?(?:::\w+)?")
WORK = "WORKDIR/"  # the work directory's files (docs/output.md), not the repository's


def extending() -> str:
    """The text of the guide's "Extending" section."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("\n## Extending\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def named_paths(text: str) -> list[str]:
    """The repository paths in backticks in ``text``, in order, each once."""
    found = [code for code in CODE.findall(text) if PATH.fullmatch(code)]
    return list(dict.fromkeys(p.split("::")[0] for p in found if not p.startswith(WORK)))


def exists(path: str, root: Path = REPO) -> bool:
    """``path`` is a file or folder under ``root``; with a placeholder, the folder above it is."""
    parts = path.rstrip("/").split("/")
    for k, part in enumerate(parts):
        if "<" in part:
            return root.joinpath(*parts[:k]).is_dir()
    return root.joinpath(*parts).exists()


def test_the_guide_has_a_list_for_each_extension():
    text = extending()
    for title in EXTENSIONS:
        assert f"\n### {title}\n" in text, title
        part = text.split(f"\n### {title}\n", 1)[1].split("\n### ", 1)[0]
        assert len(re.findall(r"^- `", part, flags=re.M)) >= 4, title  # a line per file


def test_every_path_the_guide_names_exists():
    paths = named_paths(extending())
    assert len(paths) >= 25, paths
    assert "aam/training/losses.py" in paths and "profiles/<site>/config.yaml" in paths
    missing = [path for path in paths if not exists(path)]
    assert missing == [], f"docs/development.md, Extending, names what is not there: {missing}"


def test_the_check_tells_a_missing_path_from_a_placeholder(tmp_path):
    (tmp_path / "aam/commands").mkdir(parents=True)
    (tmp_path / "aam/cli.py").write_text("")
    assert exists("aam/cli.py", tmp_path) and exists("aam/commands/", tmp_path)
    assert exists("aam/commands/<name>.py", tmp_path)
    assert not exists("aam/nothing.py", tmp_path)
    assert not exists("aam/nothing/<name>.py", tmp_path)
    text = "`a/b.py::test_x`, `WORKDIR/logs/<rule>/`, `make schema`, `x.y`, `c/<d>/e.yaml`"
    assert named_paths(text) == ["a/b.py", "c/<d>/e.yaml"]
