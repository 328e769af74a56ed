"""Code fingerprints and provenance records.

``code_fingerprint(module)`` hashes the parsed code (AST: comments, formatting and mtimes do not
count) of every ``aam`` module that ``module`` imports, directly or not, found by walking the
import statements (function-level ones included). The workflow puts it in each rule's params, so
a rule reruns exactly when code it can run has changed. Standard-library only: the workflow
imports this module on a login node without torch.
"""

from __future__ import annotations

import ast
import hashlib
import os
import platform
import socket
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

PACKAGE = "aam"
PACKAGE_DIR = Path(__file__).resolve().parent


def module_file(name: str) -> Path | None:
    """Source file of ``aam`` module ``name`` (a package's ``__init__.py``), or None."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = PACKAGE_DIR.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(name: str, tree: ast.AST, is_package: bool) -> set[str]:
    """``aam`` modules named by the import statements of module ``name``."""
    found: set[str] = set()
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if module_file(m) is not None}


def import_closure(*entries: str) -> list[str]:
    """Every ``aam`` module that running ``entries`` can import (with their parent packages)."""
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        name = todo.pop()
        if name in seen or module_file(name) is None:
            continue
        seen.add(name)
        path = module_file(name)
        tree = ast.parse(path.read_text(), filename=str(path))
        todo.extend(_imports(name, tree, path.name == "__init__.py"))
        todo.extend(".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 1))
    return sorted(seen)


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` with the docstring of the module and of every class and function removed."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None) if isinstance(node, _DOCUMENTED) else None
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            if isinstance(body[0].value.value, str):
                del body[0]
    return tree


def code_fingerprint(command_module: str) -> str:
    """16-hex-digit hash of the parsed code that `python -m aam <command>` runs: the command's
    module and the entry point (``aam.__main__`` -> ``aam.cli``), with all they import.
    Comments, formatting and docstrings do not count."""
    digest = hashlib.sha256()
    for name in import_closure(command_module, "aam.__main__"):
        path = module_file(name)
        tree = _without_docstrings(ast.parse(path.read_text(), filename=str(path)))
        digest.update(name.encode())
        digest.update(ast.dump(tree).encode())
    return digest.hexdigest()[:16]


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(PACKAGE_DIR), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _torch_facts() -> dict[str, str | None]:
    """torch / ROCm / CUDA versions and the device, without importing torch if unused."""
    try:
        facts: dict[str, str | None] = {"torch": metadata.version("torch")}
    except metadata.PackageNotFoundError:
        return {"torch": None}
    torch = sys.modules.get("torch")
    if torch is not None:
        facts["rocm"] = torch.version.hip
        facts["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            facts["device"] = torch.cuda.get_device_name(0)
    facts.setdefault("device", _cpu_name())
    return facts


def _cpu_name() -> str:
    """The CPU model (Linux /proc/cpuinfo), else the machine architecture."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance_record(argv: list[str], entry: str, started: datetime) -> dict:
    """What produced an output: code, command line, software, device, host and time."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    image = os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER")
    return {
        "command": ["aam", *argv],
        "code_fingerprint": code_fingerprint(entry),
        "git_commit": commit,
        "git_dirty": None if status is None else bool(status),
        "container_image": image,
        "python": platform.python_version(),
        **_torch_facts(),
        "host": socket.gethostname(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def write_provenance(path: Path, record: dict) -> None:
    """Write ``record`` as JSON atomically."""
    from aam.atomic import write_json

    write_json(path, record)
