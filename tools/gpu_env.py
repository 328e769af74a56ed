"""The python `make gpu-check` runs `aam gpu-check` with, and the wheels it is made from.

Outside the package: it runs first, with a GPU node's python that may have torch and nothing
else of ours (``GPU_PYTHON``), so it uses the standard library (and ``aam.device_names``, which
needs only torch).

    python tools/gpu_env.py run --venv V --wheelhouse W --device D --out O --checks C ...
        stop with one line where torch sees no GPU; install what the checks import and this
        python lacks from the carried wheels (a venv with ``--system-site-packages``, so the
        machine's torch is used; ``pip install --no-index``); then `aam gpu-check` in it
    python tools/gpu_env.py wheels --dest W [--python-version X.Y] [--carry-mib N]
        (`make gpu-wheels`) download the wheels into parts that each fit one carry
    python tools/gpu_env.py missing
        print what the checks import and this python lacks (exit 1 if anything)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from aam.device_names import no_gpu_line  # noqa: E402 - the checkout's, on any python with torch

# What the checks import besides torch (pip requirement -> import name), from pyproject.toml.
REQUIRED = {
    "numpy>=1.24": "numpy",
    "scipy>=1.10": "scipy",
    "pandas>=2.0": "pandas",
    "biom-format>=2.1.15": "biom",
    "h5py>=3.8": "h5py",
    "tqdm>=4.60": "tqdm",
    "pytest>=8,<9.2": "pytest",
}
# Only the unifrac check's reference, the CPU kernel (without it: skipped, so no GPU pass).
OPTIONAL = {"numba>=0.59": "numba"}
CARRY_MIB = 60.0  # one part of the wheelhouse: under the 64 MiB a GPU session can carry
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
DIST_NAMES = (
    "import importlib.metadata as m, json; "
    "print(json.dumps(sorted({d.metadata['Name'] for d in m.distributions()})))"
)


def missing_modules(with_optional: bool = False) -> list[str]:
    """Import names of ``REQUIRED`` (and ``OPTIONAL``) that this python cannot import."""
    names = [*REQUIRED.values(), *(OPTIONAL.values() if with_optional else ())]
    return [name for name in names if importlib.util.find_spec(name) is None]


def project(wheel: Path) -> str:
    """The normalized project name of a wheel file."""
    return _normalize(wheel.name.split("-")[0])


def _normalize(name: str) -> str:
    """PEP 503: ``biom_format``, ``Biom.Format`` -> ``biom-format``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def split_parts(wheels: list[Path], limit_mib: float) -> list[list[Path]]:
    """Wheels in as few parts of at most ``limit_mib`` each as first-fit decreasing finds."""
    parts: list[list[Path]] = []
    sizes: list[float] = []
    for wheel in sorted(wheels, key=lambda w: -w.stat().st_size):
        mib = wheel.stat().st_size / 2**20
        if mib > limit_mib:
            raise ValueError(f"{wheel.name}: {mib:.1f} MiB, over the {limit_mib:g} MiB of a part")
        fit = next((i for i, used in enumerate(sizes) if used + mib <= limit_mib), None)
        if fit is None:
            parts.append([])
            sizes.append(0.0)
            fit = len(parts) - 1
        parts[fit].append(wheel)
        sizes[fit] += mib
    return parts


def download(specs: list[str], dest: Path, python_version: str) -> list[Path]:
    """`pip download` of ``specs`` and their dependencies as linux x86_64 wheels for
    CPython ``python_version``."""
    platforms = [arg for name in PLATFORMS for arg in ("--platform", name)]
    command = [
        *(sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:"),
        *platforms,
        *("--python-version", python_version, "--implementation", "cp", "-d", str(dest)),
        *specs,
    ]
    subprocess.run(command, check=True)
    return sorted(dest.glob("*.whl"))


def make_wheelhouse(dest: Path, python_version: str, limit_mib: float = CARRY_MIB) -> list[dict]:
    """Download the wheels of ``REQUIRED`` then ``OPTIONAL`` into ``dest``/part-N (each at most
    ``limit_mib``; the optional-only wheels in parts of their own, last); write and return the
    parts as ``dest``/parts.json."""
    with tempfile.TemporaryDirectory(prefix="aam-wheels-") as tmp:
        required = download(list(REQUIRED), Path(tmp) / "required", python_version)
        optional = download(list(OPTIONAL), Path(tmp) / "optional", python_version)
        names = {w.name for w in required}
        extra = [w for w in optional if w.name not in names]
        groups = [(p, False) for p in split_parts(required, limit_mib)]
        groups += [(p, True) for p in split_parts(extra, limit_mib)]
        for old in dest.glob("part-*"):
            shutil.rmtree(old)
        parts = []
        for number, (wheels, is_optional) in enumerate(groups, start=1):
            folder = dest / f"part-{number}"
            folder.mkdir(parents=True)
            for wheel in wheels:
                shutil.move(str(wheel), folder / wheel.name)
            parts.append(
                {
                    "part": folder.name,
                    "mib": round(sum(w.stat().st_size for w in folder.iterdir()) / 2**20, 1),
                    "optional": is_optional,
                    "wheels": sorted(w.name for w in folder.iterdir()),
                }
            )
    (dest / "parts.json").write_text(json.dumps(parts, indent=2) + "\n")
    return parts


def ensure_python(venv: Path, wheelhouse: Path) -> str:
    """A python that imports everything ``REQUIRED``: this one, else ``venv``'s, made with
    ``--system-site-packages`` (and this python's site-packages, when it is a venv) and filled
    with the wheelhouse's wheels (``--no-index --no-deps``, skipping installed projects; what
    was installed stays, so the parts may come one carry at a time)."""
    if not missing_modules():
        return sys.executable
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
        if sys.prefix != sys.base_prefix:  # this python is a venv: its torch is not system site
            site_dir = _run(python, "import sysconfig; print(sysconfig.get_path('purelib'))")
            mine = dict.fromkeys(sysconfig.get_path(k) for k in ("purelib", "platlib"))
            lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in mine)
            Path(site_dir.strip(), "aam-gpu-check-parent.pth").write_text(lines)
    installed = {_normalize(name) for name in json.loads(_run(python, DIST_NAMES))}
    wheels = [w for w in sorted(wheelhouse.glob("**/*.whl")) if project(w) not in installed]
    if wheels:
        pip = [str(python), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps"]
        if subprocess.run([*pip, *map(str, wheels)]).returncode != 0:
            raise SystemExit(f"gpu-check: pip install --no-index from {wheelhouse} failed (above)")
    missing = _run(python, str(Path(__file__).resolve()), "missing", check=False).split()
    if missing:
        raise SystemExit(
            f"gpu-check: {venv} lacks {', '.join(missing)}: carry the {wheelhouse}/part-* that "
            "hold them (`make gpu-wheels` where there is network); what is installed stays"
        )
    return str(python)


def _run(python: Path, *args: str, check: bool = True) -> str:
    """stdout of ``python`` run in the checkout with ``-c ARG`` (or a script and its args)."""
    argv = [str(python), *(args if args[0].endswith(".py") else ("-c", *args))]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=check).stdout


def run(args: argparse.Namespace) -> int:
    """`make gpu-check`: the GPU (or --device cpu), the environment, then `aam gpu-check`."""
    line = no_gpu_line(args.device)
    if line is not None:
        print(f"gpu-check: {line}", file=sys.stderr)
        return 1
    python = ensure_python(args.venv, args.wheelhouse)
    command = [python, "-m", "aam", "gpu-check", "--device", args.device, "--out", str(args.out)]
    command += ["--checks", *args.checks] if args.checks else []
    return subprocess.run(command, cwd=REPO).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/gpu_env.py", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    go = sub.add_parser("run", help="make the python, then `aam gpu-check` in it")
    go.add_argument("--device", default="cuda", help="cuda (CUDA or ROCm), or cpu: a dry run")
    go.add_argument("--out", type=Path, default=REPO / "results" / "gpu-check")
    go.add_argument("--venv", type=Path, default=REPO / ".venv-gpu")
    go.add_argument("--wheelhouse", type=Path, default=REPO / "wheelhouse")
    go.add_argument("--checks", nargs="+", help="checks of `aam gpu-check` (default: all)")
    sub.add_parser("missing", help="print what the checks need and this python lacks")
    wheels = sub.add_parser("wheels", help="download the wheels, in parts of one carry each")
    wheels.add_argument("--dest", type=Path, default=REPO / "wheelhouse")
    wheels.add_argument("--python-version", default=platform.python_version())
    wheels.add_argument("--carry-mib", type=float, default=CARRY_MIB)
    args = parser.parse_args(argv)
    if args.action == "run":
        return run(args)
    if args.action == "missing":
        missing = missing_modules()
        print(" ".join(missing))
        return 1 if missing else 0
    for part in make_wheelhouse(args.dest, args.python_version, args.carry_mib):
        kind = "optional (the unifrac check)" if part["optional"] else "required"
        print(f"{args.dest / part['part']}: {part['mib']} MiB, {kind}: {' '.join(part['wheels'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
