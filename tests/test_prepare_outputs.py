"""A run's directories are checked and locked by rank 0 alone; every rank fails with rank 0's
refusal. (A rank 1 that checked for itself lost a race under load: it saw no checkpoint
directory, then the one rank 0's lock had just made, and refused its own run.)"""

from pathlib import Path

import pytest

from aam.errors import InputError
from aam.training import run
from aam.training.config import RunPaths
from aam.training.parallel.distributed import DistContext

RANK_1 = DistContext(rank=1, world_size=2, local_rank=1)


def paths(output_dir: Path) -> RunPaths:
    return RunPaths(output_dir.parent / "table.biom", None, None, output_dir, None, None, None)


def rank_0_says(value: str | None, monkeypatch) -> list:
    """Stand in for the broadcast from rank 0 (``value``); what this rank offered is kept."""
    offered: list = []
    monkeypatch.setattr(run, "broadcast_from_main", lambda mine, ctx: offered.append(mine) or value)
    return offered


def test_rank_0_refuses_an_output_directory_that_is_a_file(tmp_path):
    (tmp_path / "out").write_text("")
    with pytest.raises(InputError, match="output directory is an existing file"):
        run.prepare_outputs(paths(tmp_path / "out"), DistContext(), "encoder.pt", "aam pretrain")


def test_rank_1_checks_nothing_and_fails_with_rank_0s_refusal(tmp_path, monkeypatch):
    (tmp_path / "out").write_text("")  # rank 1 would refuse this itself, if it looked
    offered = rank_0_says(None, monkeypatch)
    locks = run.prepare_outputs(paths(tmp_path / "out"), RANK_1, "encoder.pt", "aam pretrain")
    assert offered == [None] and not locks.locks  # rank 0 found it fine: so does rank 1
    rank_0_says("out: another aam pretrain is running", monkeypatch)
    with pytest.raises(InputError, match="^out: another aam pretrain is running$"):
        run.prepare_outputs(paths(tmp_path / "new"), RANK_1, "encoder.pt", "aam pretrain")
    assert not (tmp_path / "new").exists()  # nor locks or creates anything


def test_rank_0_locks_both_directories(tmp_path):
    with run.prepare_outputs(paths(tmp_path / "out"), DistContext(), "m.pt", "aam finetune"):
        assert (tmp_path / "out/.aam.lock").is_file()
        assert (tmp_path / "out/checkpoints/.aam.lock").is_file()
    assert not (tmp_path / "out/.aam.lock").exists()
