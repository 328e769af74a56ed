"""Code fingerprints follow the import graph and the parsed code; provenance records."""

import json
import shutil

import pytest

import aam.provenance as prov
from aam.cli import COMMANDS, main


def test_closure_follows_imports_including_function_level_ones():
    closure = prov.import_closure("aam.commands.unifrac")
    assert "aam.unifrac.cpu_kernel" in closure  # imported inside a function of engines.py
    assert "aam.data.table" in closure and "aam.unifrac" in closure and "aam" in closure
    assert not any(m.startswith(("aam.models", "aam.training")) for m in closure)


def test_prediction_code_is_only_in_the_predict_closure():
    for command, (module, _) in COMMANDS.items():
        inside = "aam.commands.predict" in prov.import_closure(module)
        assert inside == (command == "predict"), command


def test_model_code_is_in_training_and_prediction_closures_only():
    users = {c for c, (m, _) in COMMANDS.items() if "aam.models.layers" in prov.import_closure(m)}
    assert users == {"pretrain", "finetune", "predict", "profile", "validate", "run-options-schema"}


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    copy = tmp_path / "aam"
    shutil.copytree(prov.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(prov, "PACKAGE_DIR", copy)
    return copy


def test_fingerprint_ignores_comments_and_formatting_but_not_code(package_copy):
    before = prov.code_fingerprint("aam.commands.predict")
    path = package_copy / "models" / "layers.py"
    text = path.read_text()
    path.write_text("# comment\n" + text.replace("1.0 / math.sqrt(dim)", "1.0/math.sqrt(dim)"))
    assert prov.code_fingerprint("aam.commands.predict") == before
    path.write_text(text.replace("1.0 / math.sqrt(dim)", "2.0 / math.sqrt(dim)"))
    assert prov.code_fingerprint("aam.commands.predict") != before
    unifrac = prov.code_fingerprint("aam.commands.unifrac")
    assert unifrac == prov.code_fingerprint("aam.commands.unifrac")


def test_fingerprint_ignores_docstrings_but_not_other_strings(package_copy):
    before = prov.code_fingerprint("aam.commands.predict")
    path = package_copy / "models" / "layers.py"
    text = path.read_text()
    first = text.index('"""', text.index("def ")) + 3  # inside the first function's docstring
    edited = text[:first] + "Reworded. " + text[first:]
    path.write_text(edited.replace('"""', '"""Reworded module. ', 1))
    assert prov.code_fingerprint("aam.commands.predict") == before
    path.write_text(text.replace('"auto"', '"math"', 1))
    assert prov.code_fingerprint("aam.commands.predict") != before


def test_cli_writes_provenance_beside_outputs(tmp_path, demo_dir):
    record_path = tmp_path / "provenance.json"
    argv = ["stage", "--output-dir", str(tmp_path / "out"), "--file",
            f"metadata.tsv={demo_dir / 'metadata.tsv'}"]  # fmt: skip
    assert main(["--provenance", str(record_path), *argv]) == 0
    record = json.loads(record_path.read_text())
    assert record["command"] == ["aam", *argv]
    assert record["code_fingerprint"] == prov.code_fingerprint("aam.commands.stage")
    assert record["git_commit"] is None or len(record["git_commit"]) == 40
    assert {"torch", "device", "host", "started", "finished", "container_image"} <= set(record)


def test_stage_copies_verifies_and_writes_a_manifest(tmp_path, demo_dir):
    out = tmp_path / "staged"
    source = demo_dir / "metadata.tsv"
    assert main(["stage", "--output-dir", str(out), "--file", f"m.tsv={source}"]) == 0
    assert (out / "m.tsv").read_bytes() == source.read_bytes()
    digest, name = (out / "manifest.sha256").read_text().split()
    assert name == "m.tsv" and digest == prov.hashlib.sha256(source.read_bytes()).hexdigest()


def test_stage_missing_input_is_one_line_and_leaves_nothing(tmp_path, capsys):
    out = tmp_path / "staged"
    assert main(["stage", "--output-dir", str(out), "--file", f"t={tmp_path / 'no.biom'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("aam stage: error:") and "no.biom" in err and "\n" not in err
    assert not (out / "manifest.sha256").exists()
