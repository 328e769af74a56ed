"""Profiling: kernel-table parsers, a real torch.profiler run, rocprof command lines,
`aam profile` and `aam profiling-report` end to end on CPU."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from tiny_model import TINY_FLAGS

from aam.cli import main
from aam.commands import profile as pcli
from aam.profiling import KERNEL_COLUMNS
from aam.profiling.kernels import categorize, read_rocprof_dir, read_stats_csv
from aam.profiling.probe import (
    profile_training,
    rocprof_v1_command,
    rocprofv3_command,
)
from aam.profiling.report import read_benchmarks, recommend, rule_name
from aam.runtime import external_tools

FIXTURES = Path(__file__).parent / "fixtures" / "rocprof"
TINY = TINY_FLAGS
TINY_KW = dict(embedding_dim=16, attention_heads=2, layers=1, max_bp=100, token_limit=64)


def _check_schema(table: pd.DataFrame) -> None:
    assert list(table.columns) == list(KERNEL_COLUMNS)
    assert table["total_ns"].is_monotonic_decreasing
    assert table["pct"].sum() == pytest.approx(100.0)
    expected = 100 * table["total_ns"] / table["total_ns"].sum()
    assert table["pct"].to_numpy() == pytest.approx(expected.to_numpy())
    assert (table["mean_ns"] * table["calls"]).to_numpy() == pytest.approx(table["total_ns"])


def test_rocprofv3_stats_parse_recursively_with_categories():
    table = read_rocprof_dir(FIXTURES / "v3")  # file is nested under host/pid dirs
    _check_schema(table)
    assert len(table) == 8
    cats = dict(zip(table["name"].str[:30], table["category"], strict=True))
    assert cats["Cijk_Alik_Bljk_SB_MT64x64x16_M"] == "GEMM"
    assert cats["aotriton::flash::attn_fwd"] == "attention"
    assert cats["__amd_rocclr_fillBufferAligned"] == "other"
    by_cat = table.groupby("category")["total_ns"].sum()
    assert by_cat["GEMM"] == 6_000_000
    assert by_cat["attention"] == 3_500_000  # flash + softmax
    assert by_cat["elementwise"] == 900_000
    assert by_cat["copy"] == 700_000  # elementwise_kernel<direct_copy_kernel_cuda>
    assert by_cat["reduction"] == 700_000  # sum reduce + layer norm
    top = table.iloc[0]
    assert (top["calls"], top["total_ns"], top["mean_ns"]) == (120, 6e6, 5e4)
    assert top["pct"] == pytest.approx(50.0)


def test_rocprof_v1_stats_parse():
    table = read_stats_csv(FIXTURES / "v1" / "results.stats.csv")
    _check_schema(table)
    assert list(table["category"]) == ["GEMM", "attention", "elementwise"]  # ties: by name
    assert table["pct"].tolist() == pytest.approx([60.0, 20.0, 20.0])
    # a directory with only v1 output is found too
    assert read_rocprof_dir(FIXTURES / "v1")["total_ns"].sum() == 5_000_000


def test_pct_is_recomputed_over_the_table(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    header = '"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n'
    (tmp_path / "a" / "r0_kernel_stats.csv").write_text(header + '"Cijk_x",2,300,150,100.0\n')
    (tmp_path / "b" / "r1_kernel_stats.csv").write_text(
        header + '"Cijk_x",1,100,100,50.0\n"aten::mul",1,100,100,50.0\n'
    )
    table = read_rocprof_dir(tmp_path)  # ranks summed
    assert table[["name", "calls", "total_ns"]].values.tolist() == [
        ["Cijk_x", 3, 400.0],
        ["aten::mul", 1, 100.0],
    ]
    assert table["pct"].tolist() == pytest.approx([80.0, 20.0])


@pytest.mark.parametrize(
    "name, category",
    [
        ("aten::addmm", "GEMM"),
        ("aten::bmm", "GEMM"),
        ("aten::mm", "GEMM"),
        ("rocblas_gemm_ex", "GEMM"),
        ("hipblasLt_kernel", "GEMM"),
        ("aten::scaled_dot_product_attention", "attention"),
        ("aten::_softmax", "attention"),
        ("aten::log_softmax", "reduction"),
        ("aten::native_layer_norm", "reduction"),
        ("aten::sum", "reduction"),
        ("aten::copy_", "copy"),
        ("aten::to", "copy"),
        ("Memcpy HtoD", "copy"),
        ("aten::add_", "elementwise"),
        ("aten::gelu", "elementwise"),
        ("aten::embedding", "other"),
        ("aten::commit", "other"),
    ],
)
def test_categories(name, category):
    assert categorize(name) == category


def test_command_lines_exact():
    argv = ["python", "-m", "aam", "profile", "--steps-only"]
    assert rocprofv3_command("out/rp", argv) == [
        "rocprofv3",
        "--kernel-trace",
        "--stats",
        "-d",
        "out/rp",
        "-o",
        "aam",
        "--output-format",
        "csv",
        "--",
        "python",
        "-m",
        "aam",
        "profile",
        "--steps-only",
    ]
    assert rocprof_v1_command("out/rp", argv) == [
        "rocprof",
        "--stats",
        "-o",
        "out/rp/results.csv",
        "python",
        "-m",
        "aam",
        "profile",
        "--steps-only",
    ]


def test_choose_profiler():
    on_path = {"rocprofv3": "/opt/rocm/bin/rocprofv3", "rocprof": "/opt/rocm/bin/rocprof"}
    assert pcli.choose_profiler("auto", "6.2", on_path.get) == "rocprofv3"
    assert pcli.choose_profiler("auto", "6.2", {"rocprof": "x"}.get) == "rocprof"
    assert pcli.choose_profiler("auto", "6.2", {}.get) == "torch"
    assert pcli.choose_profiler("auto", None, on_path.get) == "torch"  # CUDA/CPU build
    assert pcli.choose_profiler("torch", "6.2", on_path.get) == "torch"
    with pytest.raises(Exception, match="not on PATH"):
        pcli.choose_profiler("rocprofv3", "6.2", {}.get)


@pytest.mark.slow
def test_torch_profiler_real_training_steps(small_study):
    result = profile_training(
        small_study / "table.biom",
        small_study / "unifrac.h5",
        steps=2,
        batch_sizes=[4],
        device="cpu",
        sweep=False,
        **TINY_KW,
    )
    table = result.kernels
    _check_schema(table)
    assert len(table) > 10
    assert (table["category"] == "GEMM").any()
    assert table.loc[table["category"] == "GEMM", "calls"].sum() > 0
    assert {"attention", "elementwise", "reduction"} <= set(table["category"])


@pytest.fixture(scope="module")
def profile_dir(small_study, tmp_path_factory):
    out = tmp_path_factory.mktemp("profile") / "out"
    code = main(
        [
            "profile",
            "--table",
            str(small_study / "table.biom"),
            "--unifrac",
            str(small_study / "unifrac.h5"),
            "--output-dir",
            str(out),
            *TINY,
            "--steps",
            "2",
            "--batch-sizes",
            "4",
            "8",
            "--device",
            "cpu",
            "--profiler",
            "torch",
        ]
    )
    assert code == 0
    return out


@pytest.mark.slow
def test_aam_profile_writes_three_files(profile_dir):
    assert sorted(p.name for p in profile_dir.iterdir()) == [
        "kernel_stats.csv",
        "memory.json",
        "throughput.json",
    ]
    kernels = pd.read_csv(profile_dir / "kernel_stats.csv")
    _check_schema(kernels)
    memory = json.loads((profile_dir / "memory.json").read_text())
    speed = json.loads((profile_dir / "throughput.json").read_text())
    assert memory["device"] == speed["device"] == "cpu"
    assert memory["device_memory_mb"] > 0
    combos = {(r["backend"], r["batch_size"]) for r in speed["rows"]}
    assert combos == {("math", 4), ("math", 8), ("auto", 4), ("auto", 8)}
    assert all(r["samples_per_s"] > 0 and r["error"] is None for r in speed["rows"])
    assert all(r["peak_memory_mb"] > 0 and r["memory_kind"] == "cpu_rss" for r in memory["rows"])


def test_aam_profile_under_rocprofv3(small_study, tmp_path, monkeypatch):
    """The ROCm seam: re-invoke under rocprofv3 (faked here), read its stats, sweep untraced."""
    calls = []

    def fake_run(command, *args, **kwargs):
        if command[1:] == ["--version"]:  # the provenance record's version of the tool
            return subprocess.CompletedProcess(command, 0, stdout="1.0.0\n", stderr="")
        calls.append(command)
        trace = Path(command[command.index("-d") + 1])
        shutil.copytree(FIXTURES / "v3", trace)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    monkeypatch.setattr(external_tools, "TOOLS", {})  # this process's tools, for this test only
    monkeypatch.setattr(pcli.shutil, "which", lambda n: f"/opt/rocm/bin/{n}")
    monkeypatch.setattr(pcli.subprocess, "run", fake_run)
    out = tmp_path / "out"
    args = [
        "profile",
        "--table",
        str(small_study / "table.biom"),
        "--unifrac",
        str(small_study / "unifrac.h5"),
        "--output-dir",
        str(out),
        *TINY,
        "--steps",
        "1",
        "--batch-sizes",
        "4",
        "--backends",
        "math",
        "--device",
        "cpu",
    ]
    assert main(args) == 0
    (command,) = calls
    assert command[: command.index("--") + 1] == [
        "rocprofv3",
        "--kernel-trace",
        "--stats",
        "-d",
        str(out / "rocprof"),
        "-o",
        "aam",
        "--output-format",
        "csv",
        "--",
    ]
    child = command[command.index("--") + 1 :]
    assert child[:6] == [sys.executable, "-m", "aam", "profile", "--steps-only", "--profiler"]
    assert child[child.index("--batch-sizes") + 1] == "4"
    assert child[child.index("--embedding-dim") + 1] == "16"
    kernels = pd.read_csv(out / "kernel_stats.csv")
    assert kernels["name"].iloc[0].startswith("Cijk_")  # from the rocprof stats, not torch
    assert external_tools.TOOLS["rocprofv3"] == "1.0.0"  # for the job's provenance record
    assert (out / "memory.json").is_file() and (out / "throughput.json").is_file()


@pytest.mark.slow
def test_profiling_report(profile_dir, tmp_path):
    html = tmp_path / "report.html"
    bench = FIXTURES / "benchmarks" / "pretrain.tsv"
    code = main(
        [
            "profiling-report",
            "--profile-dir",
            str(profile_dir),
            "--benchmarks",
            str(bench),
            "--output",
            str(html),
            "--memory-budget-gb",
            "1000",
        ]
    )
    assert code == 0
    text = html.read_text()
    assert "Top 10 kernels" in text and 'class="dataframe kernels"' in text
    top = pd.read_csv(profile_dir / "kernel_stats.csv")["name"].iloc[0]
    assert top in text
    assert text.count("data:image/png;base64,") >= 2
    assert "Recommended batch size: 8 " in text  # both fit 1000 GB: the largest
    assert "Attention backends" in text
    assert "<td>pretrain</td>" in text and "754.32" in text and "5,321.45" in text
    assert "How to read this" in text
    assert not list(tmp_path.glob(".report.html.*"))  # atomic write left no temp file


def test_report_from_rocprof_dir_only(tmp_path):
    html = tmp_path / "r.html"
    assert (
        main(["profiling-report", "--profile-dir", str(FIXTURES / "v3"), "--output", str(html)])
        == 0
    )
    assert "Cijk_Alik" in html.read_text()


def test_recommendation_and_benchmarks():
    memory = {
        "device_memory_mb": 1000,
        "rows": [
            {"backend": "auto", "batch_size": 4, "peak_memory_mb": 300, "error": None},
            {"backend": "auto", "batch_size": 8, "peak_memory_mb": 700, "error": None},
            {"backend": "auto", "batch_size": 16, "peak_memory_mb": 900, "error": None},
            {"backend": "auto", "batch_size": 32, "peak_memory_mb": None, "error": "OOM"},
            {"backend": "math", "batch_size": 16, "peak_memory_mb": 100, "error": None},
        ],
    }
    assert recommend(memory, 0.8 * 1000)[0] == 8
    assert recommend(memory, 200)[0] is None
    assert rule_name(Path("results/benchmarks/pretrain.tsv")) == "pretrain"
    assert rule_name(Path("benchmarks/unifrac/oral.tsv")) == "unifrac/oral"
    rows = read_benchmarks([FIXTURES / "benchmarks" / "pretrain.tsv"])
    assert rows.loc[0, ["rule", "runs", "max_rss"]].tolist() == ["pretrain", 1, 5321.45]


def test_bad_inputs_exit_2(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert (
        main(["profiling-report", "--profile-dir", str(tmp_path / "missing"), "--output", str(out)])
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "missing" in err and "no such directory" in err
    assert not out.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["profiling-report", "--profile-dir", str(empty), "--output", str(out)]) == 2
    assert (
        main(
            [
                "profiling-report",
                "--profile-dir",
                str(FIXTURES / "v3"),
                "--benchmarks",
                str(tmp_path / "nope.tsv"),
                "--output",
                str(out),
            ]
        )
        == 2
    )
    assert not out.exists()
    assert (
        main(
            [
                "profile",
                "--table",
                str(tmp_path / "no.biom"),
                "--unifrac",
                str(tmp_path / "no.h5"),
                "--output-dir",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "no.biom: no such file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
