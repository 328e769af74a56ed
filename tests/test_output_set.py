"""A command's outputs are published together (``aam.runtime.atomic.output_set``): nothing is
renamed onto a final name until the whole set is written, a failure anywhere leaves the
previous files as they were, and a rerun clears the temporaries a killed run left. The faults
tier (tests/faults/) injects full disks, I/O errors and kills into every writing command."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from aam.errors import DiskFullError, InputError
from aam.runtime.atomic import atomic_output, output_set, write_json


def write(path: Path, text: str, now: bool = False) -> None:
    with atomic_output(path, now=now) as tmp:
        tmp.write_text(text)


def files(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(directory.iterdir())}


def test_a_set_publishes_nothing_until_it_ends(tmp_path):
    with output_set():
        write(tmp_path / "a.tsv", "new a")
        write_json(tmp_path / "b.json", {"b": 1})
        assert not (tmp_path / "a.tsv").exists() and not (tmp_path / "b.json").exists()
    assert (tmp_path / "a.tsv").read_text() == "new a"
    assert (tmp_path / "b.json").read_text() == '{\n  "b": 1\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tsv", "b.json"]  # no temporary


@pytest.mark.parametrize(
    "failure",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EIO, "Input/output error"),
        InputError("bad input found late"),
        KeyboardInterrupt(),
    ],
    ids=["enospc", "eio", "input", "interrupt"],
)
def test_a_failure_in_a_set_leaves_every_previous_file_and_no_temporary(tmp_path, failure):
    write(tmp_path / "a.tsv", "old a")
    write(tmp_path / "b.tsv", "old b")
    with pytest.raises((OSError, InputError, KeyboardInterrupt)), output_set():
        write(tmp_path / "a.tsv", "new a")
        if isinstance(failure, OSError):  # the second file's write fails
            with atomic_output(tmp_path / "b.tsv") as tmp:
                tmp.write_text("half")
                raise failure
        raise failure
    assert files(tmp_path) == {"a.tsv": "old a", "b.tsv": "old b"}


def test_a_full_disk_in_a_set_is_the_one_line_disk_full_error(tmp_path):
    with pytest.raises(DiskFullError) as info, output_set():
        with atomic_output(tmp_path / "a.tsv") as tmp:
            tmp.write_text("x")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert str(tmp_path / "a.tsv") in str(info.value) and "\n" not in str(info.value)


def test_now_publishes_at_once_and_a_file_written_twice_is_its_last_version(tmp_path):
    with output_set():
        write(tmp_path / "checkpoint.pt", "step 1", now=True)
        assert (tmp_path / "checkpoint.pt").read_text() == "step 1"
        write(tmp_path / "history.tsv", "epoch 1")
        write(tmp_path / "history.tsv", "epoch 2")
        with output_set():  # an inner set is published with the outer one
            write(tmp_path / "inner.tsv", "inner")
        assert not (tmp_path / "inner.tsv").exists() and not (tmp_path / "history.tsv").exists()
    assert files(tmp_path) == {
        "checkpoint.pt": "step 1",
        "history.tsv": "epoch 2",
        "inner.tsv": "inner",
    }


def test_a_rerun_removes_what_a_killed_run_left_of_its_files(tmp_path):
    write(tmp_path / "a.tsv", "old a")
    left = [tmp_path / ".a.tsv.k1ll3d.tmp", tmp_path / ".a.tsv.xq9w2e.tmp"]
    other = tmp_path / ".b.tsv.k1ll3d.tmp"  # another file's temporary: not this write's
    for path in [*left, other]:
        path.write_text("partial")
    with output_set():
        write(tmp_path / "a.tsv", "new a")
    assert files(tmp_path) == {".b.tsv.k1ll3d.tmp": "partial", "a.tsv": "new a"}


def test_temporaries_of_a_name_with_glob_characters_are_matched_literally(tmp_path):
    name = "run[1]*.tsv"
    bystander = tmp_path / ".run1x.tsv.abc123.tmp"  # would match the unescaped pattern
    bystander.write_text("not ours")
    (tmp_path / f".{name}.abc123.tmp").write_text("ours")
    write(tmp_path / name, "done")
    assert files(tmp_path) == {".run1x.tsv.abc123.tmp": "not ours", name: "done"}
