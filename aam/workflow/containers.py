"""Checks of Singularity/Apptainer definition files, and image naming.

The cluster images (``containers/*.def``) hold dependencies only, never ``aam`` itself: the
workflow runs the checked-out source, so a code change does not rebuild the image. An image is
named after the content hash of its ``.def`` (``aam-<platform>-<hash>.sif``), so editing the
``.def`` gives a new image path, which rebuilds the image and reruns the stages that use it.

``lint_def`` parses the file the way ``singularity build`` splits it (header keywords, then
``%section`` blocks; a ``Bootstrap:`` line at the start of a line opens another stage of a
multi-stage build) and reports what would fail or silently go wrong: a missing or duplicate
``Bootstrap:``, an unsupported bootstrap agent, a missing ``From:`` or an unpinned docker tag,
unknown sections, a missing or empty ``%post``, the ``aam`` source copied into the image
(``%files``), a missing ``%test`` (whose commands check that the image holds no ``aam``).
Standard library only: the workflow imports this on a login node.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from aam.errors import InputError

BOOTSTRAP_AGENTS = frozenset({"docker", "localimage", "library", "oras", "docker-archive", "shub"})
SECTIONS = frozenset(
    {
        "setup",
        "files",
        "environment",
        "post",
        "runscript",
        "startscript",
        "test",
        "labels",
        "help",
        "arguments",
    }
)
# SCI-F app sections (`%appinstall NAME` ...).
APP_SECTIONS = frozenset(
    {"appfiles", "appinstall", "appenv", "apphelp", "applabels", "apprun", "appstart", "apptest"}
)
# Agents whose From: names a registry image (pin a tag or digest there).
_REGISTRY_AGENTS = frozenset({"docker", "library", "oras"})
# Agents whose From: is a path on the build host.
_PATH_AGENTS = frozenset({"localimage", "docker-archive"})
HASH_LENGTH = 12

_SECTION = re.compile(r"%([A-Za-z]\w*)(.*)$")
_HEADER = re.compile(r"([A-Za-z][\w-]*)\s*:(.*)$")
_PLATFORM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class Problem(NamedTuple):
    """One finding: 1-based line number and message."""

    line: int
    message: str


class _Section(NamedTuple):
    name: str
    line: int
    body: list[tuple[int, str]]


class _Stage(NamedTuple):
    header: list[tuple[int, str, str]]  # (line, keyword lowercased, value)
    sections: list[_Section]
    line: int


def lint_def(path: str | Path, *, check_paths: bool = False) -> list[str]:
    """Problems of the definition file ``path`` as ``"FILE:LINE: message"`` strings.

    An unreadable file raises InputError.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read: {err}") from None
    return [f"{path}:{p.line}: {p.message}" for p in lint_text(text, check_paths=check_paths)]


def lint_text(text: str, *, check_paths: bool = False) -> list[Problem]:
    """Problems of a definition file's text, in line order."""
    problems: list[Problem] = []
    stages, stray = _parse(text)
    problems += stray
    if not stages:
        problems.append(Problem(1, "no 'Bootstrap:' line (empty header)"))
    for stage in stages:
        problems += _check_header(stage, check_paths)
        for section in stage.sections:
            problems += _check_section(section)
    sections = [section for stage in stages for section in stage.sections]
    if stages and not any(s.name == "post" for s in sections):
        problems.append(
            Problem(stages[-1].line, "no %post section; the image must install its dependencies")
        )
    if stages and not any(s.name == "test" for s in sections):
        problems.append(
            Problem(stages[-1].line, "no %test section; add one that imports torch and the deps")
        )
    return sorted(problems)


def _parse(text: str) -> tuple[list[_Stage], list[Problem]]:
    """Split into stages (header keywords, then sections); also problems of stray header lines.

    A ``Bootstrap:`` line after a stage's sections opens the next stage (multi-stage builds).
    """
    stages: list[_Stage] = []
    stray: list[Problem] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        section = _SECTION.match(line) if line.startswith("%") else None
        in_body = bool(stages and stages[-1].sections)
        header = _HEADER.match(line if in_body else line.lstrip())
        if in_body and not section:
            if header and header.group(1).lower() == "bootstrap":
                stages.append(_Stage([], [], number))
                stages[-1].header.append((number, "bootstrap", header.group(2).strip()))
            else:
                stages[-1].sections[-1].body.append((number, line))
            continue
        if section:
            if not stages:
                stages.append(_Stage([], [], number))
            stages[-1].sections.append(_Section(section.group(1).lower(), number, []))
        elif not line.strip() or line.lstrip().startswith("#"):
            continue
        elif header:
            if not stages:
                stages.append(_Stage([], [], number))
            stages[-1].header.append((number, header.group(1).lower(), header.group(2).strip()))
        else:
            stray.append(Problem(number, f"expected 'Keyword: value' in the header, got {line!r}"))
    return stages, stray


def _check_header(stage: _Stage, check_paths: bool) -> list[Problem]:
    problems = []
    bootstraps = [(n, v) for n, key, v in stage.header if key == "bootstrap"]
    froms = [(n, v) for n, key, v in stage.header if key == "from"]
    if not bootstraps:
        problems.append(Problem(stage.line, "no 'Bootstrap:' line in the header"))
    for number, _ in bootstraps[1:]:
        problems.append(
            Problem(number, f"duplicate 'Bootstrap:' (first on line {bootstraps[0][0]})")
        )
    agent = bootstraps[0][1].lower() if bootstraps else ""
    if bootstraps and agent not in BOOTSTRAP_AGENTS:
        allowed = ", ".join(sorted(BOOTSTRAP_AGENTS))
        problems.append(
            Problem(bootstraps[0][0], f"Bootstrap {agent or '(empty)'!r} is not one of: {allowed}")
        )
    for number, _ in froms[1:]:
        problems.append(Problem(number, "duplicate 'From:'"))
    if not froms:
        problems.append(Problem(stage.line, "no 'From:' line: the base image is not named"))
        return problems
    number, base = froms[0]
    if not base:
        problems.append(Problem(number, "'From:' has no value"))
    elif agent in _REGISTRY_AGENTS:
        name = base.split("://", 1)[-1].rsplit("/", 1)[-1]
        if "@" not in name and (":" not in name or name.endswith(":latest")):
            problems.append(
                Problem(number, f"From: {base!r} is not pinned; name a tag (not latest) or digest")
            )
    elif agent in _PATH_AGENTS and check_paths and not Path(base).exists():
        problems.append(Problem(number, f"From: {base} does not exist on this machine"))
    return problems


def _check_section(section: _Section) -> list[Problem]:
    name = section.name
    if name not in SECTIONS and name not in APP_SECTIONS:
        return [Problem(section.line, f"unknown section %{name}")]
    problems = []
    if name == "post":
        if not any(text.strip() and not text.lstrip().startswith("#") for _, text in section.body):
            problems.append(Problem(section.line, "%post is empty"))
    if name == "files":
        for number, text in section.body:
            fields = text.split()
            if fields and not fields[0].startswith("#") and _is_aam_source(fields[0]):
                problems.append(
                    Problem(number, f"%files copies the aam source ({fields[0]}) into the image")
                )
    return problems


def _is_aam_source(arg: str) -> bool:
    """`.`, `./`, `..`, or a path / git URL whose last component is aam or aam-*."""
    stripped = arg.rstrip("/")
    if stripped in (".", ".."):
        return True
    last = stripped.rsplit("/", 1)[-1].split("@", 1)[0].removesuffix(".git").lower()
    return last == "aam" or last.startswith("aam-") or last.startswith("aam[")


def def_hash(path: str | Path) -> str:
    """First 12 hex digits of the sha256 of the file's bytes."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    return hashlib.sha256(data).hexdigest()[:HASH_LENGTH]


def image_name(platform: str, def_path: str | Path) -> str:
    """``aam-<platform>-<def hash>.sif``: a new name whenever the .def changes."""
    if not _PLATFORM.fullmatch(platform):
        raise InputError(
            f"container platform {platform!r}: use letters, digits, '.', '_' or '-' "
            "(e.g. cosmos or lumi)"
        )
    return f"aam-{platform}-{def_hash(def_path)}.sif"


def built_image(container: Mapping[str, object], repo: str | Path) -> Path | None:
    """Path of the image the workflow builds for a ``container`` config section, or None.

    ``container`` has ``platform`` (None: no build) and ``dir``; the definition file is
    ``<repo>/containers/<platform>.def``.
    """
    platform = container.get("platform")
    if not platform:
        return None
    definition = Path(repo) / "containers" / f"{platform}.def"
    return Path(str(container.get("dir") or ".")) / image_name(str(platform), definition)
