"""Running out of space while aam writes: exit 2, one `aam <command>: error:` line naming the
file and the space, no temporary left, the previous file under the name unchanged.

Each writer runs on a file system with little room left, in one subprocess per way of making
it (the writers one after another, each on its own). Neither way needs root: a tmpfs per writer
mounted in an unprivileged user and mount namespace (`unshare --user --map-root-user --mount`),
filled up to ``budget`` bytes (the writer gets ENOSPC), where the kernel allows it; and always
a file size limit of ``budget`` bytes (RLIMIT_FSIZE with SIGXFSZ ignored: EFBIG), the portable
equivalent. Where the namespace is refused its cases fail with the reason (this project's CI
machines allow it; a machine that does not has lost a check, which a test must say); the file
size limit cases still run and pass on their own.
"""

from __future__ import annotations

import errno
import functools
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import biom
import pytest
import torch
from biom.util import biom_open

from aam.cli import main
from aam.errors import DiskFullError, InputError
from aam.runtime.atomic import atomic_output, check_output_dir, check_output_path, write_json

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"
TINY = (
    "--embedding-dim 16 --attention-heads 2 --layers 1 --max-bp 100 --token-limit 64 "
    "--epochs 1 --batch-size 8 --threads 2 --no-progress"
).split()
OLD = b"the previous file, which must survive\n"
# A one-epoch run on 24 samples validates on few: their correlation may be undefined. One
# worker runs the module: its fixtures run every writer against a full disk once.
pytestmark = [
    pytest.mark.faults,
    pytest.mark.filterwarnings(r"ignore:cov\(\)"),
    pytest.mark.xdist_group("disk_full"),
]
MODES = ("tmpfs", "rlimit")

# Runs in the subprocess, for each case: copy its seed files in, leave ``budget`` bytes
# (tmpfs: free on its file system; rlimit: the largest file), run `aam` with stderr to a file,
# and (tmpfs) copy what is left out of the namespace's mount.
RUNNER = r"""
import json, logging, os, resource, shutil, signal, sys, threading, traceback
logging.basicConfig(level=logging.WARNING)  # info lines off: stderr holds only the error
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from aam.cli import main
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
results = {}
for case in json.loads(sys.argv[1]):
    work, budget = case["work"], case["budget"]
    shutil.copytree(case["seed"], work, dirs_exist_ok=True)
    if case["mode"] == "tmpfs":
        filler = os.path.join(work, ".filler")
        stat = os.statvfs(work)
        with open(filler, "wb") as handle:
            os.posix_fallocate(handle.fileno(), 0, stat.f_bfree * stat.f_frsize - budget)
    sys.stderr.flush()
    saved = os.dup(2)
    # stderr into a pipe, not a file: the file size limit below must not cut the error line
    read_end, write_end = os.pipe()
    captured = []
    def drain():
        while chunk := os.read(read_end, 1 << 16):
            captured.append(chunk)
    reader = threading.Thread(target=drain)
    reader.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    if case["mode"] == "rlimit":
        resource.setrlimit(resource.RLIMIT_FSIZE, (budget, hard))
    try:
        rc = main(case["argv"])
    except SystemExit as stop:
        rc = stop.code
    except BaseException:
        traceback.print_exc()
        rc = "raised"
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        reader.join()
        os.close(read_end)
        with open(case["stderr"], "wb") as err:
            err.write(b"".join(captured))
    if case["mode"] == "tmpfs":
        os.unlink(filler)
        shutil.copytree(work, case["after"], dirs_exist_ok=True)
    results[case["name"]] = rc
print(json.dumps(results))
"""
MOUNT = """
while [ "$1" != -- ]; do mount -t tmpfs -o size="$1" tmpfs "$2" || exit 1; shift 2; done
shift && exec "$@"
"""


def aam(*args: str | Path) -> int:
    try:
        return main([str(a) for a in args])
    except SystemExit as stop:
        return int(stop.code or 0)


@functools.cache
def namespace_refused() -> str:
    """Why a tmpfs cannot be mounted in an unprivileged user namespace here ("" if it can)."""
    if shutil.which("unshare") is None:
        return "no unshare command"
    probe = Path(__file__).parent  # any directory: the mount is gone with the namespace
    cmd = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", MOUNT, "sh"]
    done = subprocess.run([*cmd, "64k", probe, "--", "true"], capture_output=True, text=True)
    return "" if done.returncode == 0 else (done.stderr.strip() or "refused").splitlines()[0]


def demo_subset(root: Path, samples: int = 24) -> dict[str, Path]:
    """The first ``samples`` demo samples: ``table`` (BIOM) and ``metadata`` under ``root``."""
    full = biom.load_table(str(DEMO / "table.biom"))
    table = full.filter(full.ids()[:samples], inplace=False).remove_empty(axis="observation")
    paths = {"table": root / "table.biom", "metadata": root / "metadata.tsv"}
    with biom_open(str(paths["table"]), "w") as handle:
        table.to_hdf5(handle, "aam tests")
    metadata = (DEMO / "metadata.tsv").read_text().splitlines()
    kept = set(table.ids())
    rows = [line for line in metadata[1:] if line.split("\t", 1)[0] in kept]
    paths["metadata"].write_text("\n".join([metadata[0], *rows]) + "\n")
    return paths


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A 24-sample table, its metadata, its UniFrac matrix and one shard of it."""
    paths = demo_subset(tmp_path_factory.mktemp("written"))
    root = paths["table"].parent
    unifrac = ["--table", paths["table"], "--tree", DEMO / "tree.nwk", "--metric", "unweighted"]
    paths[".h5"] = root / "unifrac.h5"
    assert aam("unifrac", *unifrac, "--output", paths[".h5"], "--no-progress") == 0
    paths["shard"] = root / "part1.h5"
    shard = ["--shard", "1", "--shards", "2", "--output", paths["shard"]]
    assert aam("unifrac-shard", *unifrac, *shard) == 0
    return paths


@pytest.fixture(scope="module")
def runs(inputs, tmp_path_factory) -> dict[str, Path]:
    """Inputs, and each output written once with room to spare (its size sets the budget)."""
    root = tmp_path_factory.mktemp("trained")
    paths = dict(inputs)
    paths["pretrain"] = root / "pretrain"
    training = ["--table", paths["table"], "--unifrac", paths[".h5"], *TINY]
    assert aam("pretrain", *training, "--output-dir", paths["pretrain"]) == 0
    paths["finetune"] = root / "finetune"
    target = ["--metadata", paths["metadata"], "--target-column", "age"]
    assert aam("finetune", *training, *target, "--output-dir", paths["finetune"]) == 0
    paths["predict"] = root / "predict"
    model = ["--model", paths["finetune"] / "model.pt", "--table", paths["table"]]
    assert aam("predict", *model, "--output-dir", paths["predict"], "--threads", "2") == 0
    return paths


def case_unifrac(runs, out, suffix):
    """`aam unifrac` with an old matrix in place; room for half the new one (the TSV's text is
    larger than the HDF5 file's float64s)."""
    target = out / f"unifrac{suffix}"
    argv = ["unifrac", "--table", runs["table"], "--tree", DEMO / "tree.nwk"]
    argv += ["--metric", "unweighted", "--output", target, "--no-progress"]
    return argv, {target.name: OLD}, target, runs[".h5"].stat().st_size // 2


def case_shard(runs, out):
    target = out / "part1.h5"
    argv = ["unifrac-shard", "--table", runs["table"], "--tree", DEMO / "tree.nwk"]
    argv += ["--metric", "unweighted", "--shard", "1", "--shards", "2", "--output", target]
    return argv, {target.name: OLD}, target, runs["shard"].stat().st_size // 2


def pretrain_seed(runs) -> dict[str, bytes]:
    """The finished one-epoch pretraining run's files, to resume from."""
    done = runs["pretrain"]
    return {str(p.relative_to(done)): p.read_bytes() for p in done.rglob("*") if p.is_file()}


def case_checkpoint(runs, out):
    """Resumed for its second epoch: best.pt (weights) fits, latest.pt (weights, optimizer
    state: about three times as large) does not. The seed is the finished one-epoch run with
    latest.pt's config saying two epochs: a two-epoch run stopped after its first."""
    argv = ["pretrain", "--table", runs["table"], "--unifrac", runs[".h5"], *TINY]
    argv += ["--epochs", "2", "--output-dir", out]
    latest = runs["pretrain"] / "checkpoints" / "latest.pt"
    best = runs["pretrain"] / "checkpoints" / "best.pt"
    assert best.stat().st_size * 2 < latest.stat().st_size
    budget = (best.stat().st_size + latest.stat().st_size) // 2
    seed, saved = pretrain_seed(runs), torch.load(latest, weights_only=True)
    saved["config"]["train"]["epochs"] = 2
    stopped = io.BytesIO()
    torch.save(saved, stopped)
    seed["checkpoints/latest.pt"] = stopped.getvalue()
    return argv, seed, out / "checkpoints" / "latest.pt", budget


def case_final_model(runs, out):
    """Rerun of the finished pretraining: no epoch, only the final files are rewritten."""
    argv = ["pretrain", "--table", runs["table"], "--unifrac", runs[".h5"], *TINY]
    argv += ["--output-dir", out]
    encoder = runs["pretrain"] / "encoder.pt"
    return argv, pretrain_seed(runs), out / "encoder.pt", encoder.stat().st_size // 2


def case_predict(runs, out):
    target = out / "predictions.tsv"
    argv = ["predict", "--model", runs["finetune"] / "model.pt", "--table", runs["table"]]
    argv += ["--output-dir", out, "--threads", "2"]
    return argv, {target.name: OLD}, target, (runs["predict"] / target.name).stat().st_size // 2


CASES = {
    "unifrac-h5": functools.partial(case_unifrac, suffix=".h5"),
    "unifrac-tsv": functools.partial(case_unifrac, suffix=".tsv"),
    "unifrac-shard": case_shard,
    "checkpoint": case_checkpoint,
    "final-model": case_final_model,
    "predict": case_predict,
}


@pytest.fixture(scope="module")
def outcomes(runs, tmp_path_factory) -> dict[tuple[str, str], dict]:
    """Every case run once per mode that works here (the modes at once): (writer, mode) -> what
    it left."""
    found, running = {}, {}
    for mode in MODES:
        if mode == "tmpfs" and namespace_refused():
            continue
        root = tmp_path_factory.mktemp(mode)
        cases, mounts = [], []
        for writer, make in CASES.items():
            case_dir = root / writer
            work = case_dir / "fs"  # the small file system (tmpfs) or a plain directory
            argv, seed, target, budget = make(runs, work / "out")
            seed_dir = case_dir / "seed"
            for name, data in seed.items():
                (seed_dir / "out" / name).parent.mkdir(parents=True, exist_ok=True)
                (seed_dir / "out" / name).write_bytes(data)
            after = case_dir / "after" if mode == "tmpfs" else work
            case = {"name": writer, "mode": mode, "work": str(work), "after": str(after)}
            case.update(seed=str(seed_dir), budget=budget, stderr=str(case_dir / "stderr"))
            cases.append({**case, "argv": [str(a) for a in argv]})
            found[writer, mode] = {**case, "argv": argv, "seed": seed, "target": target}
            if mode == "tmpfs":
                work.mkdir()
                pages = sum(-(-len(data) // 4096) for data in seed.values())
                mounts += [str(pages * 4096 + budget + (1 << 20)), str(work)]
        cmd = [sys.executable, "-W", "ignore", "-c", RUNNER, json.dumps(cases)]
        if mode == "tmpfs":
            prefix = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", MOUNT, "sh"]
            cmd = [*prefix, *mounts, "--", *cmd]
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        running[mode] = subprocess.Popen(cmd, text=True, cwd=root, **pipes)
    for mode, process in running.items():
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
        codes = json.loads(stdout.strip().splitlines()[-1])
        for writer in CASES:
            outcome = found[writer, mode]
            outcome["rc"] = codes[writer]
            outcome["lines"] = Path(outcome["stderr"]).read_text().strip().splitlines()
    return found


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("writer", list(CASES))
def test_out_of_space_is_one_line_and_keeps_the_previous_file(outcomes, writer, mode):
    if mode == "tmpfs":
        assert not namespace_refused(), f"no tmpfs in a user namespace: {namespace_refused()}"
    outcome = outcomes[writer, mode]
    lines, target, seed = outcome["lines"], outcome["target"], outcome["seed"]
    assert outcome["rc"] == 2 and len(lines) == 1, "\n".join(lines)
    line = lines[0]
    assert line.startswith(f"aam {outcome['argv'][0]}: error: {target}: cannot write the "), line
    if mode == "tmpfs":  # ENOSPC, or not enough space found before writing
        assert "no space left on device" in line or "not enough space" in line, line
        assert "free there" in line and "free space there" in line, line
    else:
        assert "file too large" in line and "ulimit -f" in line, line
    assert f"the previous {target.name} is kept" in line, line
    work, after = Path(outcome["work"]), Path(outcome["after"])
    assert not list(after.rglob("*.tmp")), list(after.rglob("*"))
    for name, data in seed.items():  # untouched (a checkpoint rotated only after a success)
        if not name.startswith("checkpoints/best"):
            assert (after / "out" / name).read_bytes() == data, name
    assert str(target.relative_to(work / "out")) in seed  # the file kept is among them


def test_refused_run_creates_no_output_directory(inputs, tmp_path, capsys):
    """Bad input is refused before the output directory (or its parents) is made."""
    out = tmp_path / "out"
    argv = ["--table", inputs["table"], "--unifrac", tmp_path / "missing.h5", *TINY]
    assert aam("pretrain", *argv, "--output-dir", out) == 2
    assert "missing.h5: distance matrix not found" in capsys.readouterr().err
    assert not out.exists()
    target = tmp_path / "new" / "unifrac.h5"
    missing = ["--table", tmp_path / "missing.biom", "--tree", DEMO / "tree.nwk"]
    assert aam("unifrac", *missing, "--metric", "unweighted", "--output", target) == 2
    assert "aam unifrac: error: " in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_refused_run_into_a_new_nested_directory_creates_nothing(inputs, tmp_path, capsys):
    out = tmp_path / "results" / "new"
    argv = ["--table", inputs["table"], "--unifrac", tmp_path / "missing.h5", *TINY]
    assert aam("pretrain", *argv, "--output-dir", out) == 2
    assert "missing.h5: distance matrix not found" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_unwritable_output_location_is_refused_before_any_work(inputs, tmp_path, capsys):
    """A file where a directory should be: refused at once, nothing created."""
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "out"
    argv = ["--table", inputs["table"], "--unifrac", inputs[".h5"], *TINY, "--output-dir", out]
    assert aam("pretrain", *argv) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"aam pretrain: error: {out}: cannot create the output"), line
    assert f"{tmp_path / 'file'}: Not a directory" in line, line


def test_checks_create_nothing_and_the_first_write_makes_the_directories(tmp_path):
    out = tmp_path / "a" / "b"
    assert check_output_dir(out) == out and check_output_path(out / "f.txt") == out / "f.txt"
    assert list(tmp_path.iterdir()) == []
    write_json(out / "f.json", {"x": 1})
    assert sorted(p.name for p in out.iterdir()) == ["f.json"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG])
def test_a_write_failing_for_space_is_one_disk_full_line(tmp_path, code):
    target = tmp_path / "m.tsv"
    target.write_bytes(OLD)
    with pytest.raises(DiskFullError) as raised, atomic_output(target, what="matrix") as tmp:
        tmp.write_bytes(b"12345")
        try:
            raise OSError(code, os.strerror(code))
        except OSError as err:
            raise RuntimeError("PytorchStreamWriter failed writing file data/0") from err
    line = str(raised.value)
    assert "\n" not in line and line.startswith(f"{target}: cannot write the matrix: "), line
    assert "5 bytes written" in line and "the previous m.tsv is kept" in line, line
    assert target.read_bytes() == OLD and sorted(tmp_path.iterdir()) == [target]


def test_other_write_failures_are_one_line_naming_the_target(tmp_path):
    """Another errno while writing (EIO, EROFS): one line naming the file, the previous kept."""
    target = tmp_path / "model.pt"
    target.write_bytes(b"good")
    with pytest.raises(InputError) as caught, atomic_output(target, what="model") as tmp:
        tmp.write_bytes(b"x")
        raise OSError(errno.EIO, os.strerror(errno.EIO))
    line = str(caught.value)
    assert line.startswith(f"{target}: cannot write the model: Input/output error; ")
    assert "the previous model.pt is kept" in line and "\n" not in line
    assert target.read_bytes() == b"good" and list(tmp_path.iterdir()) == [target]


def test_other_errors_pass_through(tmp_path):
    """Not the write (another file's error, or a bug while there is room): not renamed."""
    other = tmp_path / "input.tsv"
    with pytest.raises(FileNotFoundError, match="input.tsv"), atomic_output(tmp_path / "f"):
        other.read_text()
    with pytest.raises(RuntimeError, match="a bug"), atomic_output(tmp_path / "f"):
        raise RuntimeError("a bug")  # tmp_path's file system has room
    assert list(tmp_path.iterdir()) == []


def test_space_is_checked_before_writing_when_the_size_is_known(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(DiskFullError, match="not enough space"):
        with atomic_output(tmp_path / "big.h5", what="distance matrix", need=free + (1 << 40)):
            raise AssertionError("not reached: nothing is written")
    assert list(tmp_path.iterdir()) == []
