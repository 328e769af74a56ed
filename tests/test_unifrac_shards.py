"""Sharded UniFrac (`aam unifrac-shard`, `aam unifrac-gather`, `unifrac.shards`): the gathered
matrix is the single job's bit for bit, a shard's memory follows its share, bad partial files
and settings stop with one line and leave nothing, and the workflow schedules K shards."""

from __future__ import annotations

import itertools
import tempfile
import tracemalloc
from pathlib import Path
from unittest import mock

import biom
import h5py
import numpy as np
import pytest
import skbio
import yaml
from biom.util import biom_open
from checkout import dry_run, job_counts
from hypothesis import given, settings
from hypothesis import strategies as st
from planning import check_data_error
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from aam.cli import main
from aam.data.table import load_counts
from aam.errors import InputError
from aam.unifrac import cpu_kernel, metrics
from aam.unifrac.engines import compute_unifrac
from aam.unifrac.io import read_distance_matrix
from aam.unifrac.pair_sums import METRICS
from aam.unifrac.shard_plan import shard_bounds, shard_rows
from aam.unifrac.shards import ShardSpec, compute_shard, gather, write_shard
from aam.unifrac.tree import load_tree
from aam.workflow.checks import check_unifrac_engine
from aam.workflow.config import config_error_line
from aam.workflow.dataset_checks import check_dataset

# One xdist worker: every worker that ran one of these tests would build the module fixtures.
pytestmark = pytest.mark.xdist_group("test_unifrac_shards")

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"


def spec(metric: str, shards: int, alpha: float = 0.5, dtype: str = "float64") -> ShardSpec:
    return ShardSpec(
        table_sha256="t" * 64,
        tree_sha256="n" * 64,
        metric=metric,
        alpha=alpha if metric == "generalized" else None,
        dtype=dtype,
        prune_missing=False,
        midpoint_root=False,
        shards=shards,
    )


def sharded(table, tree, want: ShardSpec, directory: Path, alpha: float = 0.5):
    """Every shard computed and written, then gathered (files passed in reverse order)."""
    paths = []
    for k in range(1, want.shards + 1):
        paths.append(directory / f"{k}of{want.shards}.h5")
        write_shard(paths[-1], compute_shard(table, tree, want, k, alpha=alpha, threads=2))
    return gather(paths[::-1], want)


@pytest.fixture(scope="module")
def demo():
    return load_counts(DEMO / "table.biom"), load_tree(DEMO / "tree.nwk")


@pytest.fixture(scope="module")
def single(demo):
    """`aam unifrac`'s matrices of the 400 demo samples, every metric, alpha 0.5."""
    return compute_unifrac(*demo, list(METRICS), alpha=0.5, threads=2)


# --- the gathered matrix is the single job's ---------------------------------------------


@pytest.mark.parametrize("shards", [1, 2, 3, 5])
@pytest.mark.parametrize("metric", METRICS)
def test_gathered_shards_are_the_single_job_bit_for_bit(demo, single, tmp_path, metric, shards):
    ids, matrix = sharded(*demo, spec(metric, shards), tmp_path)
    assert ids == demo[0].sample_ids
    assert matrix.dtype == single[metric].dtype == np.float64
    assert np.array_equal(matrix, single[metric])
    assert matrix.tobytes() == single[metric].tobytes()  # also the sign of every zero


def test_float32_and_another_alpha_are_bit_identical_too(demo, tmp_path):
    expected = compute_unifrac(*demo, ["generalized"], alpha=0.3, dtype=np.float32, threads=2)
    _, matrix = sharded(*demo, spec("generalized", 4, 0.3, "float32"), tmp_path, alpha=0.3)
    assert matrix.dtype == np.float32 and matrix.tobytes() == expected["generalized"].tobytes()


def random_tree(rng: np.random.Generator, n_tips: int) -> skbio.TreeNode:
    """A random rooted binary tree over tips t0.. with random lengths (a quarter of them 0)."""

    def length() -> float:
        return 0.0 if rng.random() < 0.25 else float(rng.exponential())

    nodes = [skbio.TreeNode(name=f"t{i}", length=length()) for i in range(n_tips)]
    while len(nodes) > 1:
        a = nodes.pop(rng.integers(len(nodes)))
        b = nodes.pop(rng.integers(len(nodes)))
        nodes.append(skbio.TreeNode(length=length(), children=[a, b]))
    nodes[0].length = None
    return nodes[0]


@st.composite
def studies(draw):
    n_tips, n_samples = draw(st.integers(2, 10)), draw(st.integers(1, 20))
    counts = np.array(
        draw(st.lists(st.integers(0, 6), min_size=n_tips * n_samples, max_size=n_tips * n_samples)),
        dtype=float,
    ).reshape(n_tips, n_samples)
    counts[0, counts.sum(axis=0) == 0] = 1  # every sample has reads
    table = biom.Table(
        counts, [f"t{i}" for i in range(n_tips)], [f"s{j}" for j in range(n_samples)]
    )
    tree = random_tree(np.random.default_rng(draw(st.integers(0, 2**32 - 1))), n_tips)
    metric = draw(st.sampled_from(METRICS))
    alpha = draw(st.sampled_from([0.0, 0.3, 0.5, 1.0]))
    return table, tree, metric, alpha, draw(st.integers(1, n_samples))


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(studies())
def test_any_study_split_any_way_gathers_to_the_single_job(study):
    """Also with tiles of 3 samples (128 in the single job), dense runs from 2 samples and
    distances 7 values at a time in the shards: a pair's distance does not depend on how the
    matrix is cut."""
    table, tree, metric, alpha, shards = study
    expected = compute_unifrac(table, tree, [metric], alpha=alpha, threads=1)[metric]
    with (
        tempfile.TemporaryDirectory() as tmp,
        mock.patch.object(cpu_kernel, "TILE", 3),
        mock.patch.object(cpu_kernel, "DENSE_RUN", 2),
        mock.patch.object(metrics, "_CHUNK", 7),
    ):
        _, matrix = sharded(table, tree, spec(metric, shards, alpha), Path(tmp), alpha=alpha)
    assert matrix.tobytes() == expected.tobytes()


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 3000).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))))
def test_shards_partition_the_rows_with_balanced_pairs(n_and_shards):
    n, shards = n_and_shards
    bounds = shard_bounds(n, shards)
    rows = list(itertools.pairwise(bounds))
    assert rows[-1] == shard_rows(n, shards, shards)
    assert rows[0][0] == 0 and rows[-1][1] == n
    assert all(start < stop for start, stop in rows)
    pairs = [sum(n - 1 - i for i in range(start, stop)) for start, stop in rows]
    assert max(pairs) <= n * (n - 1) / 2 / shards + n - 1  # off by at most one row's pairs


def test_a_shard_allocates_its_share_never_the_whole_matrix():
    """2,000 samples on a small tree, so the N x N arrays dominate: a shard of 8 peaks at
    about 2/8 of the single job's allocations and below one N x N float64 array."""
    rng = np.random.default_rng(0)
    n_tips, n = 40, 2000
    counts = np.zeros((n_tips, n))
    for j in range(n):
        counts[rng.choice(n_tips, 5, replace=False), j] = rng.integers(1, 50, 5)
    table = biom.Table(counts, [f"t{i}" for i in range(n_tips)], [f"s{j}" for j in range(n)])
    tree = random_tree(rng, n_tips)

    def peak(shards: int, shard: int) -> int:
        tracemalloc.start()
        try:
            compute_shard(table, tree, spec("generalized", shards), shard, threads=2)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    whole = peak(1, 1)
    assert whole > 2 * n * n * 8  # the single job: generalized UniFrac's two N x N sums
    for shard in range(1, 9):
        assert peak(8, shard) < min(whole * 2.5 / 8, n * n * 8), shard


# --- the commands ---------------------------------------------------------------------------


def aam(*args: str | Path) -> int:
    return main([str(a) for a in args])


def error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith(f"aam {command}: error:")]
    assert len(lines) == 1 and len(err.strip().splitlines()) == 1, err
    return lines[0]


def test_the_commands_write_the_file_aam_unifrac_writes(tmp_path):
    """`aam unifrac-shard` x3 + `aam unifrac-gather` against `aam unifrac`, on 60 samples."""
    tab = biom.load_table(str(DEMO / "table.biom"))
    tab = tab.filter(tab.ids()[:60], inplace=False).remove_empty(axis="observation")
    table = tmp_path / "t.biom"
    with biom_open(str(table), "w") as handle:
        tab.to_hdf5(handle, "test")
    common = ["--table", table, "--tree", DEMO / "tree.nwk", "--metric", "weighted_normalized"]
    assert aam("unifrac", *common, "--output", tmp_path / "one.h5", "--no-progress") == 0
    parts = [tmp_path / f"part{k}.h5" for k in (1, 2, 3)]
    for k, part in enumerate(parts, start=1):
        shard = ["--shard", k, "--shards", 3, "--output", part, "--no-progress"]
        assert aam("unifrac-shard", *common, *shard) == 0
    out = tmp_path / "gathered.h5"
    assert aam("unifrac-gather", *common, "--shards", 3, "--output", out, "--partials", *parts) == 0
    one, gathered = read_distance_matrix(tmp_path / "one.h5"), read_distance_matrix(out)
    assert one[0] == gathered[0] and one[1].tobytes() == gathered[1].tobytes()
    with h5py.File(out) as h5:
        assert set(h5) == {"matrix", "order"}
        assert h5.attrs["metric"] == "weighted_normalized" and h5.attrs["shards"] == 3


@pytest.fixture(scope="module")
def partials(tmp_path_factory):
    """Partial files of 40 demo samples: unweighted in 3 shards, and odd ones out."""
    root = tmp_path_factory.mktemp("partials")
    tab = biom.load_table(str(DEMO / "table.biom"))
    for name, ids in (("t.biom", tab.ids()[:40]), ("other.biom", tab.ids()[40:80])):
        part = tab.filter(ids, inplace=False).remove_empty(axis="observation")
        with biom_open(str(root / name), "w") as handle:
            part.to_hdf5(handle, "test")
    tree = skbio.TreeNode.read(str(DEMO / "tree.nwk"))
    for node in tree.traverse():
        node.length = None if node.length is None else 2 * node.length
    tree.write(str(root / "longer.nwk"), format="newick")

    def shard(name: str, k: int, shards: int = 3, metric: str = "unweighted", **files) -> Path:
        inputs = {"table": root / "t.biom", "tree": DEMO / "tree.nwk", **files}
        args = ["--metric", metric, "--shard", k, "--shards", shards, "--no-progress"]
        args += ["--table", inputs["table"], "--tree", inputs["tree"]]
        assert aam("unifrac-shard", *args, "--output", root / name) == 0
        return root / name

    made = {f"u{k}": shard(f"u{k}.h5", k) for k in (1, 2, 3)}
    made["weighted"] = shard("w2.h5", 2, metric="weighted_normalized")
    made["two_shards"] = shard("k2.h5", 1, shards=2)
    made["other_table"] = shard("ot2.h5", 2, table=root / "other.biom")
    made["other_tree"] = shard("on2.h5", 2, tree=root / "longer.nwk")
    (root / "trunc.h5").write_bytes(made["u1"].read_bytes()[:2000])
    made["truncated"] = root / "trunc.h5"
    made["table"] = root / "t.biom"
    return made


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (["u1", "u2"], "shard(s) 3 of 3 missing (no partial file given)"),
        (["u1", "u2", "u2", "u3"], "u2.h5 and {root}/u2.h5 are both shard 2 of 3"),
        (["u1", "weighted", "u3"], "w2.h5: shard 2 was computed with --metric weighted_normalized"),
        (["two_shards", "u2", "u3"], "k2.h5: shard 1 was computed with --shards 2, not 3"),
        (["u1", "other_table", "u3"], "ot2.h5: shard 2 was computed from another --table (sha256"),
        (["u1", "other_tree", "u3"], "on2.h5: shard 2 was computed from another --tree (sha256"),
        (["truncated", "u2", "u3"], "trunc.h5: corrupt or truncated partial file"),
        (["u1", "table", "u3"], "t.biom: not a partial UniFrac file of this version"),
    ],
    ids=["missing", "duplicated", "metric", "K", "table", "tree", "truncated", "not-a-partial"],
)
def test_gather_refuses_with_one_line_and_writes_nothing(
    partials, tmp_path, capsys, files, message
):
    out = tmp_path / "out" / "matrix.h5"
    args = ["--table", partials["table"], "--tree", DEMO / "tree.nwk", "--metric", "unweighted"]
    args += ["--shards", 3, "--output", out, "--partials", *(partials[f] for f in files)]
    assert aam("unifrac-gather", *args) == 2
    line = error_line(capsys, "unifrac-gather")
    assert message.format(root=partials["u1"].parent) in line, line
    assert not out.parent.exists()  # refused: not even the output directory is made


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--shard", 1, "--shards", 401],
            "--shards 401 ({table}): 401 shards but only 400 samples",
        ),
        (["--shard", 4, "--shards", 3], "--shard 4: choose a shard from 1 to 3 (--shards)"),
        (["--shard", 1, "--shards", 0], "0 shards; use at least 1"),
    ],
    ids=["more-shards-than-samples", "shard-out-of-range", "no-shards"],
)
def test_shard_refuses_bad_counts_with_one_line_and_writes_nothing(
    tmp_path, capsys, flags, message
):
    out = tmp_path / "out" / "part.h5"
    table = DEMO / "table.biom"
    args = ["--table", table, "--tree", DEMO / "tree.nwk", "--metric", "unweighted"]
    assert aam("unifrac-shard", *args, *flags, "--output", out) == 2
    assert message.format(table=table) in error_line(capsys, "unifrac-shard")
    assert not out.parent.exists()  # refused: not even the output directory is made


def test_shard_refuses_a_tsv_partial_before_any_work(tmp_path, capsys):
    args = ["--table", DEMO / "table.biom", "--tree", DEMO / "tree.nwk", "--metric", "unweighted"]
    assert (
        aam("unifrac-shard", *args, "--shard", 1, "--shards", 2, "--output", tmp_path / "p.tsv")
        == 2
    )
    assert "p.tsv: unsupported partial UniFrac file name (extension '.tsv')" in error_line(
        capsys, "unifrac-shard"
    )


# --- the workflow ---------------------------------------------------------------------------


def test_config_shards_below_one_stops_at_the_schema():
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["unifrac"] = {"shards": 0}
    with pytest.raises(WorkflowError) as caught:
        validate(config, str(REPO / "workflow/schemas/config.schema.yaml"))
    assert config_error_line(caught.value).startswith(
        "config unifrac.shards: 0 is less than the minimum of 1 (split each matrix"
    )


def test_config_shards_need_the_builtin_cpu_engine_and_a_sample_each():
    unifrac = {"shards": 2, "engine": "builtin", "device": "cpu"}
    check_unifrac_engine(unifrac)  # the config's, at parse time
    engine = "^config unifrac.shards: 2 shards run the builtin engine on the cpu, not engine "
    with pytest.raises(InputError, match=engine + "builtin on cuda; set unifrac.engine: builtin"):
        check_unifrac_engine({**unifrac, "device": "cuda"})
    files = ("demo", DEMO / "table.biom", DEMO / "metadata.tsv", "age")
    check_dataset(*files, shards=400)  # the data's, in the staging check
    with pytest.raises(
        InputError, match="401 shards but only 400 samples; use at most 400 shards$"
    ):
        check_dataset(*files, shards=401)


def _config(tmp_path: Path, checkout: Path, shards: int) -> Path:
    config = yaml.safe_load((checkout / "config/test.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config["unifrac"] = {"shards": shards, "matrix": True}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.workflow
def test_shards_3_schedule_three_shard_jobs_and_a_gather(tmp_path, checkout_copy):
    run = dry_run(checkout_copy, _config(tmp_path, checkout_copy, 3), "--printshellcmds")
    assert run.returncode == 0, run.stderr[-3000:]
    jobs = job_counts(run.stdout)
    assert jobs["unifrac_shard"] == 3 and jobs["unifrac_gather"] == 1 and "unifrac" not in jobs
    gather_line = next(line for line in run.stdout.splitlines() if " unifrac-gather " in line)
    assert f"--output {tmp_path}/work/unifrac/demo.unweighted.h5" in gather_line
    partials = gather_line.split("--partials ")[1].split(" --")[0].split()
    assert partials == [
        f"{tmp_path}/work/unifrac/shards/demo.unweighted.{k}of3.h5" for k in (1, 2, 3)
    ]
    assert not (tmp_path / "work").exists()


def test_more_shards_than_samples_stop_before_any_job(tmp_path):
    line = check_data_error(_config(tmp_path, REPO, 401), "demo")
    assert (
        "config unifrac.shards (dataset demo, data/demo/table.biom): 401 shards but only 400"
        in line
    )
