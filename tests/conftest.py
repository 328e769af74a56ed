"""Shared fixtures: the bundled demo data (real oral microbiome samples)."""

from pathlib import Path

import biom
import pytest

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    return DEMO


@pytest.fixture(scope="session")
def demo_table() -> biom.Table:
    return biom.load_table(str(DEMO / "table.biom"))
