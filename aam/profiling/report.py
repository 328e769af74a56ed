"""The profiling report: one self-contained HTML page (plots embedded as base64 PNG).

Sections: top-10 kernels, time by category, peak memory and samples/s per batch size with a
recommended batch size, the attention-backend comparison, per-rule wall time / max RSS from
Snakemake ``benchmark:`` TSVs, and how to read it all.
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd

from aam.errors import InputError
from aam.profiling import KERNEL_FILE, MEMORY_FILE, THROUGHPUT_FILE
from aam.profiling.kernels import by_category, read_kernel_table, read_rocprof_dir
from aam.runtime.atomic import atomic_output
from aam.runtime.figures import pyplot

log = logging.getLogger(__name__)
HOW_TO_READ = (
    "The kernel table covers a few training steps only (after a warm-up step). On a GPU the "
    "rows are device kernels and their time (rocprofv3 or torch.profiler); on a CPU they are "
    "operators and their self CPU time. A large GEMM share means the model is compute-bound; "
    "a large elementwise/copy/reduction share means it is bound by memory traffic or launch "
    "overhead (larger batches, bf16 or fused kernels help). Peak memory is "
    "torch.cuda.max_memory_allocated on a GPU and the process RSS on a CPU; the recommended "
    "batch size is the largest measured one whose peak stays within the budget (leave room "
    "for longer samples than the measured ones). Snakemake benchmarks measure the host "
    "process tree of each rule (wall time s, max_rss in MB); GPU memory is not in them."
)


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def _figure(width: float = 6.0, height: float = 3.2, ncols: int = 1):
    plt = pyplot()

    return plt.subplots(1, ncols, figsize=(width, height))


def load_kernels(profile_dir: Path) -> pd.DataFrame | None:
    """kernel_stats.csv of `aam profile`, else rocprof stats files under the dir, else None."""
    if (profile_dir / KERNEL_FILE).is_file():
        return read_kernel_table(profile_dir / KERNEL_FILE)
    try:
        return read_rocprof_dir(profile_dir)
    except InputError:
        return None


def _load_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err.msg}, line {err.lineno})") from err


def rule_name(path: Path) -> str:
    """``benchmarks/{rule}.tsv`` -> rule; deeper paths keep the part after ``benchmarks/``."""
    parts = path.with_suffix("").parts
    if "benchmarks" in parts[:-1]:
        at = len(parts) - 1 - parts[::-1].index("benchmarks")
        return "/".join(parts[at + 1 :])
    return path.stem


def _numeric(data: pd.DataFrame, column: str) -> pd.Series | None:
    return pd.to_numeric(data[column], errors="coerce") if column in data else None


def read_benchmarks(paths: list[Path]) -> pd.DataFrame:
    """One row per benchmark file: runs, mean/max wall time (s), max RSS (MB), CPU time."""
    rows = []
    for path in paths:
        if not path.is_file():
            raise InputError(f"{path}: no such benchmark TSV")
        try:
            data = pd.read_csv(path, sep="\t")
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
            raise InputError(f"{path}: not a Snakemake benchmark TSV ({err})") from err
        if "s" not in data.columns:
            raise InputError(f"{path}: no column 's'; expected a Snakemake benchmark: TSV")
        rule = rule_name(path)
        if "rule_name" in data.columns and data["rule_name"].notna().any():
            rule = str(data["rule_name"].dropna().iloc[0])
        row = {
            "rule": rule,
            "file": str(path),
            "runs": len(data),
            "mean_s": _numeric(data, "s").mean(),
            "max_s": _numeric(data, "s").max(),
            "h:m:s": str(data["h:m:s"].iloc[-1]) if "h:m:s" in data else "",
        }
        for col in ("max_rss", "mean_load", "cpu_time"):
            values = _numeric(data, col)
            row[col] = values.max() if values is not None else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def recommend(memory: dict[str, Any] | None, budget_mb: float | None) -> tuple[int | None, str]:
    """Largest batch size whose peak memory fits ``budget_mb`` (backend ``auto`` rows, else the
    first backend), and the sentence saying so."""
    if not memory or not memory.get("rows"):
        return None, "No memory sweep in the profile directory: no batch size recommended."
    rows = pd.DataFrame(memory["rows"])
    backend = "auto" if "auto" in set(rows["backend"]) else rows["backend"].iloc[0]
    rows = rows[rows["backend"] == backend]
    ok = rows[rows.get("error").isna()] if "error" in rows else rows
    if budget_mb is None:
        return None, "Device memory unknown: no batch size recommended."
    fits = ok[ok["peak_memory_mb"] <= budget_mb]
    if fits.empty:
        return None, (
            f"Recommended batch size: none of the measured sizes fits the budget of "
            f"{budget_mb / 1024:.1f} GB (backend {backend}); try smaller batches."
        )
    best = fits.loc[fits["batch_size"].idxmax()]
    return int(best["batch_size"]), (
        f"Recommended batch size: {int(best['batch_size'])} (peak {best['peak_memory_mb']:.0f} MB "
        f"of a {budget_mb / 1024:.1f} GB budget, backend {backend}; largest measured size that "
        "fits)."
    )


def _table(frame: pd.DataFrame, css: str, floats: str = "{:,.1f}") -> str:
    return frame.to_html(
        index=False, classes=css, border=0, na_rep="", float_format=lambda v: floats.format(v)
    )


def _category_plot(kernels: pd.DataFrame) -> str:
    cats = by_category(kernels)
    fig, ax = _figure()
    ax.barh(cats["category"], cats["total_ns"] / 1e6, color="tab:blue")
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title("Time by kernel category")
    for y, (ms, pct) in enumerate(zip(cats["total_ns"] / 1e6, cats["pct"], strict=True)):
        ax.text(ms, y, f" {pct:.0f}%", va="center", fontsize=8)
    return _png(fig)


def _sweep_plot(memory: dict, throughput: dict | None, budget_mb: float | None) -> str:
    mem = pd.DataFrame(memory["rows"])
    fig, (left, right) = _figure(10, 3.2, ncols=2)
    for backend, rows in mem.groupby("backend", sort=False):
        rows = rows.dropna(subset=["peak_memory_mb"]).sort_values("batch_size")
        left.plot(rows["batch_size"], rows["peak_memory_mb"], marker="o", label=backend)
    if budget_mb is not None and budget_mb <= 2 * mem["peak_memory_mb"].max():
        left.axhline(budget_mb, color="red", linestyle="--", label="budget")
    elif budget_mb is not None:
        left.set_title(f"budget {budget_mb / 1024:.1f} GB (off the scale)", fontsize=9)
    left.set_xlabel("batch size")
    left.set_ylabel("peak memory (MB)")
    left.legend(fontsize=8)
    if throughput and throughput.get("rows"):
        speed = pd.DataFrame(throughput["rows"])
        for backend, rows in speed.groupby("backend", sort=False):
            rows = rows.dropna(subset=["samples_per_s"]).sort_values("batch_size")
            right.plot(rows["batch_size"], rows["samples_per_s"], marker="o", label=backend)
        right.legend(fontsize=8)
    right.set_xlabel("batch size")
    right.set_ylabel("samples/s")
    return _png(fig)


def build_report(
    profile_dir: str | Path,
    benchmarks: list[Path] | None = None,
    *,
    memory_budget_gb: float | None = None,
    memory_fraction: float = 0.8,
) -> str:
    """The HTML text of the report."""
    profile_dir = Path(profile_dir)
    if not profile_dir.is_dir():
        raise InputError(f"--profile-dir {profile_dir}: no such directory; run `aam profile`")
    kernels = load_kernels(profile_dir)
    memory = _load_json(profile_dir / MEMORY_FILE)
    throughput = _load_json(profile_dir / THROUGHPUT_FILE)
    if kernels is None and memory is None and throughput is None:
        raise InputError(
            f"--profile-dir {profile_dir}: holds no {KERNEL_FILE}, {MEMORY_FILE}, "
            f"{THROUGHPUT_FILE} or rocprof stats; run `aam profile --output-dir {profile_dir}`"
        )
    bench = read_benchmarks(list(benchmarks or []))
    budget_mb = None
    if memory_budget_gb is not None:
        budget_mb = memory_budget_gb * 1024
    elif memory and memory.get("device_memory_mb"):
        budget_mb = memory_fraction * float(memory["device_memory_mb"])

    parts = [
        _header(profile_dir, memory or throughput or {}),
        *_kernel_section(kernels),
        *_sweep_section(memory, throughput, budget_mb),
        *_benchmark_section(bench),
    ]
    style = (
        "body{font-family:sans-serif;max-width:70em;margin:1em auto}"
        "table{border-collapse:collapse;font-size:90%}td,th{padding:2px 8px;"
        "border-bottom:1px solid #ddd;text-align:right}td:nth-child(2){text-align:left}"
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>aam profiling report</title>"
        f"<style>{style}</style></head><body>" + "\n".join(parts) + "</body></html>\n"
    )


def _header(profile_dir: Path, meta: dict) -> str:
    """Title, the run's device and settings, and how to read the report."""
    text = f"<h1>aam profiling report</h1><p>{html.escape(str(profile_dir))}"
    if meta:
        text += (
            f" &middot; device {html.escape(str(meta.get('device')))} "
            f"({html.escape(str(meta.get('device_name', '')))}), torch "
            f"{html.escape(str(meta.get('torch')))}, {meta.get('steps')} steps, "
            f"precision {html.escape(str(meta.get('precision')))}"
        )
    return text + "</p><h2>How to read this</h2><p>" + html.escape(HOW_TO_READ) + "</p>"


def _kernel_section(kernels: pd.DataFrame | None) -> list[str]:
    """The top 10 kernels and the time by category."""
    parts = ["<h2>Top 10 kernels</h2>"]
    if kernels is None or kernels.empty:
        return [*parts, "<p>No kernel table in the profile directory.</p>"]
    top = kernels.head(10).copy()
    top.insert(0, "rank", range(1, len(top) + 1))
    top["total_ms"] = top.pop("total_ns") / 1e6
    top["mean_us"] = top.pop("mean_ns") / 1e3
    top = top[["rank", "name", "category", "calls", "total_ms", "mean_us", "pct"]]
    parts.append(_table(top, "kernels", "{:,.3f}"))
    parts.append(f"<p>{len(kernels)} kernels in all.</p>")
    parts.append("<h2>Time by category</h2>")
    cats = by_category(kernels)
    cats["total_ms"] = cats.pop("total_ns") / 1e6
    parts.append(_category_plot(kernels))
    parts.append(_table(cats[["category", "total_ms", "pct"]], "categories", "{:,.2f}"))
    return parts


BACKEND_COLUMNS = (
    "backend",
    "effective_backend",
    "batch_size",
    "samples_per_s",
    "seconds_per_step",
    "peak_memory_mb",
    "memory_kind",
    "error",
)


def _sweep_section(
    memory: dict | None, throughput: dict | None, budget_mb: float | None
) -> list[str]:
    """The batch size to use, peak memory and throughput per batch size, and the attention
    backends side by side."""
    _, sentence = recommend(memory, budget_mb)
    parts = [
        "<h2>Peak memory and throughput per batch size</h2>",
        f'<p class="recommendation"><b>{html.escape(sentence)}</b></p>',
    ]
    if not (memory and memory.get("rows")):
        return [*parts, "<p>No memory/throughput sweep in the profile directory.</p>"]
    parts.append(_sweep_plot(memory, throughput, budget_mb))
    mem = pd.DataFrame(memory["rows"])
    if throughput and throughput.get("rows"):
        speed = pd.DataFrame(throughput["rows"])
        keep = [c for c in ("samples_per_s", "seconds_per_step") if c in speed]
        mem = mem.merge(
            speed[["backend", "batch_size", *keep]], on=["backend", "batch_size"], how="left"
        )
    parts.append("<h2>Attention backends</h2>")
    parts.append(_table(mem[[c for c in BACKEND_COLUMNS if c in mem]], "backends", "{:,.2f}"))
    return parts


def _benchmark_section(bench: pd.DataFrame) -> list[str]:
    """The Snakemake rules' benchmark TSVs, slowest first."""
    parts = ["<h2>Snakemake rules (benchmark: TSVs)</h2>"]
    if bench.empty:
        return [*parts, "<p>No benchmark TSVs given.</p>"]
    shown = bench.drop(columns=["file"]).sort_values("mean_s", ascending=False)
    parts.append(_table(shown, "benchmarks", "{:,.2f}"))
    parts.append("<p>s = wall time (seconds), max_rss in MB, mean_load in % of one core.</p>")
    return parts


def write_report(
    profile_dir: str | Path,
    benchmarks: list[Path] | None,
    output: str | Path,
    *,
    memory_budget_gb: float | None = None,
    memory_fraction: float = 0.8,
) -> Path:
    """Build the report and write it atomically to ``output``."""
    text = build_report(
        profile_dir, benchmarks, memory_budget_gb=memory_budget_gb, memory_fraction=memory_fraction
    )
    with atomic_output(output) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(output)
