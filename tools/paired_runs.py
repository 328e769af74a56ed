"""AAM against AAM: the paired difference of two runs' test metrics (e.g. pretrained minus from
scratch, an ensemble minus one of its members), from their predictions.tsv (`aam predict` with
the truth: a ``true`` column), on the samples both predicted, with the bootstrap draws that
metrics.json's intervals use (``aam.training.bootstrap``).

    python tools/paired_runs.py results/oral-full/runs/once/predict/predictions.tsv \
        results/oral-full/runs/scratch/predict/predictions.tsv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from aam.training.bootstrap import paired_differences  # noqa: E402
from aam.training.metrics import regression_metrics  # noqa: E402


def paired_runs(first: Path, second: Path) -> dict[str, dict]:
    """``first`` minus ``second``: every regression metric's value and paired 95% interval."""
    a, b = (
        pd.read_csv(p, sep="\t", dtype={"sample_id": str}).set_index("sample_id")
        for p in (first, second)
    )
    shared = a.index.intersection(b.index)
    if not len(shared) or not a.loc[shared, "true"].equals(b.loc[shared, "true"]):
        raise SystemExit(f"{first}, {second}: no shared samples with the same truth")
    truth = a.loc[shared, "true"].to_numpy(float)

    def score(predicted, idx):
        return regression_metrics(predicted[idx], truth[idx])

    second_predictions = {"second": b.loc[shared, "prediction"].to_numpy(float)}
    return paired_differences(
        score, a.loc[shared, "prediction"].to_numpy(float), second_predictions, len(shared)
    )["second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path, help="predictions.tsv of the run minuend")
    parser.add_argument("second", type=Path, help="predictions.tsv of the run subtracted")
    args = parser.parse_args()
    for key, difference in paired_runs(args.first, args.second).items():
        low, high = difference["interval"]
        print(f"{key}: {difference['value']:+.3f} [{low:+.3f}, {high:+.3f}]")


if __name__ == "__main__":
    main()
