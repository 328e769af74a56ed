"""--compile model with inductor on the CPU, two `aam pretrain` processes sharing one compile
cache (``TORCHINDUCTOR_CACHE_DIR``, what the workflow gives every job): the second finds the
first's graphs and autograd entries (nothing bypasses the cache) and compiles in less time, to
the same losses. Extended tier: the cold compile takes about a minute of CPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pandas as pd
import pytest
from tiny_model import TINY_FLAGS

pytestmark = [pytest.mark.extended, pytest.mark.slow]
LINE = re.compile(
    r"(\d+) graph\(s\), (\d+) graph break\(s\), compiled in (\d+) s; cache (\S+) .*: graphs "
    r"(\d+) hit\(s\) (\d+) miss\(es\), autograd (\d+) hit\(s\) (\d+) miss\(es\) (\d+) bypass"
)


def pretrain(demo_dir, out, cache) -> tuple[int, ...]:
    """The numbers of the compile line of `aam pretrain --compile model` in ``cache``."""
    command = [
        sys.executable, "-m", "aam", "pretrain", "--table", demo_dir / "table.biom",
        "--tree", demo_dir / "tree.nwk", "--output-dir", out, *TINY_FLAGS, "--epochs", "1",
        "--batch-size", "32", "--compile", "model", "--attn-implementation", "math",
        "--val-fraction", "0.1", "--threads", "2", "--no-progress",
    ]  # fmt: skip
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    run = subprocess.run(list(map(str, command)), env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    match = LINE.search(run.stderr)
    assert match and match.group(4) == str(cache), run.stderr[-3000:]
    return tuple(int(match.group(k)) for k in (1, 2, 3, 5, 6, 7, 8, 9))


def test_a_second_job_compiles_warm_from_the_first_jobs_cache(demo_dir, tmp_path):
    cache = tmp_path / "compile-cache"
    graphs, breaks, cold_s, hits, misses, _, _, bypasses = pretrain(demo_dir, tmp_path / "a", cache)
    assert (graphs, breaks, hits, bypasses) == (2, 0, 0, 0) and misses > 0
    graphs, breaks, warm_s, hits, misses, auto_hits, _, bypasses = pretrain(
        demo_dir, tmp_path / "b", cache
    )
    assert (graphs, breaks, misses, bypasses) == (2, 0, 0, 0) and hits > 0 and auto_hits > 0
    assert warm_s < cold_s / 2, (warm_s, cold_s)
    first, second = (pd.read_csv(tmp_path / r / "history.tsv", sep="\t") for r in "ab")
    assert first["train_loss"].equals(second["train_loss"])
