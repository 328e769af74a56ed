"""Shared fixtures: the bundled demo data (real oral microbiome samples)."""

from pathlib import Path

import biom
import pytest
from slurm_cluster import slurm_cluster  # noqa: F401  (one session-wide SLURM cluster)

from aam.unifrac.engines import compute_unifrac
from aam.unifrac.io import write_distance_matrix
from aam.unifrac.tree import load_tree

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    return DEMO


@pytest.fixture(scope="session")
def demo_table() -> biom.Table:
    return biom.load_table(str(DEMO / "table.biom"))


@pytest.fixture(scope="session")
def small_study(tmp_path_factory, demo_table, demo_dir):
    """48 demo samples with their UniFrac matrix."""
    root = tmp_path_factory.mktemp("study")
    ids = demo_table.ids()[:48]
    table = demo_table.filter(ids, inplace=False).remove_empty(axis="observation")
    with biom.util.biom_open(str(root / "table.biom"), "w") as handle:
        table.to_hdf5(handle, "test")
    tree = load_tree(demo_dir / "tree.nwk")
    matrix = compute_unifrac(table, tree, ["unweighted"], threads=1)["unweighted"]
    write_distance_matrix(root / "unifrac.h5", [str(s) for s in table.ids()], matrix)
    return root
