"""Provenance records: what produced an output (``provenance.json`` beside each stage's
outputs, written by `aam --provenance FILE <command>`)."""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import aam
from aam.runtime.external_tools import tools_ran
from aam.workflow.fingerprint import PACKAGE_DIR, code_fingerprint

# pyproject.toml's [project] dependencies, one quoted requirement a line (no tomllib: the images'
# python is 3.10); without it beside the package (a copy of aam alone, a wheel), the installed
# aam's Requires-Dist.
PYPROJECT = PACKAGE_DIR.parent / "pyproject.toml"
_DEPENDENCIES = re.compile(r"^dependencies = \[\n(.*?)^\]", re.M | re.S)
_REQUIREMENT = re.compile(r'^\s*"([A-Za-z0-9][A-Za-z0-9._-]*)', re.M)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


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


def normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``biom_format`` is ``biom-format``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_dependencies() -> dict[str, str]:
    """Normalized name -> name of each distribution aam declares it needs (pyproject.toml's
    dependencies beside the package, else the installed aam's, else none; not their own
    dependencies)."""
    if PYPROJECT.is_file():
        block = _DEPENDENCIES.search(PYPROJECT.read_text())
        names = _REQUIREMENT.findall(block.group(1)) if block else []
    else:
        try:
            requires = metadata.requires("aam") or []
        except metadata.PackageNotFoundError:
            requires = []
        names = [_NAME.match(r).group() for r in requires if "extra ==" not in r]
    return {normalized(name): name for name in names}


def imported_packages() -> dict[str, str]:
    """Name -> version of aam and of each distribution it declares (``declared_dependencies``)
    whose top-level module this process imported (what the command ran with, read in the job,
    not in the driver), sorted."""
    modules = {name.partition(".")[0] for name in list(sys.modules)}
    declared = declared_dependencies()
    versions = {"aam": aam.__version__}
    for module, distributions in metadata.packages_distributions().items():
        if module not in modules:
            continue
        for name in distributions:
            if normalized(name) in declared:
                versions[declared[normalized(name)]] = metadata.version(name)
    return dict(sorted(versions.items(), key=lambda item: item[0].lower()))


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
        "packages": imported_packages(),
        "tools": tools_ran(),
        "host": socket.gethostname(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def write_provenance(path: Path, record: dict) -> None:
    """Write ``record`` as JSON atomically."""
    from aam.runtime.atomic import write_json

    write_json(path, record)
