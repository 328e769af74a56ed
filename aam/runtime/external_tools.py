"""The external tools the commands run (MAFFT, FastTree, the RDP classifier on java, Striped
UniFrac, rocprof) and the Snakemake that runs a workflow's job: whether the RDP classifier can
run here (the plan asks, for an optional taxonomy), and the version of each tool a command ran,
collected for its provenance record (``aam.workflow.provenance``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

DEBIAN_JAR = Path("/usr/share/rdp-classifier/rdp_classifier.jar")  # apt-get install rdp-classifier
TOOLS: dict[str, str] = {}  # tool -> its version line, in the order first run
# The version of the Snakemake that runs a workflow's job, exported by the job's shell prefix
# (``aam.workflow.snakefile.job_prefix``): the Snakemake of the job's own node in a SLURM job.
SNAKEMAKE_VERSION = "AAM_SNAKEMAKE_VERSION"


def rdp_unavailable(jar: Path = DEBIAN_JAR) -> list[str]:
    """What running the RDP classifier needs and this machine lacks: ``java`` on PATH, the
    jar."""
    missing = [] if shutil.which("java") else ["java (on PATH)"]
    return missing + ([] if jar.is_file() else [str(jar)])


def record_tool(name: str, version_argv: Sequence[str]) -> None:
    """Remember ``name``'s version: the first line ``version_argv`` prints (stdout or stderr),
    or ``unknown`` where it cannot run."""
    try:
        done = subprocess.run(
            list(version_argv),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        TOOLS[name] = "unknown"
        return
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    TOOLS[name] = lines[0][:120] if lines else "unknown"


def record_package(name: str, distribution: str) -> None:
    """Remember a tool run through its Python package (Striped UniFrac: ``unifrac``) by the
    package's version, or ``unknown``."""
    try:
        TOOLS[name] = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        TOOLS[name] = "unknown"


def record_file(name: str, path: Path) -> None:
    """Remember a tool that states no version (a jar) by its file name and sha256 prefix."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    TOOLS[name] = f"{Path(path).name} sha256:{digest}"


def tools_ran() -> dict[str, str]:
    """Tool -> version: the Snakemake that ran this process (a workflow's job), then each tool
    it ran (``TOOLS``)."""
    snakemake = os.environ.get(SNAKEMAKE_VERSION)
    return {**({"snakemake": snakemake} if snakemake else {}), **TOOLS}
