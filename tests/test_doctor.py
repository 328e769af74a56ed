"""`aam doctor`: backend errors against math, and the recommendation."""

import json

import pytest
import torch

import aam.diagnostics.doctor as doctor
from aam.cli import main


@pytest.mark.slow
def test_doctor_runs_on_cpu_and_recommends(tmp_path, capsys):
    out = tmp_path / "doctor.json"
    assert main(["doctor", "--device", "cpu", "--output", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["backends"][0]["backend"] == "math"
    assert report["backends"][0]["masked"] < doctor.MAX_ERROR
    assert "recommendation: use --attn-implementation" in capsys.readouterr().out


def test_a_backend_that_ignores_the_padding_mask_is_reported_wrong(monkeypatch):
    device = torch.device("cpu")
    reference = {}
    for masked in (False, True):
        q, k, v, mask = doctor._inputs(device, masked)
        reference["masked" if masked else "unmasked"] = (
            torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        )
    real = doctor.F.scaled_dot_product_attention
    monkeypatch.setattr(
        doctor.F, "scaled_dot_product_attention", lambda q, k, v, attn_mask=None: real(q, k, v)
    )
    row = doctor.check_backend("math", device, reference)
    assert row["unmasked"] < 1e-5 and row["masked"] > doctor.MAX_ERROR
    line = doctor.recommend([row], torch.device("cuda"))
    assert "no attention backend is correct" in line
    good = {"backend": "math", "masked": 1e-7, "ms": 5.0}
    fast_wrong = {"backend": "mem_efficient", "masked": 0.3, "ms": 1.0}
    line = doctor.recommend([good, fast_wrong], torch.device("cuda"))
    assert line.startswith("use --attn-implementation math") and "mem_efficient WRONG" in line
