"""Training on batch-local UniFrac (`aam pretrain --tree`): the weights of a run whose batches'
distances are computed from their reads and the tree equal those of a run that reads the
precomputed matrix (1 process, and 2 processes under torchrun with gloo); per-epoch
rarefaction (`--rarefy-each-epoch`) draws and evaluates on one fixed draw (its resume mid-epoch
to identical weights: faults/test_resume.py); and bad inputs stop with one line before the first
step.

Runs use the 48-sample study, one thread per process (CPU training is bit-reproducible only
with one), no dropout and no masks (drawn per rank), as tests/test_fsdp.py's do.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import biom
import numpy as np
import pytest
import torch
from biom.util import biom_open

from aam.data.rarefy import EVALUATION
from aam.training import evaluation
from aam.training.checkpointing.checkpoint import load_checkpoint
from aam.training.config import TrainConfig, UniFracOptions
from aam.training.evaluation import PAIR_GROUP, PairTruth, pair_groups
from aam.training.inputs.batches import TrainBatches
from aam.training.inputs.distances import TreeDistances
from aam.training.inputs.study import UniFracSource, load_study
from aam.training.inputs.study_options import StudyOptions
from aam.training.objective import Objective
from aam.training.parallel.distributed import DistContext
from aam.unifrac.batch_device import DeviceBatchUniFrac
from aam.unifrac.engines import compute_unifrac
from aam.unifrac.io import read_distance_matrix
from aam.unifrac.tree import load_tree

sys.path.insert(0, str(Path(__file__).parent))
from test_cli_training import aam, assert_failed  # noqa: E402
from test_fsdp import TINY_RUN, TORCHRUN, assert_same_training  # noqa: E402

DEPTH = 500  # --rarefy-depth of the per-epoch draws (every demo sample has 1000 reads)
RUN = TINY_RUN


@pytest.fixture(autouse=True)
def _torch_threads_kept():
    """The in-process runs set torch's threads to 1: give the worker its own back after."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def pretrain_args(table: Path, out: Path, *extra: str | Path, epochs: int = 1, val=0.25):
    """`aam pretrain` arguments (after `aam`): ``table``, ``out``, the tiny run, ``extra``."""
    flags = {"--table": table, "--output-dir": out, "--epochs": epochs, "--val-fraction": val}
    args = [str(part) for item in {**flags, **RUN}.items() for part in item]
    return ["pretrain", *args, "--no-progress", *map(str, extra)]


def latest(out: Path) -> dict:
    return load_checkpoint(out / "checkpoints" / "latest.pt")


def losses(history: list[dict]) -> list[dict[str, float]]:
    """The loss and UniFrac fit columns of a checkpoint's history (not the timings)."""
    return [{k: v for k, v in row.items() if "loss" in k or "unifrac" in k} for row in history]


def write_table(path: Path, table: biom.Table) -> Path:
    with biom_open(str(path), "w") as handle:
        table.to_hdf5(handle, "aam tests")
    return path


# --- the same weights from the tree as from the matrix --------------------------------------


@pytest.fixture(scope="module")
def from_matrix(small_study, tmp_path_factory) -> Path:
    """One epoch in one process on the precomputed float64 matrix (`aam unifrac`'s output)."""
    out = tmp_path_factory.mktemp("from_matrix")
    unifrac = small_study / "unifrac.h5"
    assert aam(*pretrain_args(small_study / "table.biom", out, "--unifrac", unifrac)) == 0
    return out


@pytest.mark.slow  # two trainings (one in the module fixture)
def test_one_process_on_the_tree_trains_to_the_weights_of_the_matrix(
    small_study, demo_dir, from_matrix, tmp_path
):
    out = tmp_path / "tree"
    tree = demo_dir / "tree.nwk"
    assert aam(*pretrain_args(small_study / "table.biom", out, "--tree", tree)) == 0
    ours, theirs = latest(out), latest(from_matrix)
    assert (ours["epoch"], ours["step"]) == (theirs["epoch"], theirs["step"]) == (1, 9)
    assert ours["model"].keys() == theirs["model"].keys()
    for name, tensor in theirs["model"].items():
        torch.testing.assert_close(ours["model"][name], tensor, rtol=0, atol=1e-6, msg=name)
    assert "val_unifrac_loss" in losses(ours["history"])[0]
    assert losses(ours["history"]) == pytest.approx(losses(theirs["history"]), rel=1e-6)


def _gpu_code_on_the_cpu(self: TreeDistances, engine, threads, device, share) -> TreeDistances:
    """``TreeDistances.on`` giving the gpu engine's code on the CPU (no stream)."""
    mine = DeviceBatchUniFrac.on(self.unifrac.node_share(*share, device=True), device)
    whole = DeviceBatchUniFrac.on(self.unifrac, device)
    return replace(self, device_unifrac=whole, rank_device_unifrac=mine)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["pool", "gpu code"])
def test_every_batch_unifrac_engine_trains_to_the_weights_of_the_matrix(
    small_study, demo_dir, from_matrix, tmp_path, monkeypatch, engine
):
    """The cpu engine on a pool of 2 threads (the serial kernel's distances bit for bit) and
    the gpu engine's code run on the CPU (float64 within rounding, cast to the loss's float32)
    train, like the serial kernel above, to the matrix run's weights (issue 38)."""
    out = tmp_path / "engine"
    if engine == "gpu code":
        monkeypatch.setattr(TreeDistances, "on", _gpu_code_on_the_cpu)
        flags = ["--unifrac-engine", "cpu"]
    else:
        monkeypatch.setattr("aam.training.inputs.distances.cpu_share", lambda: 2)
        flags = ["--unifrac-threads", "2"]
    args = pretrain_args(small_study / "table.biom", out, "--tree", demo_dir / "tree.nwk", *flags)
    assert aam(*args) == 0
    ours, theirs = latest(out), latest(from_matrix)
    assert (ours["epoch"], ours["step"]) == (theirs["epoch"], theirs["step"]) == (1, 9)
    for name, tensor in theirs["model"].items():
        torch.testing.assert_close(ours["model"][name], tensor, rtol=0, atol=1e-6, msg=name)
    assert losses(ours["history"]) == pytest.approx(losses(theirs["history"]), rel=1e-6)
    assert "device_busy" not in ours["history"][0]  # a CPU run measures no device time


@pytest.mark.extended  # 5 processes that import torch (~45 s of CPU): `make test-extended`
def test_four_processes_on_the_tree_train_to_the_weights_of_one_on_the_matrix(
    small_study, demo_dir, from_matrix, tmp_path
):
    """Each of 4 gloo ranks computes its share of the global batch's pairs from the tree and
    the ranks sum the shares (the pairs span all ranks); the weights are held to
    tests/test_fsdp.py's bounds of several ranks vs 1."""
    out = tmp_path / "ddp"
    args = pretrain_args(small_study / "table.biom", out, "--tree", demo_dir / "tree.nwk")
    four = [*TORCHRUN[:-1], "4"]
    run = subprocess.run([*four, "-m", "aam", *args], capture_output=True, text=True, timeout=300)
    # a rank's one-line error first: rank 0's traceback in a collective would hide it
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert run.returncode == 0, "\n".join(errors) + "\n" + run.stderr[-3000:]
    ours, theirs = latest(out), latest(from_matrix)
    assert (ours["epoch"], ours["step"]) == (theirs["epoch"], theirs["step"]) == (1, 9)
    assert_same_training(ours, theirs, lr=1e-3, steps=ours["step"])
    history = (out / "history.tsv").read_text().splitlines()
    matrix_history = (from_matrix / "history.tsv").read_text().splitlines()
    column = history[0].split("\t").index("val_unifrac_loss")
    ours_val = float(history[1].split("\t")[column])
    assert ours_val == pytest.approx(float(matrix_history[1].split("\t")[column]), rel=1e-5)


# --- per-epoch rarefaction ------------------------------------------------------------------


def drawn_study(small_study, demo_dir, seed: int):
    """The 48-sample study with --rarefy-each-epoch --rarefy-depth 500."""
    return load_study(
        small_study / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(tree=demo_dir / "tree.nwk", options=UniFracOptions()),
        reading=StudyOptions(rarefy_depth=DEPTH, rarefy_each_epoch=True, val_fraction=0.25),
        seed=seed,
    )


@pytest.fixture(scope="module")
def drawn(small_study, demo_dir):
    return drawn_study(small_study, demo_dir, seed=7)


def all_reads(study, epoch: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return [study.draw(epoch).reads(study.samples, s) for s in range(len(study.samples))]


def same_reads(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_every_draw_has_depth_reads_of_the_sample(drawn):
    for epoch in (0, 1, 2, EVALUATION):
        for s, (asvs, reads) in enumerate(all_reads(drawn, epoch)):
            table_asvs, table_reads = drawn.samples.sample_asvs(s)
            assert reads.sum() == DEPTH and (reads > 0).all()
            assert np.array_equal(reads, np.round(reads))
            where = np.searchsorted(table_asvs, asvs)
            assert np.array_equal(table_asvs[where], asvs)  # ASVs of the sample, table order
            assert (reads <= table_reads[where]).all()


def test_draws_differ_between_epochs_and_repeat_with_the_seed(drawn, small_study, demo_dir):
    epochs = {epoch: all_reads(drawn, epoch) for epoch in (0, 1, EVALUATION)}
    n = len(drawn.samples)
    assert drawn.samples.counts.reshape(-1).sum() == 1000 * n  # every sample can draw afresh
    for a, b in ((0, 1), (0, EVALUATION), (1, EVALUATION)):
        assert not any(same_reads(x, y) for x, y in zip(epochs[a], epochs[b], strict=True))

    again, other = (drawn_study(small_study, demo_dir, seed) for seed in (7, 8))
    for epoch, reads in epochs.items():
        assert all(map(same_reads, all_reads(again, epoch), reads))
        assert not any(map(same_reads, all_reads(other, epoch), reads))


def test_a_batch_reads_its_epochs_draw_and_its_distances(drawn, demo_dir):
    """The training batch of epoch e: reads drawn for e, and the exact UniFrac of those
    reads (the full float64 matrix of the drawn table, cast to float32)."""
    objective = Objective.of(TrainConfig(batch_size=12, mask_rate=0.0, seed=7), False, drawn)
    batches = TrainBatches(drawn, 10_000, ctx=DistContext(), distances=objective.use_unifrac)
    positions = np.arange(3, 15)
    tree = load_tree(demo_dir / "tree.nwk")
    blocks = []
    for epoch in (0, 1):
        batch = batches.batch(positions, np.random.default_rng(0), epoch)
        reads = [drawn.draw(epoch).reads(drawn.samples, s) for s in positions]
        for row, (asvs, counts) in enumerate(reads):
            real = batch.asv_index[row] >= 0
            assert np.array_equal(batch.asv_rows[batch.asv_index[row][real]].numpy(), asvs)
            assert np.array_equal(batch.counts[row][real].numpy(), counts)
        table = drawn_table(drawn, positions, reads)
        exact = compute_unifrac(table, tree, ["unweighted"], threads=1)["unweighted"]
        assert batch.distances.dtype == torch.float32
        assert torch.equal(batch.distances, torch.from_numpy(exact.astype(np.float32)))
        blocks.append(batch.distances)
    assert not torch.equal(blocks[0], blocks[1])


def drawn_table(study, positions, reads) -> biom.Table:
    """The biom table of ``reads`` (one draw of samples ``positions``)."""
    dense = np.zeros((len(study.samples.asv_ids), len(positions)))
    for column, (asvs, counts) in enumerate(reads):
        dense[asvs, column] = counts
    ids = [study.samples.sample_ids[s] for s in positions]
    return biom.Table(dense, study.samples.asv_ids, ids).remove_empty(axis="observation")


def test_evaluation_reads_one_fixed_draw(drawn):
    """Every evaluation batch and the scored pairs' truth come from draw(EVALUATION), not from
    a training epoch's draw or the table's reads."""
    val = drawn.subset("val")
    assert len(val) == 12
    fixed = [drawn.draw(EVALUATION).reads(drawn.samples, s) for s in val]
    for _ in range(2):  # the same every time
        seen = []
        for batch in drawn.batches(val, batch_size=5, token_limit=10_000):
            for row in range(len(batch.sample_index)):
                real = batch.asv_index[row] >= 0
                asvs = batch.asv_rows[batch.asv_index[row][real]].numpy()
                seen.append((asvs, batch.counts[row][real].numpy().astype(np.float64)))
        assert all(map(same_reads, seen, fixed))
    truth = PairTruth(TrainBatches(drawn, 128), val, seed=7).truth()
    assert len(truth) == 1
    i, j = np.triu_indices(len(val), k=1)
    fixed_block = drawn.distances.block(val, drawn.draw(EVALUATION))
    assert torch.equal(truth[0], torch.from_numpy(fixed_block[i, j]))
    epoch_block = drawn.distances.block(val, drawn.draw(0))
    assert not np.array_equal(fixed_block, epoch_block)


# --- bad input: one line, exit 2, before the first step -------------------------------------


@pytest.fixture(scope="module")
def odd_tables(small_study, tmp_path_factory) -> dict:
    """The 48-sample table with an ASV that is no tip of the demo tree ("stranger"), and with
    its first sample thinned to fewer than 600 reads ("shallow")."""
    root = tmp_path_factory.mktemp("odd_tables")
    table = biom.load_table(str(small_study / "table.biom"))
    dense, asvs, ids = table.matrix_data.toarray(), list(table.ids("observation")), table.ids()
    stranger = np.where(np.arange(len(ids)) % 4 == 0, 20.0, 0.0)
    thinned = dense.copy()
    thinned[:, 0] = np.floor(thinned[:, 0] / 2)
    return {
        "stranger": write_table(
            root / "stranger.biom",
            biom.Table(np.vstack([dense, stranger]), [*asvs, "ACGT" * 25], list(ids)),
        ),
        "shallow": write_table(root / "shallow.biom", biom.Table(thinned, asvs, list(ids))),
        "thinned_sample": str(ids[0]),
        "thinned_reads": int(thinned[:, 0].sum()),
    }


@pytest.mark.slow
def test_a_tree_lacking_table_asvs_stops_and_prune_missing_runs(
    odd_tables, demo_dir, tmp_path, capsys, caplog
):
    tree = demo_dir / "tree.nwk"
    out = tmp_path / "refused"
    rc = aam(*pretrain_args(odd_tables["stranger"], out, "--tree", tree))
    line = assert_failed(rc, capsys, "pretrain", out, "1 of", f"not tips of {tree}")
    assert "--prune-missing" in line
    pruned = tmp_path / "pruned"
    args = pretrain_args(odd_tables["stranger"], pruned, "--tree", tree, "--prune-missing")
    assert aam(*args) == 0
    assert (pruned / "encoder.pt").exists()
    assert "dropped 1 of" in caplog.text


def test_rarefy_each_epoch_without_a_depth(small_study, demo_dir, tmp_path, capsys):
    out = tmp_path / "out"
    args = ("--tree", demo_dir / "tree.nwk", "--rarefy-each-epoch")
    rc = aam(*pretrain_args(small_study / "table.biom", out, *args))
    assert_failed(rc, capsys, "pretrain", out, "--rarefy-each-epoch: needs --rarefy-depth")


def test_a_depth_above_a_samples_reads(odd_tables, demo_dir, tmp_path, capsys):
    out = tmp_path / "out"
    args = ("--tree", demo_dir / "tree.nwk", "--rarefy-each-epoch", "--rarefy-depth", "600")
    rc = aam(*pretrain_args(odd_tables["shallow"], out, *args))
    reads = odd_tables["thinned_reads"]
    assert reads < 600
    expected = (
        "1 samples have fewer reads",
        f"{odd_tables['thinned_sample']}, has {reads}",
        f"at most {reads}",
    )
    assert_failed(rc, capsys, "pretrain", out, str(odd_tables["shallow"]), *expected)


def test_rarefy_each_epoch_with_a_matrix(small_study, tmp_path, capsys):
    out = tmp_path / "out"
    args = ("--unifrac", small_study / "unifrac.h5", "--rarefy-each-epoch", "--rarefy-depth", 500)
    rc = aam(*pretrain_args(small_study / "table.biom", out, *args))
    assert_failed(rc, capsys, "pretrain", out, "--rarefy-each-epoch: needs --tree")


def test_tree_and_unifrac_together(small_study, demo_dir, tmp_path, capsys):
    out = tmp_path / "out"
    args = ("--tree", demo_dir / "tree.nwk", "--unifrac", small_study / "unifrac.h5")
    rc = aam(*pretrain_args(small_study / "table.biom", out, *args))
    assert_failed(rc, capsys, "pretrain", out, "--unifrac", "not allowed with argument --tree")


def test_pretrain_needs_a_tree_or_a_matrix(small_study, tmp_path, capsys):
    out = tmp_path / "out"
    rc = aam(*pretrain_args(small_study / "table.biom", out))
    assert_failed(rc, capsys, "pretrain", out, "pass --tree TREE", "--unifrac FILE")


def test_validation_pairs_above_the_bound_are_seeded_groups_of_at_most_the_bound():
    n = 2 * PAIR_GROUP + 5
    groups = pair_groups(n, seed=7)
    assert len(groups) == 3 and max(map(len, groups)) <= PAIR_GROUP
    assert max(map(len, groups)) - min(map(len, groups)) <= 1  # near-equal
    assert sorted(np.concatenate(groups).tolist()) == list(range(n))  # every sample once
    again, other = pair_groups(n, seed=7), pair_groups(n, seed=8)
    assert all(np.array_equal(a, b) for a, b in zip(groups, again, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(groups, other, strict=True))
    assert [g.tolist() for g in pair_groups(PAIR_GROUP, seed=7)] == [list(range(PAIR_GROUP))]


def test_validation_scores_the_pairs_within_each_group(monkeypatch, small_study):
    """With the bound at 8, the 48 validation samples fall in 6 groups: the truth of the
    scored pairs is each group's block of the matrix, nothing across groups."""
    monkeypatch.setattr(evaluation, "PAIR_GROUP", 8)
    study = load_study(
        small_study / "table.biom",
        max_bp=100,
        unifrac=UniFracSource(matrix=small_study / "unifrac.h5"),
    )
    positions = np.arange(len(study.samples))
    pairs = PairTruth(TrainBatches(study, 64), positions, seed=3)
    assert len(pairs.groups) == 6 and all(len(g) == 8 for g in pairs.groups)
    matrix = read_distance_matrix(small_study / "unifrac.h5")[1].astype(np.float32)
    rows = study.distances.row_of
    for group, truth in zip(pairs.groups, pairs.truth(), strict=True):
        i, j = np.triu_indices(len(group), k=1)
        block = matrix[np.ix_(rows[positions[group]], rows[positions[group]])]
        np.testing.assert_array_equal(truth.numpy(), block[i, j])
