"""The checks of `aam gpu-check` (``aam.commands.gpu_check``): what aam does on this machine's
GPU (CUDA or ROCm), each check's numbers and status, and the report (``report.json`` +
``report.md``: pass/fail, numbers, device, torch, CUDA/HIP). The ``gpu``-marked tests
(tests/test_gpu_device.py) run every check of ``CHECKS`` once through ``run_checks``.

On the CPU (``--device cpu``) the same checks are a dry run of the plumbing, labelled so in the
report and never a GPU pass.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]  # the checkout: tests, data, golden files
DEMO = REPO / "data" / "demo"
ORAL = REPO / "data" / "oral"
GPU_TESTS = "tests/test_gpu_device.py"
FORMAT = "aam-gpu-check-v1"
CHECKS = ("golden", "unifrac", "training", "auto_batch", "doctor", "profile", "throughput")
SUBSET = 48  # demo samples of the training checks
BENCH_SAMPLES = 400  # benchmarks/train_throughput.py: its seeded oral subset and model
BENCH_MODEL = (
    "--embedding-dim 128 --attention-heads 4 --layers 2 --max-bp 100 --token-limit 256 "
    "--batch-size 8"
).split()
UNIFRAC_METRICS = ("unweighted", "weighted_normalized", "weighted_unnormalized", "generalized")
UNIFRAC_TOL = {"float64": 1e-9, "float32": 1e-4}  # max |device - CPU| of a distance
NOT_SELECTED = "not selected"
NOT_YET_RUN = "not run: the run stopped before it"


class CheckFailed(Exception):
    """A check ran and its result is wrong: status ``fail`` with this one-line message;
    ``stderr``: the whole stderr of the `aam` command that failed, if one did."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


class CheckSkipped(Exception):
    """A check cannot run here (a missing optional package): status ``skipped``, not a pass."""


# -- environment ----------------------------------------------------------------------------
def environment(device: Any) -> dict[str, Any]:
    """Device name, torch, CUDA/HIP versions and the machine, for the report header."""
    import torch

    gpu = device.type == "cuda"
    props = torch.cuda.get_device_properties(device) if gpu else None
    return {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if gpu else "cpu",
        "arch": getattr(props, "gcnArchName", None) if gpu else None,
        "memory_mb": props.total_memory / 2**20 if gpu else None,
        "bf16": bool(torch.cuda.is_bf16_supported()) if gpu else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numba": importlib.util.find_spec("numba") is not None,
        "commit": _commit(),
    }


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
        )
    except OSError:
        return None
    return out.stdout.strip() or None


# -- the checks -----------------------------------------------------------------------------
@dataclass
class Context:
    """What every check gets: the device, a work directory, the report directory."""

    device: Any  # torch.device
    work: Path
    out: Path
    model_flags: list[str]
    timeout: float = 900.0
    _data: dict[str, Path] = field(default_factory=dict)

    @property
    def dev(self) -> str:
        return str(self.device)

    def aam(self, *args: Any) -> str:
        """Run `aam ARGS` from the checkout; its stderr, or CheckFailed with its error line."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *_pythonpath()])}
        argv = [sys.executable, "-m", "aam", *map(str, args)]
        try:
            proc = subprocess.run(
                argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=self.timeout
            )
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"aam {args[0]} timed out after {self.timeout:.0f} s") from None
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()] or ["(no stderr)"]
            errors = [ln for ln in lines if "error" in ln.lower()] or lines
            line = f"aam {args[0]} exited {proc.returncode}: {errors[-1][:300]}"
            raise CheckFailed(line, proc.stderr)
        return proc.stderr

    def data(self) -> dict[str, Path]:
        """A seeded demo subset with its UniFrac matrix (`aam unifrac` on the device)."""
        if not self._data:
            root = self.work / "data"
            table = subset_table(DEMO / "table.biom", SUBSET, root / "table.biom")
            unifrac = root / "unifrac.h5"
            self.aam(
                *("unifrac", "--table", table, "--tree", DEMO / "tree.nwk"),
                *("--metric", "unweighted", "--output", unifrac, "--device", self.dev),
            )
            self._data.update(table=table, unifrac=unifrac, metadata=DEMO / "metadata.tsv")
        return self._data


def _pythonpath() -> list[str]:
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def subset_table(source: Path, samples: int, output: Path, seed: int = 0) -> Path:
    """A seeded ``samples``-sample subset of a BIOM table (empty ASVs dropped)."""
    import biom
    import numpy as np

    table = biom.load_table(str(source))
    ids = np.random.default_rng(seed).choice(table.ids(), samples, replace=False)
    table = table.filter(ids, inplace=False).remove_empty(axis="observation")
    output.parent.mkdir(parents=True, exist_ok=True)
    with biom.util.biom_open(str(output), "w") as handle:
        table.to_hdf5(handle, "aam gpu-check")
    return output


def history(out_dir: Path) -> dict[str, float]:
    """Mean samples/s (training steps only, as benchmarks/train_throughput.py) and the last
    training loss of a run's history.tsv; CheckFailed when a loss is not finite."""
    import pandas as pd

    frame = pd.read_csv(out_dir / "history.tsv", sep="\t")
    losses = frame["train_loss"].to_numpy(dtype=float)
    if not all(math.isfinite(x) for x in losses):
        raise CheckFailed(f"{out_dir.name}: non-finite train_loss {losses.tolist()}")
    return {
        "samples_per_s": float(frame["samples_per_s"].mean()),
        "train_loss": float(losses[-1]),
        "peak_memory_mb": float(frame["peak_memory_mb"].max()),
    }


def check_golden(ctx: Context) -> dict[str, Any]:
    """Golden-file compare (tests/golden) for every backend x fp32/bf16 on the device."""
    from aam.diagnostics import golden

    report = golden.compare_golden(REPO / "tests" / "golden", ctx.device)
    golden.write_report(report, ctx.out / "golden.json")
    combos = report["combinations"]
    numbers = {
        f"{c['backend']}/{c['precision']}": {
            "status": c["status"],
            "worst_max_abs": c["worst_max_abs"],
            "worst_max_rel": c["worst_max_rel"],
        }
        for c in combos
    }
    precisions = {c["precision"] for c in combos if c["status"] == "pass"}
    if not report["passed"]:
        raise CheckFailed(golden.failure_message(report))
    if precisions != {"fp32", "bf16"}:
        raise CheckFailed(f"passed only in {sorted(precisions)}, not fp32 and bf16")
    return {"numbers": numbers, "message": "details: golden.json"}


def check_unifrac(ctx: Context) -> dict[str, Any]:
    """The torch kernel on the device against the CPU (numba) kernel, every metric in float64
    and float32, on the 400 demo samples."""
    import numpy as np

    from aam.data.table import load_counts
    from aam.unifrac.engines import compute_unifrac
    from aam.unifrac.tree import load_tree

    if importlib.util.find_spec("numba") is None:
        raise CheckSkipped("numba is not installed: carry the wheelhouse part with numba")
    counts, tree = load_counts(DEMO / "table.biom"), load_tree(DEMO / "tree.nwk")
    numbers: dict[str, Any] = {"samples": len(counts.sample_ids)}
    bad = []
    for dtype, tol in UNIFRAC_TOL.items():
        kind = np.dtype(dtype).type
        metrics = list(UNIFRAC_METRICS)
        got = compute_unifrac(counts, tree, metrics, device=ctx.dev, dtype=kind)
        want = compute_unifrac(counts, tree, metrics, device="cpu", dtype=kind)
        for metric in UNIFRAC_METRICS:
            diff = float(np.abs(got[metric] - want[metric]).max())
            numbers[f"{metric}/{dtype}_max_abs"] = diff
            if not diff <= tol:  # NaN fails too
                bad.append(f"{metric}/{dtype} {diff:.3g} > {tol:g}")
    bad += _batch_engines(counts, tree, ctx.device, numbers)
    bad += _device_sums(ctx, numbers)
    if bad:
        raise CheckFailed("device != CPU kernel: " + ", ".join(bad))
    return {"numbers": numbers, "message": "device kernels = CPU kernels (matrix and batches)"}


def _device_sums(ctx: Context, numbers: dict[str, Any]) -> list[str]:
    """The ranks' partial sums added on a device group (``sum_shares`` on NCCL/RCCL, a world of
    this one process): in place on the GPU, no host copy; and on gloo, through the host; what
    is wrong."""
    import torch
    import torch.distributed as dist

    from aam.training.parallel.distributed import sum_shares

    if ctx.device.type != "cuda":
        return []
    store = dist.FileStore(str(ctx.work / "sums.store"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=ctx.device)
    try:
        share = torch.rand(2048 + 2048 * 2049 // 2, dtype=torch.float64, device=ctx.device)
        bad = []
        for backend in ("nccl", "gloo"):
            given = share.clone()
            summed = sum_shares(given, dist.new_group(backend=backend))
            in_place = summed.data_ptr() == given.data_ptr()
            numbers[f"pair_sums/{backend}_in_place"] = in_place
            if in_place != (backend == "nccl") or summed.device != share.device:
                bad.append(f"pair sums on {backend}: in place {in_place}, on {summed.device}")
            if not summed.equal(share):
                bad.append(f"pair sums on {backend} != the share")
        return bad
    finally:
        dist.destroy_process_group()


def _batch_engines(counts: Any, tree: Any, device: Any, numbers: dict[str, Any]) -> list[str]:
    """The training batches' UniFrac on the device (``--unifrac-engine gpu``, whole and from 4
    ranks' node shares, each forming its own 64 rows) against the CPU engine, every metric and
    precision, on a seeded batch of 256 demo samples; what is out of tolerance."""
    import numpy as np
    import torch

    from aam.unifrac.batch import BatchUniFrac, ranks_in_one_process
    from aam.unifrac.batch_device import DeviceBatchUniFrac

    csc = counts.matrix.tocsc()
    size, world = 256, 4
    batch = csc[:, np.random.default_rng(0).choice(csc.shape[1], size, replace=False)]
    reads = (batch.indptr, batch.indices, batch.data)
    bad = []
    for dtype, tol in UNIFRAC_TOL.items():
        for metric in UNIFRAC_METRICS:
            host = BatchUniFrac.for_table(
                counts, tree, metric, alpha=0.5, dtype=np.dtype(dtype).type
            )
            want = host.distances(*reads)
            on_device = DeviceBatchUniFrac.on(host, device)
            whole = on_device.distances(*reads)
            shares = [
                DeviceBatchUniFrac.on(host.node_share(r, world, device=True), device)
                for r in range(world)
            ]
            each = size // world
            rows = [slice(each * r, each * (r + 1)) for r in range(world)]  # its own samples
            ranks = ranks_in_one_process(
                [
                    lambda combine, s=s, mine=mine: s.distances(*reads, combine, mine)
                    for s, mine in zip(shares, rows, strict=True)
                ]
            )
            stacked = torch.cat(ranks).cpu().numpy()
            diff = float(max(np.abs(r - want).max() for r in [whole.cpu().numpy(), stacked]))
            numbers[f"batch/{metric}/{dtype}_max_abs"] = diff
            if not diff <= tol:
                bad.append(f"batch {metric}/{dtype} {diff:.3g} > {tol:g}")
    return bad


def backends(device: Any) -> list[str]:
    """The attention backends of the device (``aam.models.layers.available_backends``)."""
    from aam.models.layers import available_backends

    return available_backends(device)


def check_training(ctx: Context) -> dict[str, Any]:
    """`aam pretrain` + `aam finetune` (one epoch of the demo subset: a few steps) with every
    attention backend; ``flash`` refusing the padding masks is ``unsupported``, not a fail."""
    from aam.models.layers import FLASH_REFUSES_MASKS

    data = ctx.data()
    numbers: dict[str, Any] = {}
    common = [*ctx.model_flags, "--epochs", "1", "--batch-size", "8", "--device", ctx.dev]
    common += ["--no-progress", "--checkpoint-every-minutes", "0", "--table", data["table"]]
    for backend in backends(ctx.device):
        pre, fine = ctx.work / f"pretrain-{backend}", ctx.work / f"finetune-{backend}"
        flags = [*common, "--attn-implementation", backend]
        try:
            ctx.aam("pretrain", "--unifrac", data["unifrac"], "--output-dir", pre, *flags)
            ctx.aam(
                *("finetune", "--metadata", data["metadata"], "--target-column", "age"),
                *("--pretrained-encoder", pre / "encoder.pt", "--allow-missing-samples"),
                *("--output-dir", fine, *flags),
            )
        except CheckFailed as err:
            if backend == "flash" and FLASH_REFUSES_MASKS in err.stderr:
                numbers[backend] = {"status": "unsupported", "message": str(err)[:200]}
                continue
            raise
        numbers[backend] = {"pretrain": history(pre), "finetune": history(fine)}
    return {"numbers": numbers, "message": f"backends {', '.join(numbers)}"}


AUTO_LINE = re.compile(r"--batch-size auto: (\d+) .*peak MB by batch size ([^;]*); budget (\d+)")


def check_auto_batch(ctx: Context) -> dict[str, Any]:
    """`aam pretrain --batch-size auto`: the probe's memory curve, its choice (capped by the
    subset's train samples) and the uncapped choice for the budget; the run's peak must fit."""
    from aam.training.auto_batch import CPU_BATCH_SIZE, choose_batch_size

    data = ctx.data()
    out = ctx.work / "auto-batch"
    log = ctx.aam(
        *("pretrain", "--unifrac", data["unifrac"], "--table", data["table"]),
        *(*ctx.model_flags, "--epochs", "1", "--batch-size", "auto", "--device", ctx.dev),
        *("--no-progress", "--checkpoint-every-minutes", "0", "--output-dir", out),
    )
    run = history(out)
    if ctx.device.type != "cuda":
        if f"the default batch size {CPU_BATCH_SIZE}" not in log:
            raise CheckFailed("no `--batch-size auto: on a CPU` line in the log")
        return {"numbers": {"chosen": CPU_BATCH_SIZE, **run}, "message": "CPU: the default"}
    match = AUTO_LINE.search(log)
    if match is None:
        raise CheckFailed("no `--batch-size auto: N ...` line in the log")
    curve = [tuple(float(x) for x in p.split(": ")) for p in match.group(2).split(", ")]
    budget = float(match.group(3))
    numbers = {
        "chosen": int(match.group(1)),
        "curve_mb": {str(int(b)): m for b, m in curve},
        "budget_mb": budget,
        "uncapped_choice": choose_batch_size([(int(b), m) for b, m in curve], budget),
        **run,
    }
    if not run["peak_memory_mb"] <= budget:
        raise CheckFailed(f"peak {run['peak_memory_mb']:.0f} MB over the {budget:.0f} MB budget")
    return {"numbers": numbers, "message": f"chose {numbers['chosen']}"}


def check_doctor(ctx: Context) -> dict[str, Any]:
    """`aam doctor`: every backend correct with padding masks or honestly unsupported."""
    from aam.diagnostics.doctor import MAX_ERROR

    path = ctx.out / "doctor.json"
    ctx.aam("doctor", "--device", ctx.dev, "--output", path)
    report = json.loads(path.read_text())
    numbers = {row["backend"]: row for row in report["backends"]}
    numbers["recommendation"] = report["recommendation"]
    wrong = [
        row["backend"]
        for row in report["backends"]
        if not isinstance(row.get("masked"), str)
        and not (isinstance(row.get("masked"), float) and row["masked"] < MAX_ERROR)
    ]
    if wrong or report["recommendation"].startswith("no attention backend"):
        raise CheckFailed(f"backends wrong with padding masks: {wrong}; {report['recommendation']}")
    return {"numbers": numbers, "message": report["recommendation"]}


def check_profile(ctx: Context) -> dict[str, Any]:
    """`aam profile`: kernel table + memory/throughput sweep over every backend, batch 4 and 8."""
    data = ctx.data()
    out = ctx.work / "profile"
    ctx.aam(
        *("profile", "--table", data["table"], "--unifrac", data["unifrac"]),
        *("--output-dir", out, "--steps", "2", "--batch-sizes", "4", "8", "--device", ctx.dev),
        *ctx.model_flags,
    )
    rows = json.loads((out / "throughput.json").read_text())["rows"]
    numbers = {f"{r['backend']}/{r['batch_size']}": r.get("samples_per_s") for r in rows}
    failed = {f"{r['backend']}/{r['batch_size']}": r["error"] for r in rows if r.get("error")}
    if failed and set(failed) != {k for k in failed if k.startswith("flash/")}:
        raise CheckFailed(f"profile steps failed: {failed}")
    numbers["kernels_rows"] = sum(1 for _ in (out / "kernel_stats.csv").open()) - 1
    return {"numbers": numbers, "message": "samples/s by backend/batch size"}


def check_throughput(ctx: Context) -> dict[str, Any]:
    """UniFrac of data/oral on the device vs the CPU kernel, and `aam pretrain` samples/s with
    benchmarks/train_throughput.py's model on its seeded 400-sample oral subset (1 epoch)."""
    import numpy as np

    from aam.data.table import load_counts
    from aam.unifrac.engines import compute_unifrac
    from aam.unifrac.tree import load_tree

    counts, tree = load_counts(ORAL / "table.biom"), load_tree(ORAL / "tree.nwk")
    n = len(counts.sample_ids)
    numbers: dict[str, Any] = {"unifrac_samples": n}
    for metric in ("unweighted", "weighted_normalized"):
        for dev in dict.fromkeys([ctx.dev, "cpu"]):
            if dev == "cpu" and importlib.util.find_spec("numba") is None:
                continue
            start = time.perf_counter()
            compute_unifrac(counts, tree, [metric], device=dev, dtype=np.float32)
            numbers[f"unifrac_{metric}_{'cpu' if dev == 'cpu' else 'device'}_samples_per_s"] = n / (
                time.perf_counter() - start
            )
    table = subset_table(ORAL / "table.biom", BENCH_SAMPLES, ctx.work / "oral" / "table.biom")
    unifrac = ctx.work / "oral" / "unifrac.h5"
    ctx.aam(
        *("unifrac", "--table", table, "--tree", ORAL / "tree.nwk", "--metric", "unweighted"),
        *("--output", unifrac, "--device", ctx.dev),
    )
    out = ctx.work / "throughput-pretrain"
    # eager: one short epoch would time the compiling (the training check runs the default)
    ctx.aam(
        *("pretrain", "--table", table, "--unifrac", unifrac, *BENCH_MODEL, "--epochs", "1"),
        *("--device", ctx.dev, "--no-progress", "--checkpoint-every-minutes", "0"),
        *("--output-dir", out, "--compile", "off"),
    )
    numbers["pretrain"] = history(out)
    return {"numbers": numbers, "message": "UniFrac and pretraining samples/s"}


CHECK_FUNCTIONS: dict[str, Callable[[Context], dict[str, Any]]] = {
    "golden": check_golden,
    "unifrac": check_unifrac,
    "training": check_training,
    "auto_batch": check_auto_batch,
    "doctor": check_doctor,
    "profile": check_profile,
    "throughput": check_throughput,
}


# -- the report -----------------------------------------------------------------------------
def non_finite(value: Any, path: str = "") -> list[str]:
    """Paths of the NaN/inf numbers inside ``value``."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [path or "value"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in non_finite(v, f"{path}.{k}".lstrip("."))]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in non_finite(v, f"{path}[{i}]")]
    return []


def run_check(name: str, ctx: Context) -> dict[str, Any]:
    """One check as a report section: status, one-line message, seconds, numbers.
    A non-finite number fails a check that would have passed."""
    start = time.perf_counter()
    section: dict[str, Any] = {"status": "pass", "message": "", "numbers": {}}
    try:
        section.update(CHECK_FUNCTIONS[name](ctx))
    except CheckFailed as err:
        section.update(status="fail", message=str(err))
    except CheckSkipped as err:
        section.update(status="skipped", message=str(err))
    except Exception as err:  # noqa: BLE001 - a crashing check is reported, the rest still run
        section.update(status="error", message=f"{type(err).__name__}: {_one_line(err)}")
    bad = non_finite(section["numbers"])
    if section["status"] == "pass" and bad:
        section.update(status="fail", message=f"non-finite numbers: {', '.join(bad[:5])}")
    section["seconds"] = round(time.perf_counter() - start, 2)
    return section


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())[:300]


def run_checks(
    device: Any, out: Path, model_flags: list[str], checks: Iterable[str] = CHECKS
) -> dict[str, Any]:
    """Run ``checks`` on ``device``, write ``out``/report.json and report.md; the report.
    Checks not asked for are ``skipped`` sections; the run is a GPU pass only when every check
    passed on a GPU."""
    chosen = list(checks)
    unknown = sorted(set(chosen) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown checks {unknown}; choose from {list(CHECKS)}")
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "format": FORMAT,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dry_run": device.type != "cuda",
        "environment": environment(device),
        "checks": {},
    }
    for name in CHECKS:
        message = NOT_YET_RUN if name in chosen else NOT_SELECTED
        report["checks"][name] = {"status": "skipped", "message": message, "numbers": {}}
        report["checks"][name]["seconds"] = 0.0
    _conclude(report, out)
    with tempfile.TemporaryDirectory(prefix="aam-gpu-check-") as work:
        ctx = Context(device, Path(work), out, model_flags)
        for name in [n for n in CHECKS if n in chosen]:  # report rewritten: a killed run keeps them
            report["checks"][name] = run_check(name, ctx)
            _conclude(report, out)
    return report


def _conclude(report: dict[str, Any], out: Path) -> None:
    """Set the report's passed, gpu_pass and verdict from its checks so far; write it."""
    report["passed"] = all(c["status"] == "pass" for c in report["checks"].values())
    report["gpu_pass"] = report["passed"] and not report["dry_run"]
    report["verdict"] = verdict(report)
    write_report(report, out)


def verdict(report: dict[str, Any]) -> str:
    """One line: GPU PASS, FAIL (naming the checks), INCOMPLETE (checks not run) or DRY RUN."""
    env, checks = report["environment"], report["checks"]
    unrun = [k for k, c in checks.items() if c["message"] in (NOT_SELECTED, NOT_YET_RUN)]
    bad = [f"{k} ({c['status']})" for k, c in checks.items() if c["status"] != "pass"]
    bad = [b for b in bad if b.split()[0] not in unrun]
    summary = f"{len(checks) - len(unrun) - len(bad)}/{len(checks)} checks passed"
    summary += "".join(
        f"; {label}: {', '.join(names)}"
        for label, names in (("not passed", bad), ("not run", unrun))
        if names
    )
    if report["dry_run"]:
        return f"DRY RUN on {env['device']} ({summary}): plumbing only, not a GPU pass"
    where = f"{env['device_name']}, torch {env['torch']}, CUDA {env['cuda']}, HIP {env['hip']}"
    word = "FAIL" if bad else "INCOMPLETE" if unrun else "GPU PASS"
    return f"{word} on {where}: {summary}"


def write_report(report: dict[str, Any], out: Path) -> None:
    """report.json (strict JSON: NaN/inf as null) and report.md, atomically."""
    from aam.runtime.atomic import atomic_output, write_json

    write_json(out / "report.json", report)
    with atomic_output(out / "report.md") as tmp:
        tmp.write_text(markdown(report))


def markdown(report: dict[str, Any]) -> str:
    """A short human summary: environment, one row per check, the verdict."""
    env = report["environment"]
    lines = [
        "# aam gpu-check" + (" (DRY RUN on the CPU: not a GPU pass)" if report["dry_run"] else ""),
        "",
        f"{report['created']}; device {env['device']} ({env['device_name']}, arch "
        f"{env['arch']}, {_num(env['memory_mb'])} MB); torch {env['torch']}, CUDA {env['cuda']},"
        f" HIP {env['hip']}; python {env['python']}; commit {env['commit']}",
        "",
        "| check | status | seconds | message | numbers |",
        "|---|---|---|---|---|",
    ]
    for name, c in report["checks"].items():
        numbers = json.dumps(c["numbers"], default=str)
        numbers = numbers if len(numbers) <= 300 else numbers[:297] + "..."
        message = c["message"].replace("|", "/")
        lines.append(f"| {name} | {c['status']} | {c['seconds']} | {message} | `{numbers}` |")
    lines += ["", f"**{report['verdict']}**", ""]
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
