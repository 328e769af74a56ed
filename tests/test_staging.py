"""Node-local staging of a job's inputs: copied, verified against the manifest, cleaned up."""

import pytest

from aam.cli import main
from aam.errors import InputError
from aam.staging import localized, scratch_root


@pytest.fixture
def work_area(tmp_path, demo_dir):
    """The demo table staged into a work area with its manifest (as the stage rule does)."""
    work = tmp_path / "work"
    source = demo_dir / "table.biom"
    assert main(["stage", "--output-dir", str(work), "--file", f"table.biom={source}"]) == 0
    return work


def test_inputs_are_copied_verified_and_removed(work_area, tmp_path):
    scratch = tmp_path / "nvme"
    table = work_area / "table.biom"
    with localized({"table": table, "absent": None}, str(scratch)) as local:
        assert set(local) == {"table"}
        assert local["table"].is_relative_to(scratch)
        assert local["table"].read_bytes() == table.read_bytes()
    assert list(scratch.iterdir()) == []


def test_a_work_area_file_that_no_longer_matches_its_manifest_is_refused(work_area, tmp_path):
    table = work_area / "table.biom"
    table.write_bytes(table.read_bytes() + b"x")
    with pytest.raises(InputError, match="manifest.sha256"):
        with localized({"table": table}, str(tmp_path / "nvme")):
            pass
    assert list((tmp_path / "nvme").iterdir()) == []


def test_scratch_choice(monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    assert scratch_root(f"{tmp_path}/job_$SLURM_JOB_ID") == tmp_path / "job_42"
    monkeypatch.delenv("SLURM_JOB_ID")
    assert scratch_root(f"{tmp_path}/job_$SLURM_JOB_ID") == tmp_path / "tmp"  # falls back
    monkeypatch.delenv("TMPDIR")
    assert scratch_root(None) is None


def test_without_scratch_inputs_are_read_in_place(work_area, monkeypatch):
    monkeypatch.delenv("TMPDIR", raising=False)
    with localized({"table": work_area / "table.biom"}, None) as local:
        assert local == {"table": work_area / "table.biom"}


def test_scratch_copies_exist_only_while_reading(work_area, tmp_path):
    with localized({"table": work_area / "table.biom", "split": None}, str(tmp_path)) as local:
        assert local["table"].parent.parent.parent == tmp_path and "split" not in local
        assert local["table"].is_file()
    assert not local["table"].exists()


@pytest.mark.parametrize(
    ("output_dir", "extra", "message"),
    [
        ("a_file", [], "a_file: staging directory is an existing file; choose another location"),
        ("work", ["--manifest", "sub"], "sub: manifest path is a directory; give a file name"),
        ("work", [], "table.biom: staged file path is a directory; give a file name"),
    ],
)
def test_output_locations_are_checked_before_copying(
    tmp_path, demo_dir, capsys, output_dir, extra, message
):
    (tmp_path / "a_file").write_text("not a directory\n")
    (tmp_path / "work" / "sub").mkdir(parents=True)
    (tmp_path / "work" / "table.biom").mkdir()
    argv = ["stage", "--output-dir", str(tmp_path / output_dir), *extra]
    files = ["--file", f"metadata.tsv={demo_dir / 'metadata.tsv'}"]
    assert main([*argv, *files, "--file", f"table.biom={demo_dir / 'table.biom'}"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.strip().endswith(message), err
    assert not (tmp_path / "work" / "metadata.tsv").exists()  # nothing copied
