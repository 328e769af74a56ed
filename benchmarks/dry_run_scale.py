"""Wall time of `snakemake -n all` with the demo config and with a resampled 100,000-sample
table: parsing the Snakefile reads no data file, so the two plan in about the same time.

The large table resamples the demo's samples (``resample_table.resample``: drawn with
replacement, reads redrawn); its metadata copies each source sample's row under the new ID.
Each dry run starts in a fresh copy of the checkout (no .snakemake) with a fresh workdir.

    python benchmarks/dry_run_scale.py --samples 100000 --repeats 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import biom
import pandas as pd
import yaml
from biom.util import biom_open

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resample_table import resample  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PARTS = ("aam", "workflow", "config", "profiles", "data", "containers", "tests/golden")


def scaled_dataset(root: Path, samples: int, seed: int) -> dict[str, str]:
    """The demo table resampled to ``samples`` samples and its metadata, under ``root``."""
    demo = REPO / "data/demo"
    table = resample(biom.load_table(str(demo / "table.biom")), samples, 1000, seed)
    with biom_open(str(root / "table.biom"), "w") as handle:
        table.to_hdf5(handle, "benchmarks/dry_run_scale.py")
    metadata = pd.read_csv(demo / "metadata.tsv", sep="\t", dtype=str, index_col=0)
    ids = list(table.ids())
    rows = metadata.loc[[sample.split(".", 1)[1] for sample in ids]]
    rows.index = pd.Index(ids, name=metadata.index.name)
    rows.to_csv(root / "metadata.tsv", sep="\t")
    return {"table": str(root / "table.biom"), "metadata": str(root / "metadata.tsv")}


def dry_run_seconds(config: dict, scratch: Path) -> float:
    """Wall time of one `snakemake all -n` in a fresh checkout copy and workdir."""
    run_dir = Path(tempfile.mkdtemp(dir=scratch))
    for part in PARTS:
        shutil.copytree(REPO / part, run_dir / part, ignore=shutil.ignore_patterns("*.pyc"))
    path = run_dir / "bench.yaml"
    path.write_text(yaml.safe_dump({**config, "workdir": str(run_dir / "work")}))
    cmd = [sys.executable, "-m", "snakemake", "all", "--profile", "profiles/local"]
    cmd += ["--configfile", str(path), "--dry-run"]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=run_dir, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"dry run failed:\n{done.stderr[-2000:]}")
    shutil.rmtree(run_dir)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    demo = yaml.safe_load((REPO / "config/config.yaml").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        scaled = yaml.safe_load(yaml.safe_dump(demo))
        for dataset in scaled["datasets"].values():
            dataset.update(scaled_dataset(scratch, args.samples, args.seed))
        medians = {}
        for name, config in (("demo", demo), (f"{args.samples} samples", scaled)):
            times = [dry_run_seconds(config, scratch) for _ in range(args.repeats)]
            medians[name] = statistics.median(times)
            print(f"{name}: median {medians[name]:.2f} s of {', '.join(f'{t:.2f}' for t in times)}")
    demo_s, scaled_s = medians.values()
    print(f"ratio {scaled_s / demo_s:.2f}")


if __name__ == "__main__":
    main()
