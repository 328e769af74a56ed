"""A large table for UniFrac scaling benchmarks, resampled from the oral study.

Each new sample copies a sample of ``data/oral`` drawn with replacement and redraws its reads:
a multinomial draw of ``--depth`` reads from the source's relative abundances. Seeded, so the
same arguments give the same table. The tree stays ``data/oral/tree.nwk`` (same ASVs).

    python benchmarks/resample_table.py --samples 10000 --output results/benchmarks/oral10k.biom
"""

from __future__ import annotations

import argparse
from pathlib import Path

import biom
import numpy as np
import scipy.sparse as sp
from biom.util import biom_open

ORAL = Path(__file__).resolve().parents[1] / "data" / "oral"


def resample(table: biom.Table, samples: int, depth: int, seed: int) -> biom.Table:
    """``samples`` multinomial redraws of ``depth`` reads from sources drawn with replacement."""
    rng = np.random.default_rng(seed)
    counts = sp.csc_matrix(table.matrix_data)
    sources = rng.integers(0, counts.shape[1], size=samples)
    rows, cols, values = [], [], []
    for j, source in enumerate(sources):
        lo, hi = counts.indptr[source], counts.indptr[source + 1]
        asvs, reads = counts.indices[lo:hi], counts.data[lo:hi]
        drawn = rng.multinomial(depth, reads / reads.sum())
        rows.append(asvs[drawn > 0])
        cols.append(np.full(int((drawn > 0).sum()), j))
        values.append(drawn[drawn > 0])
    data = sp.csr_matrix(
        (np.concatenate(values).astype(float), (np.concatenate(rows), np.concatenate(cols))),
        shape=(counts.shape[0], samples),
    )
    ids = [f"r{j}.{table.ids()[source]}" for j, source in enumerate(sources)]
    resampled = biom.Table(data, table.ids("observation"), ids)
    return resampled.remove_empty(axis="observation")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", type=Path, default=ORAL / "table.biom")
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=1000, help="reads per new sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, required=True, help="BIOM (HDF5) to write")
    args = parser.parse_args()
    table = resample(biom.load_table(str(args.table)), args.samples, args.depth, args.seed)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with biom_open(str(args.output), "w") as handle:
        table.to_hdf5(handle, f"benchmarks/resample_table.py --seed {args.seed}")
    print(f"{args.output}: {table.shape[1]} samples, {table.shape[0]} ASVs, {table.nnz} non-zero")


if __name__ == "__main__":
    main()
