"""What this torch stack can do, and which attention backend to use on it.

Reports torch / ROCm / CUDA versions and the device, runs every SDPA backend on a standard
shape with and without a key-padding mask, compares each to the math backend, times it and
measures its peak memory, checks torch.compile, and ends with one recommendation line.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "math": SDPBackend.MATH,
    "mem_efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
}
SHAPE = (8, 4, 128, 32)  # batch, heads, sequence, head dim
MAX_ERROR = 1e-3  # fp32 disagreement with math that marks a backend wrong


def _inputs(device: torch.device, masked: bool):
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*SHAPE, generator=generator).to(device) for _ in range(3))
    mask = None
    if masked:  # key padding: sample b keeps its first 128 - 12*b positions
        keep = torch.arange(SHAPE[2])[None, :] < (SHAPE[2] - 12 * torch.arange(SHAPE[0]))[:, None]
        mask = keep[:, None, None, :].to(device)
    return q, k, v, mask


def check_backend(name: str, device: torch.device, reference: dict) -> dict:
    """Error vs math (with and without mask), time and peak memory of one SDPA backend."""
    row: dict = {"backend": name}
    for masked in (False, True):
        q, k, v, mask = _inputs(device, masked)
        try:
            with sdpa_kernel(BACKENDS[name]):
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        except RuntimeError as err:
            row["masked" if masked else "unmasked"] = (
                f"unsupported ({str(err).splitlines()[0][:80]})"
            )
            continue
        key = "masked" if masked else "unmasked"
        row[key] = float((out.float() - reference[key]).abs().max())
    if isinstance(row.get("masked"), float):
        q, k, v, mask = _inputs(device, True)
        row.update(_timing(name, device, q, k, v, mask))
    return row


def _timing(name, device, q, k, v, mask, repeats: int = 20) -> dict:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with sdpa_kernel(BACKENDS[name]):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    out = {"ms": (time.perf_counter() - start) / repeats * 1e3}
    if device.type == "cuda":
        out["peak_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return out


def compile_works() -> str:
    """``ok``, ``skipped on ROCm`` or the first line of the error."""
    if torch.version.hip:
        return "skipped on ROCm (aam compiles there only when asked: --compile model|layers)"
    try:
        torch.compile(lambda x: x * 2 + 1)(torch.ones(4))
        return "ok"
    except Exception as err:  # any backend failure is the answer
        return f"fails ({str(err).splitlines()[0][:120]})"


def diagnose(device: torch.device) -> dict:
    """Everything `aam doctor` reports, as a dict."""
    reference = {}
    for masked in (False, True):
        q, k, v, mask = _inputs(device, masked)
        with sdpa_kernel(SDPBackend.MATH):
            reference["masked" if masked else "unmasked"] = F.scaled_dot_product_attention(
                q.double(), k.double(), v.double(), attn_mask=mask
            ).float()
    names = list(BACKENDS) if device.type == "cuda" else ["math"]
    rows = [check_backend(name, device, reference) for name in names]
    report = {
        "torch": torch.__version__,
        "rocm": torch.version.hip,
        "cuda": torch.version.cuda,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "arch": getattr(torch.cuda.get_device_properties(device), "gcnArchName", None)
        if device.type == "cuda"
        else None,
        "backends": rows,
        "compile": compile_works(),
    }
    report["recommendation"] = recommend(rows, device)
    return report


def recommend(rows: list[dict], device: torch.device) -> str:
    """One line: the fastest backend that is correct with masks."""
    good = [r for r in rows if isinstance(r.get("masked"), float) and r["masked"] < MAX_ERROR]
    bad = [r["backend"] for r in rows if isinstance(r.get("masked"), float) and r not in good]
    if not good:
        return "no attention backend is correct with padding masks here: do not train on it"
    best = min(good, key=lambda r: r.get("ms", 0.0))["backend"]
    warning = f" ({', '.join(bad)} WRONG with padding masks here)" if bad else ""
    if device.type != "cuda":
        return f"use --attn-implementation auto or math on {device.type}{warning}"
    return f"use --attn-implementation {best} on this stack{warning}"
