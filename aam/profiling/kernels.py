"""One kernel-stats schema from rocprofv3, rocprof v1 and torch.profiler.

Columns: ``name, calls, total_ns, mean_ns, pct, category`` (see ``KERNEL_COLUMNS``), one row
per kernel (or, from a CPU-only torch.profiler run, per operator), sorted by ``total_ns``;
``pct`` is recomputed over the table (so it sums to 100 whatever the source reported).

Categories come from the kernel name, first match wins, in this order:

- ``attention``: attention, sdpa, scaled_dot_product, flash, fmha, and softmax (the only softmax
  in the model is the attention one; ``log_softmax`` of the loss is a reduction);
- ``GEMM``: gemm, matmul, mm / bmm / addmm / baddbmm, linear, einsum, Cijk_ (Tensile),
  rocblas, hipblaslt, cublas;
- ``copy``: copy, memcpy, memset, ``to_``/``aten::to``, contiguous, clone, cat;
- ``reduction``: sum, mean, reduce, norm (layer/group/batch norms, clipping), log_softmax,
  nll_loss, cross_entropy, argmax/max/min, cumsum;
- ``elementwise``: elementwise kernels and pointwise ops (add, mul, div, gelu, dropout, ...);
- ``other``: the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from aam.errors import InputError
from aam.profiling import KERNEL_COLUMNS

CATEGORIES = ("GEMM", "attention", "elementwise", "reduction", "copy", "other")
_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "attention",
        re.compile(r"attention|sdpa|scaled_dot_product|flash|fmha|(?<!log_)softmax"),
    ),
    (
        "GEMM",
        re.compile(
            r"gemm|matmul|(?<![a-z])(?:b|add|baddb|addb)?mm(?![a-z])|(?<![a-z])linear(?![a-z])"
            r"|einsum|cijk_|rocblas|hipblaslt|cublas"
        ),
    ),
    (
        "copy",
        re.compile(
            r"copy|memcpy|memset|(?<![a-z])to_|aten::to$|contiguous|clone|(?<![a-z])cat(?![a-z])"
        ),
    ),
    (
        "reduction",
        re.compile(
            r"sum|mean|reduce|norm|log_softmax|nll_loss|cross_entropy|argmax|argmin"
            r"|(?<![a-z])(?:max|min)(?![a-z])"
        ),
    ),
    (
        "elementwise",
        re.compile(
            r"elementwise|pointwise|(?<![a-z])(?:add|sub|mul|div|neg|exp|log|log1p|pow|sqrt"
            r"|rsqrt|abs|relu|gelu|silu|tanh|sigmoid|dropout|fill|zero|where|clamp|masked_fill"
            r"|lerp|addcmul|addcdiv|foreach\w*|fused_dropout|native_dropout|bernoulli|threshold)_?(?![a-z])"
        ),
    ),
]


def categorize(name: str) -> str:
    """The category of a kernel or operator name (see the module docstring)."""
    lowered = str(name).lower()
    for category, pattern in _RULES:
        if pattern.search(lowered):
            return category
    return "other"


def finalize(rows: pd.DataFrame) -> pd.DataFrame:
    """Merge rows of the same name, recompute mean/pct, categorise, sort by total time."""
    if rows.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _DTYPES.items()})
    table = (
        rows.groupby("name", as_index=False, sort=False)[["calls", "total_ns"]]
        .sum()
        .astype({"calls": "int64", "total_ns": "float64"})
    )
    table["mean_ns"] = table["total_ns"] / table["calls"].clip(lower=1)
    total = table["total_ns"].sum()
    table["pct"] = 100.0 * table["total_ns"] / total if total > 0 else 0.0
    table["category"] = table["name"].map(categorize)
    table = table.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable")
    return table.reset_index(drop=True)[list(KERNEL_COLUMNS)]


_DTYPES = {
    "name": "object",
    "calls": "int64",
    "total_ns": "float64",
    "mean_ns": "float64",
    "pct": "float64",
    "category": "object",
}


def read_stats_csv(path: str | Path) -> pd.DataFrame:
    """A rocprofv3 ``*_kernel_stats.csv`` or rocprof v1 ``results.stats.csv`` (keyed on the
    Name, Calls and TotalDurationNs columns, which both share)."""
    path = Path(path)
    try:
        raw = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise InputError(f"{path}: not a readable kernel-stats CSV ({err})") from err
    missing = [c for c in ("Name", "Calls", "TotalDurationNs") if c not in raw.columns]
    if missing:
        raise InputError(
            f"{path}: no column(s) {missing}; expected rocprof stats columns "
            "Name,Calls,TotalDurationNs,AverageNs,Percentage"
        )
    rows = pd.DataFrame(
        {
            "name": raw["Name"].astype(str),
            "calls": pd.to_numeric(raw["Calls"], errors="coerce").fillna(0),
            "total_ns": pd.to_numeric(raw["TotalDurationNs"], errors="coerce").fillna(0),
        }
    )
    return finalize(rows)


def find_rocprof_stats(directory: str | Path) -> list[Path]:
    """rocprofv3 ``**/*_kernel_stats.csv`` under ``directory``, else rocprof v1
    ``**/results.stats.csv`` (rocprofv3 nests them under hostname/pid folders)."""
    directory = Path(directory)
    found = sorted(directory.rglob("*_kernel_stats.csv"))
    return found or sorted(directory.rglob("results.stats.csv"))


def read_rocprof_dir(directory: str | Path) -> pd.DataFrame:
    """The kernel table of every rocprof stats file under ``directory`` (ranks summed)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: no such directory of rocprof output")
    files = find_rocprof_stats(directory)
    if not files:
        raise InputError(
            f"{directory}: no *_kernel_stats.csv (rocprofv3) or results.stats.csv (rocprof v1) "
            "found; run rocprofv3 with --kernel-trace --stats --output-format csv"
        )
    return finalize(pd.concat([read_stats_csv(f) for f in files], ignore_index=True))


def _first(event: Any, *names: str) -> float:
    for name in names:
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def _is_cpu(event: Any) -> bool:
    device_type = getattr(event, "device_type", None)
    return device_type is None or str(device_type).split(".")[-1].upper() == "CPU"


def from_key_averages(events: Iterable[Any]) -> pd.DataFrame:
    """The table of a torch.profiler ``key_averages()`` list (times in us -> ns).

    With device time in the run (GPU), rows are the device kernels and their self device time
    (CPU operators also carry the time of the kernels they launched; counting both would count
    it twice). Without (CPU only), rows are operators with their self CPU time.
    """
    events = list(events)
    device = [
        (e, _first(e, "self_device_time_total", "self_cuda_time_total", "device_time_total"))
        for e in events
        if not _is_cpu(e)
    ]
    if any(t > 0 for _, t in device):
        timed = [(e, t) for e, t in device if t > 0]
    else:
        timed = [(e, _first(e, "self_cpu_time_total", "cpu_time_total")) for e in events]
        timed = [(e, t) for e, t in timed if t > 0]
    rows = pd.DataFrame(
        {
            "name": [str(getattr(e, "key", getattr(e, "name", "?"))) for e, _ in timed],
            "calls": [int(getattr(e, "count", 1) or 1) for e, _ in timed],
            "total_ns": [t * 1000.0 for _, t in timed],
        }
    )
    return finalize(rows)


def by_category(table: pd.DataFrame) -> pd.DataFrame:
    """Total time and share per category (every category, zero when absent)."""
    grouped = table.groupby("category")["total_ns"].sum().reindex(CATEGORIES, fill_value=0.0)
    total = grouped.sum()
    out = grouped.rename("total_ns").reset_index()
    out["pct"] = 100.0 * out["total_ns"] / total if total > 0 else 0.0
    return out


def read_kernel_table(path: str | Path) -> pd.DataFrame:
    """A kernel table written by ``aam profile`` (``kernel_stats.csv``, the schema)."""
    path = Path(path)
    try:
        table = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise InputError(f"{path}: not a readable kernel table ({err})") from err
    missing = [c for c in KERNEL_COLUMNS if c not in table.columns]
    if missing:
        raise InputError(f"{path}: no column(s) {missing}; expected {', '.join(KERNEL_COLUMNS)}")
    return table[list(KERNEL_COLUMNS)]
