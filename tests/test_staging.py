"""Node-local staging of a job's inputs: copied, verified against the manifest, cleaned up."""

import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aam.cli import main
from aam.errors import InputError
from aam.runtime.staging import (
    HELD,
    STAGE_PREFIX,
    YOUNG_S,
    localized,
    remove_stale_stages,
    scratch_root,
)


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


@pytest.mark.parametrize(
    ("newick", "message"),
    [
        ("((A,B),C);\n", "branch(es) lack a finite length >= 0 (e.g. no length above tip A)"),
        ("((A:1,A:1):1,C:1);\n", "1 duplicate tip names (e.g. A)"),
        ("((A:1,B:1):1,C:1\n", "not a readable newick tree"),
    ],
)
def test_a_staged_tree_is_checked_first_and_named_by_its_source(
    tmp_path, demo_dir, capsys, newick, message
):
    source = tmp_path / "config dir" / "my tree.nwk"
    source.parent.mkdir()
    source.write_text(newick)
    work = tmp_path / "work"
    argv = ["stage", "--output-dir", str(work), "--file", f"table.biom={demo_dir / 'table.biom'}"]
    assert main([*argv, "--tree", f"tree.nwk={source}"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"aam stage: error: {source}: "), err
    assert message in err
    assert not work.exists()  # nothing staged: the tree is checked before any copy


def test_a_good_tree_is_staged_with_its_digest(tmp_path, demo_dir):
    work = tmp_path / "work"
    tree = demo_dir / "tree.nwk"
    argv = ["stage", "--output-dir", str(work), "--manifest", "tree.sha256"]
    assert main([*argv, "--tree", f"tree.nwk={tree}"]) == 0
    assert (work / "tree.nwk").read_bytes() == tree.read_bytes()
    assert (work / "tree.sha256").read_text().endswith("  tree.nwk\n")


def test_a_killed_commands_scratch_copies_go_at_the_next_staging(work_area, tmp_path):
    """SIGKILL (or the OOM killer) leaves a command's copies behind; the next command staging
    into the same scratch on the same host removes them, and leaves a running command's copies
    and another host's alone."""
    scratch, table = tmp_path / "nvme", work_area / "table.biom"
    hold = (
        "from aam.runtime.staging import localized; import sys, time\n"
        "with localized({'table': sys.argv[1]}, sys.argv[2]) as local:\n"
        "    print(local['table'], flush=True); time.sleep(600)\n"
    )
    command = [sys.executable, "-c", hold, str(table), str(scratch)]
    running, killed = (subprocess.Popen(command, stdout=subprocess.PIPE) for _ in range(2))
    try:
        copies = [Path(p.stdout.readline().decode().strip()) for p in (running, killed)]
        killed.kill()
        killed.wait()
        old = time.time() - 2 * YOUNG_S  # both past the age a stage may be unlocked at
        for copy in copies:
            os.utime(copy.parents[1] / HELD, (old, old))
        (scratch / f"{STAGE_PREFIX}unheld").mkdir()  # no HELD file: not judged
        elsewhere = scratch / f"{STAGE_PREFIX}elsewhere"  # another host's (unlocked here)
        elsewhere.mkdir()
        (elsewhere / HELD).write_text("another-host")
        os.utime(elsewhere / HELD, (old, old))
        with localized({"table": table}, str(scratch)):
            pass
        assert copies[0].is_file() and not copies[1].parents[1].exists()
        assert sorted(p.name for p in scratch.iterdir()) == sorted(
            [copies[0].parents[1].name, f"{STAGE_PREFIX}unheld", f"{STAGE_PREFIX}elsewhere"]
        )
    finally:
        running.kill()
        running.wait()


def test_a_linked_stage_is_left_and_not_reported_removed(tmp_path, caplog):
    """A link named like a stage (to a killed command's directory elsewhere) is not followed:
    the directory it points to stays, and no line says it was removed."""
    scratch, elsewhere = tmp_path / "nvme", tmp_path / "elsewhere"
    scratch.mkdir()
    elsewhere.mkdir()
    (elsewhere / HELD).write_text(socket.gethostname())
    old = time.time() - 2 * YOUNG_S
    os.utime(elsewhere / HELD, (old, old))
    (scratch / f"{STAGE_PREFIX}linked").symlink_to(elsewhere)
    with caplog.at_level(logging.INFO):
        remove_stale_stages(scratch)
    assert (elsewhere / HELD).is_file() and (scratch / f"{STAGE_PREFIX}linked").is_symlink()
    assert not [r for r in caplog.records if "removed" in r.getMessage()]
