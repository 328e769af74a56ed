"""Golden-file numeric validation (`aam validate generate|compare`)."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import torch

import aam.models.layers as layers
from aam.cli import main
from aam.diagnostics import golden as g

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "tests" / "golden"
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def golden_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("golden")
    g.generate_golden(out)
    return out


def _ignore_key_padding_mask(monkeypatch) -> None:
    """The ROCm 6.2 mem_efficient failure mode: attention that disregards the padding mask."""
    real = layers.F

    def sdpa_without_mask(q, k, v, attn_mask=None, **kwargs):
        return real.scaled_dot_product_attention(q, k, v, **kwargs)

    proxy = types.SimpleNamespace(scaled_dot_product_attention=sdpa_without_mask)
    monkeypatch.setattr(layers, "F", proxy)


def test_golden_has_real_padding_and_every_tensor(golden_dir):
    data = torch.load(golden_dir / g.GOLDEN_FILE, weights_only=True)
    inputs = data["inputs"]
    assert (inputs["unique_tokens"] == 0).any()  # PAD inside the ASV tokens
    assert (inputs["asv_index"] == -1).any()  # padding slots
    assert len(set((inputs["asv_index"] >= 0).sum(1).tolist())) > 1  # different ASV counts
    assert inputs["nuc_mask"].any()
    assert set(data["outputs"]) == set(g.OUTPUT_NAMES)
    assert set(data["gradients"]) == set(data["state_dict"])
    assert all(torch.isfinite(t).all() for t in data["gradients"].values())
    assert data["config"]["dropout"] == 0.0 and data["config"]["categorical_cardinalities"]
    meta = json.loads((golden_dir / g.METADATA_FILE).read_text())
    assert meta["torch"] == torch.__version__ and meta["tolerances"] == g.TOLERANCES
    assert (golden_dir / g.GOLDEN_FILE).stat().st_size < 1_000_000


def test_generate_is_deterministic(golden_dir, tmp_path):
    g.generate_golden(tmp_path)
    a = torch.load(golden_dir / g.GOLDEN_FILE, weights_only=True)
    b = torch.load(tmp_path / g.GOLDEN_FILE, weights_only=True)
    assert a["config"] == b["config"]
    for part in ("state_dict", "inputs", "outputs", "gradients"):
        assert a[part].keys() == b[part].keys()
        for key in a[part]:
            assert torch.equal(a[part][key], b[part][key]), (part, key)
    for name in (g.GOLDEN_FILE, g.METADATA_FILE):  # byte-identical
        assert (golden_dir / name).read_bytes() == (tmp_path / name).read_bytes(), name


def test_correct_code_passes_on_cpu(golden_dir):
    report = g.compare_golden(golden_dir, CPU)
    combos = {(c["backend"], c["precision"]): c["status"] for c in report["combinations"]}
    assert combos[("math", "fp32")] == combos[("auto", "fp32")] == "pass"
    assert report["passed"], g.format_table(report)
    n_tensors = len(g.OUTPUT_NAMES) + len(g.load_golden(golden_dir)["gradients"])
    assert len(report["rows"]) == len(report["combinations"]) * n_tensors


def test_ignored_padding_mask_fails(golden_dir, monkeypatch):
    _ignore_key_padding_mask(monkeypatch)
    report = g.compare_golden(golden_dir, CPU, precisions=("fp32",))
    assert not report["passed"]
    assert report["failed_combinations"] == ["math/fp32", "auto/fp32"]
    outputs = {r["tensor"]: r for r in report["rows"] if r["kind"] == "output"}
    assert not outputs["prediction"]["passed"] and not outputs["nuc_logits"]["passed"]
    message = g.failure_message(report)
    assert "math/fp32" in message and "auto/fp32" in message and "worst:" in message
    assert "\n" not in message


def test_cli_compare_fails_with_one_line_exit_2(golden_dir, tmp_path, monkeypatch, capsys):
    _ignore_key_padding_mask(monkeypatch)
    out = tmp_path / "golden.json"
    argv = [
        "validate",
        "compare",
        "--golden",
        str(golden_dir),
        "--device",
        "cpu",
        "--output",
        str(out),
        "--precision",
        "fp32",
    ]
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "math/fp32" in err[0] and "auto/fp32" in err[0]
    assert "FAIL" in captured.out  # the table
    report = json.loads(out.read_text())
    assert report["passed"] is False and len(report["rows"]) > 0
    assert {c["status"] for c in report["combinations"]} == {"fail"}


def test_compare_uses_stored_weights_not_a_seed(golden_dir, tmp_path, monkeypatch):
    data = torch.load(golden_dir / g.GOLDEN_FILE, weights_only=True)
    data["state_dict"]["target_head.bias"] += 1.0  # outputs stored no longer match the weights
    torch.save(data, tmp_path / g.GOLDEN_FILE)

    def no_seeded_init(*args, **kwargs):
        raise AssertionError("compare must not build seeded weights")

    monkeypatch.setattr(g, "build_golden_model", no_seeded_init)
    monkeypatch.setattr(torch, "manual_seed", no_seeded_init)
    report = g.compare_golden(tmp_path, CPU, backends=("math",), precisions=("fp32",))
    assert not report["passed"]
    failed = {r["tensor"] for r in report["rows"] if not r["passed"]}
    assert "prediction" in failed
    assert "sample_embedding" not in failed  # the base is untouched by the head's bias


def test_missing_or_corrupt_golden_is_one_line_exit_2(tmp_path, capsys):
    cases = {"missing": tmp_path / "nope", "empty": tmp_path / "empty"}
    cases["empty"].mkdir()
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / g.GOLDEN_FILE).write_bytes(b"not a zip file at all")
    cases["corrupt"] = corrupt
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    torch.save({"format": "something-else"}, wrong / g.GOLDEN_FILE)
    cases["wrong"] = wrong
    for name, path in cases.items():
        out = tmp_path / f"{name}.json"
        argv = [
            "validate",
            "compare",
            "--golden",
            str(path),
            "--device",
            "cpu",
            "--output",
            str(out),
        ]
        assert main(argv) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("aam validate: error:"), (name, err)
        assert str(path) in err[0], (name, err)
        assert not out.exists(), name


def test_committed_golden_passes_on_cpu(tmp_path):
    assert (COMMITTED / g.GOLDEN_FILE).is_file(), (
        "run `aam validate generate --output-dir tests/golden`"
    )
    size = sum(p.stat().st_size for p in COMMITTED.iterdir())
    assert size < 1_000_000
    out = tmp_path / "golden.json"
    argv = [
        "validate",
        "compare",
        "--golden",
        str(COMMITTED),
        "--device",
        "cpu",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert report["passed"] is True
    assert {(c["backend"], c["precision"]) for c in report["combinations"]} >= {
        ("math", "fp32"),
        ("auto", "fp32"),
    }


@pytest.mark.filterwarnings("ignore:attn_implementation='flash' needs a CUDA")
def test_flash_without_mask_support_is_unsupported_not_failure(golden_dir, monkeypatch):
    def no_kernel(*args, **kwargs):
        raise RuntimeError("No available kernel. Aborting execution.")

    monkeypatch.setattr(layers, "F", types.SimpleNamespace(scaled_dot_product_attention=no_kernel))
    report = g.compare_golden(golden_dir, CPU, backends=("flash", "math"), precisions=("fp32",))
    status = {c["backend"]: c for c in report["combinations"]}
    assert status["flash"]["status"] == "unsupported"
    assert status["flash"]["message"].startswith("unsupported with masks")
    assert status["math"]["status"] == "error"  # any other backend that cannot run fails
    assert report["failed_combinations"] == ["math/fp32"]
