"""Broken and hostile .qza files stop in one line naming the file, within bounded memory, before
their payload is held (issue 74): an encrypted member, an unsupported compression, a corrupt
stream, a truncated archive, a zip bomb, a link member, a member listed twice, a uuid directory
other than metadata.yaml's. A well-formed artifact still reads."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import pytest
from errors import one_line_error
from qiime2_artifacts import write_artifact

from aam.cli import main
from aam.data.qiime2 import INFLATED_BYTES, METADATA_BYTES, read_artifact

TREE = b"(a:1,b:1,c:1);"
META = "uuid: u1\ntype: Phylogeny[Rooted]\nformat: NewickDirectoryFormat\n"


def _archive(path: Path, members: list[tuple[str | zipfile.ZipInfo, bytes | str]]) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate name: the case tested
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in members:
                archive.writestr(name, data)
    return path


def _tree(path: Path, payload: bytes = TREE, meta: str = META) -> Path:
    return _archive(path, [("u1/metadata.yaml", meta), ("u1/data/tree.nwk", payload)])


def _patched(path: Path, local: int, central: int, value: bytes) -> Path:
    """Overwrite bytes at ``local`` of the payload's local header and ``central`` of its
    central-directory entry (the last of each: the payload's)."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", local), (b"PK\x01\x02", central)):
        at = data.rindex(signature) + offset
        data[at : at + len(value)] = value
    path.write_bytes(bytes(data))
    return path


def test_a_well_formed_artifact_reads(tmp_path):
    assert read_artifact(_tree(tmp_path / "tree.qza"), "tree") == TREE
    written = write_artifact(tmp_path / "q2.qza", "Phylogeny[Rooted]", TREE)  # QIIME 2's layout
    assert read_artifact(written, "tree") == TREE


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("encrypted", "not a readable QIIME 2 artifact"),
        ("compression", "not a readable QIIME 2 artifact"),
        ("corrupt", "not a readable QIIME 2 artifact"),
        ("truncated", "not a readable QIIME 2 artifact"),
        ("bomb", f"inflates to {INFLATED_BYTES + 1:,} bytes"),
        ("big metadata", f"inflates to {METADATA_BYTES + 1:,} bytes"),
        ("link", "u1/data/tree.nwk is a link, not a file"),
        ("twice", "lists u1/data/tree.nwk twice"),
        ("uuid", "its metadata.yaml names uuid 'u2', its directory is 'u1'"),
        ("python tag", "metadata.yaml line 4 is not plain YAML (could not determine a constructor"),
    ],
)
def test_a_broken_or_hostile_artifact_is_one_line(tmp_path, case, expected):
    path = tmp_path / f"{case}.qza"
    if case == "encrypted":  # general purpose flag bit 0: encrypted
        _patched(_tree(path), 6, 8, b"\x01\x00")
    elif case == "compression":  # method 99: AES, which zipfile cannot read
        _patched(_tree(path), 8, 10, b"\x63\x00")
    elif case == "corrupt":
        data = bytearray(_tree(path, payload=TREE * 50).read_bytes())
        at = data.rindex(b"PK\x03\x04") + 30 + len("u1/data/tree.nwk") + 2
        data[at : at + 8] = b"\xff" * 8
        path.write_bytes(bytes(data))
    elif case == "truncated":
        data = _tree(path, payload=TREE * 50).read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif case == "bomb":
        _tree(path, payload=b"\0" * (INFLATED_BYTES + 1))
    elif case == "big metadata":
        _tree(path, meta=META + "#" * (METADATA_BYTES + 1 - len(META)))
    elif case == "link":
        link = zipfile.ZipInfo("u1/data/tree.nwk")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        _archive(path, [("u1/metadata.yaml", META), (link, "../../etc/passwd")])
    elif case == "twice":
        _archive(
            path,
            [("u1/metadata.yaml", META), ("u1/data/tree.nwk", TREE), ("u1/data/tree.nwk", b"x")],
        )
    elif case == "python tag":  # safe_load refuses it; the error was 4 lines
        _tree(path, meta=META + "x: !!python/object/apply:os.system ['true']\n")
    else:
        _tree(path, meta=META.replace("uuid: u1", "uuid: u2"))
    message = one_line_error(read_artifact, path, "tree")
    assert str(path) in message and expected in message, message


def test_stage_refuses_a_link_member_writing_nothing(tmp_path, capsys):
    """`aam stage` reads the artifact as check-data does: a link member's text is no table."""
    link = zipfile.ZipInfo("u1/data/tree.nwk")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    path = _archive(tmp_path / "link.qza", [("u1/metadata.yaml", META), (link, "x")])
    out = tmp_path / "staged"
    assert main(["stage", "--output-dir", str(out), "--tree", f"tree.nwk={path}"]) == 2
    assert "is a link, not a file" in capsys.readouterr().err
    assert not (out / "tree.nwk").exists()


BOMB_BYTES = 512 << 20  # more than a refusal may hold (500 MB), were the member read whole
# A child reads the artifact and prints its error line, then its own peak RSS in bytes: VmHWM,
# which starts afresh at exec (ru_maxrss keeps the forking process's, a test worker's GBs).
READ = """
import re, sys
from pathlib import Path
from aam.data.qiime2 import read_artifact
from aam.errors import InputError
try:
    read_artifact(sys.argv[1], "tree")
except InputError as err:
    print(err)
status = Path("/proc/self/status").read_text()
print(int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) * 1024)
"""


def _bomb(path: Path, member: str) -> Path:
    """An artifact whose ``member`` inflates to BOMB_BYTES of zeros (about 0.5 MB compressed),
    written in chunks so that building it holds little."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        if member != "u1/metadata.yaml":
            archive.writestr("u1/metadata.yaml", META)
        with archive.open(member, "w") as handle:
            chunk = bytes(1 << 20)
            for _ in range(BOMB_BYTES >> 20):
                handle.write(chunk)
        if member == "u1/metadata.yaml":
            archive.writestr("u1/data/tree.nwk", TREE)
    return path


@pytest.mark.parametrize(
    ("member", "declared", "expected"),
    [
        ("u1/data/tree.nwk", None, f"inflates to {BOMB_BYTES:,} bytes"),
        ("u1/metadata.yaml", None, f"inflates to {BOMB_BYTES:,} bytes"),
        ("u1/data/tree.nwk", 100, "not a readable QIIME 2 artifact (Bad CRC-32"),
    ],
    ids=["payload", "metadata", "declared-small"],
)
def test_a_zip_bomb_is_refused_within_5_s_and_500_mb(tmp_path, member, declared, expected):
    """A 0.5 MB archive whose member inflates to 512 MiB (the issue's: 2 GB in 4.3 GB of memory
    and 86 s) stops in one line, in under 5 s and 500 MB of peak memory, whether its declared
    size says so (refused unread) or lies (the read stops at the declared size)."""
    path = _bomb(tmp_path / "bomb.qza", member)
    if declared is not None:  # the uncompressed size in the local header and the directory
        _patched(path, 22, 24, declared.to_bytes(4, "little"))
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", READ, str(path)], capture_output=True, text=True, check=True
    )
    elapsed = time.monotonic() - start
    line, peak = run.stdout.strip().splitlines()
    assert str(path) in line and expected in line, line
    assert elapsed < 5 and int(peak) < 500e6, (elapsed, int(peak))
