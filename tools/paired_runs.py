"""AAM against AAM: the paired difference of two runs' test metrics (e.g. pretrained minus from
scratch, searched minus the fixed recipe), from their predictions.tsv (`aam predict` with the
truth: a ``true`` column; a classifier's ``prob_<class>`` columns), on the samples both
predicted, with the bootstrap draws that metrics.json's intervals use
(``aam.training.bootstrap``): of samples, or with ``--groups`` of whole groups (people).

    python tools/paired_runs.py results/oral-full/runs/once/predict/predictions.tsv \
        results/oral-full/runs/scratch/predict/predictions.tsv
    python tools/paired_runs.py results/ibd/runs/{ibd_searched,ibd_fixed}/predict/predictions.tsv \
        --groups data/ibd/metadata.tsv host_subject_id
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from aam.training.bootstrap import paired_differences  # noqa: E402
from aam.training.metrics import classification_metrics, regression_metrics  # noqa: E402


def paired_runs(first: Path, second: Path, groups: pd.Series | None = None) -> dict[str, dict]:
    """``first`` minus ``second``: every metric's value and paired 95% interval (regression,
    or accuracy, macro F1 and AUC where the files hold class probabilities); ``groups``
    (sample_id -> group) draws whole groups."""
    a, b = (
        pd.read_csv(p, sep="\t", dtype={"sample_id": str, "true": str}).set_index("sample_id")
        for p in (first, second)
    )
    shared = a.index.intersection(b.index)
    if not len(shared) or not a.loc[shared, "true"].equals(b.loc[shared, "true"]):
        raise SystemExit(f"{first}, {second}: no shared samples with the same truth")
    probs = sorted(c for c in a.columns if c.startswith("prob_"))
    if probs:
        classes = [c.removeprefix("prob_") for c in probs]
        truth = a.loc[shared, "true"].map({c: k for k, c in enumerate(classes)}).to_numpy(int)

        def score(predicted, idx):
            return classification_metrics(torch.from_numpy(predicted[idx]), truth[idx])

        def values(table):
            return np.log(table.loc[shared, probs].to_numpy(float).clip(1e-12))
    else:
        truth = a.loc[shared, "true"].to_numpy(float)

        def score(predicted, idx):
            return regression_metrics(predicted[idx], truth[idx])

        def values(table):
            return table.loc[shared, "prediction"].to_numpy(float)

    clusters = None if groups is None else groups.reindex(shared).astype(str).to_numpy()
    others = {"second": values(b)}
    return paired_differences(score, values(a), others, len(shared), clusters)["second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path, help="predictions.tsv of the run minuend")
    parser.add_argument("second", type=Path, help="predictions.tsv of the run subtracted")
    parser.add_argument(
        "--groups", nargs=2, metavar=("METADATA", "COLUMN"), help="draw whole groups of COLUMN"
    )
    args = parser.parse_args()
    groups = None
    if args.groups:
        metadata = pd.read_csv(args.groups[0], sep="\t", dtype=str, comment=None)
        groups = metadata.set_index(metadata.columns[0])[args.groups[1]]
    for key, difference in paired_runs(args.first, args.second, groups).items():
        low, high = difference["interval"]
        print(f"{key}: {difference['value']:+.3f} [{low:+.3f}, {high:+.3f}]")


if __name__ == "__main__":
    main()
