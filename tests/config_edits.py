"""Every key of the workflow's config schema that a config can hold, and values that change it:
the cases of tests/test_config_reruns.py, generated from workflow/schemas (never a hand list).

``edits(config)`` walks the schema beside a config: each dataset and run the config names, every
section and option, features left off (a null object, ``pretrain: none``), and for each key
candidate values (the schema's ``examples``, ``enum``, its type's neighbours of the current
value, names the config defines, a copy of a file) that the schema accepts. Which candidate the
workflow also accepts (its plan refuses some: a metric a regressor cannot score) is for the
workflow to say: the first it parses wins.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "workflow/schemas"
MISSING = object()  # a key the config leaves out


@dataclass(frozen=True)
class FileCopy:
    """A candidate path: a new file, a copy of ``source`` (a file the config names, or any)."""

    source: str


@dataclass
class Edit:
    """A config key (its path of names) and the values to try in its place, in order."""

    key: tuple[str, ...]
    candidates: list[Any]

    @property
    def name(self) -> str:
        return ".".join(self.key)

    @property
    def schema_key(self) -> str:
        """The key as the schema names it: a dataset's or run's name is ``*``."""
        named = self.key[0] in ("datasets", "runs") and len(self.key) > 1
        return ".".join(("*" if named and i == 1 else part) for i, part in enumerate(self.key))


def schema() -> dict:
    """The config schema with every ``$ref`` inlined (run_options.schema.json's too)."""
    main = yaml.safe_load((SCHEMAS / "config.schema.yaml").read_text())
    options = json.loads((SCHEMAS / "run_options.schema.json").read_text())
    documents = {"": main, "run_options.schema.json": options}

    def inline(node: Any, document: dict) -> Any:
        if isinstance(node, list):
            return [inline(item, document) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            file, _, pointer = node["$ref"].partition("#")
            target = documents[file] if file else document
            found = target
            for part in pointer.strip("/").split("/"):
                found = found[part]
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**inline(found, target), **inline(rest, document)}
        return {key: inline(value, document) for key, value in node.items()}

    return inline({k: v for k, v in main.items() if k != "$defs"}, main)


def edits(config: dict, files: list[str]) -> list[Edit]:
    """Every key of ``config``'s schema (in the datasets and runs it names) with its candidate
    values; ``files``: the existing files the config names (a value naming one is edited to a
    copy of it; the first is the source of a new file where one is needed)."""
    names = sorted({*config["datasets"], *config["runs"]})
    return list(_walk(schema(), config, (), names, files))


def _walk(node: dict, value: Any, key: tuple, names: list, files: list) -> Iterator[Edit]:
    branches = node.get("anyOf") or node.get("oneOf") or [node]
    objects = [b for b in branches if "properties" in b]
    named = node.get("additionalProperties") if "propertyNames" in node else None
    if isinstance(named, dict):  # datasets, runs: each one the config names
        for name, item in value.items():
            yield from _walk(named, item, (*key, name), names, files)
        return
    nullable = any(_types(b) & {"null"} or b.get("const") == "none" for b in branches)
    container = value if isinstance(value, dict) else {} if value is MISSING else None
    if objects and container is not None and (value is not MISSING or not nullable):
        for prop, sub in objects[0]["properties"].items():
            yield from _walk(sub, container.get(prop, MISSING), (*key, prop), names, files)
        if not nullable and len(branches) == 1:
            return
    if key:
        current = node.get("default", MISSING) if value is MISSING else value
        yield Edit(key, _valid(node, current, _candidates(node, current, names, files)))


def _types(node: dict) -> set[str]:
    kind = node.get("type", [])
    return {kind} if isinstance(kind, str) else set(kind)


def _valid(node: dict, value: Any, candidates: list) -> list:
    """The candidates the schema accepts and that differ from ``value``, first ones first."""
    validator = jsonschema.Draft202012Validator(node)
    kept: list = []
    for candidate in candidates:
        checked = "x.tsv" if isinstance(candidate, FileCopy) else candidate
        if candidate != value and candidate not in kept and validator.is_valid(checked):
            kept.append(candidate)
    return kept


def _candidates(node: dict, value: Any, names: list, files: list) -> list:
    """Values for a key of schema ``node`` now holding ``value`` (MISSING: left out)."""
    found = list(node.get("examples", []))
    if "const" in node:
        found.append(node["const"])
    found += node.get("enum", [])
    for branch in node.get("anyOf") or node.get("oneOf") or []:
        found += _candidates(branch, value, names, files)
    current = None if value is MISSING else value
    kinds = _types(node)
    if "null" in kinds:
        found.append(None)
    if "boolean" in kinds:
        found += [not current, True, False]
    if kinds & {"integer", "number"}:
        found += _numbers(node, current, integer="number" not in kinds)
    if "string" in kinds:
        found += _strings(current, names, files)
    if "array" in kinds:
        found += _arrays(node, current, names, files)
    grid = node.get("additionalProperties")
    if "object" in kinds and isinstance(grid, dict) and isinstance(current, dict):  # a sweep
        found.append({name: values[:-1] or values for name, values in current.items()})
    if "object" in kinds and "properties" in node:
        required = node.get("required", [])
        first = [
            _valid(
                node["properties"][r],
                MISSING,
                _candidates(node["properties"][r], MISSING, names, files),
            )
            for r in required
        ]
        if all(first):
            found.append({r: values[0] for r, values in zip(required, first, strict=True)})
    return found


def _numbers(node: dict, current: Any, integer: bool) -> list:
    """Neighbours of ``current`` (or of the lower bound) within a few units of it."""
    low = node.get("minimum", node.get("exclusiveMinimum", 0))
    base = current if isinstance(current, int | float) else low
    high = min(node.get("maximum", node.get("exclusiveMaximum", float("inf"))), max(base, 1) * 4)
    if integer:
        return [int(v) for v in (base + 1, base - 1, low + 1, low)]
    return [(base + high) / 2, base / 2, low + (high - low) / 4]


def _strings(current: Any, names: list, files: list) -> list:
    found: list = []
    if current in files:
        found.append(FileCopy(current))
    if isinstance(current, str):
        found.append(current + "-edited")
    return [*found, "edited", *(FileCopy(f) for f in files[:1]), *names]


def _arrays(node: dict, current: Any, names: list, files: list) -> list:
    items = node.get("items", {})
    have = list(current) if isinstance(current, list) else []
    new = _valid(items, MISSING, _candidates(items, MISSING, names, files))
    found = [[*have, item] for item in new if item not in have]
    return found + ([have[:-1]] if have else [])


def _named_files(config: Any, root: Path) -> list[str]:
    """The paths of existing files that ``config`` names (relative to ``root``), in order."""
    if isinstance(config, dict):
        return [f for value in config.values() for f in _named_files(value, root)]
    if isinstance(config, list):
        return [f for value in config for f in _named_files(value, root)]
    return [config] if isinstance(config, str) and (root / config).is_file() else []


def rerun_plans(
    root: Path, config: str, targets: tuple[str, ...], tmp: Path, once: bool = False
) -> dict:
    """``rerun_plan.py``'s answer for every key of the schema in a finished run at ``root`` (its
    config at ``root / config``): each edit's value, the jobs it changes, the dry run's plan.
    ``once``: each key of the schema once (``Edit.schema_key``), in the last dataset or run
    where it has a value that the workflow accepts and that changes a job (a config's later
    runs are those of the features).

    Candidate files are created under ``root / "edited"`` (copies of files the config names);
    the planning process has the variable ``edited`` set, so a candidate ``required_env`` entry
    can name a set variable."""
    base = yaml.safe_load((root / config).read_text())
    files = sorted(set(_named_files(base, root)))
    groups: dict[str, list] = {}
    for number, edit in enumerate(edits(base, files)):
        values = []
        for value in edit.candidates:
            if isinstance(value, FileCopy):
                copy = Path("edited") / f"{number}-{Path(value.source).name}"
                (root / copy).parent.mkdir(exist_ok=True)
                shutil.copyfile(root / value.source, root / copy)
                value = str(copy)
            values.append(value)
        groups.setdefault(edit.schema_key if once else edit.name, []).insert(0, [edit.key, values])
    cases = [[name, group] for name, group in groups.items()]
    path = tmp / "cases.json"
    path.write_text(json.dumps({"config": config, "base": base, "edits": cases}))
    script = Path(__file__).with_name("rerun_plan.py")
    run = subprocess.run(
        [sys.executable, str(script), str(root), str(path), *targets],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "edited": "1"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
