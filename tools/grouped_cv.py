"""Pooled cross-validation of a classifier, with intervals over groups (people, studies): each
sample's prediction from the fold that tested it, AAM runs beside the fold baselines, and 95%
bootstrap intervals that resample whole groups (a sample-level bootstrap of a few people's time
series is far too narrow), paired across models.

    python tools/grouped_cv.py --work results/ibd --dataset ibd --group-column host_subject_id \
        --positive Crohns ibd ibd_scratch

Runs are the cv runs' names (their folds ``<run>_f<k>`` are read); the baselines are those of
the dataset's folds (``baselines/<dataset>/cv/*/fold<k>.tsv``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import accuracy_score, roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from aam.training.bootstrap import bootstrap_draws  # noqa: E402

DRAWS = 2000


def pooled(work: Path, dataset: str, runs: list[str]) -> pd.DataFrame:
    """A row per test sample: the truth and each model's predicted class and probabilities."""
    frames = []
    for fold in sorted((work / "baselines" / dataset / "cv").glob("*/fold*.tsv")):
        k = fold.stem.removeprefix("fold")
        base = pd.read_csv(fold, sep="\t", dtype={"sample_id": str})
        base = base[base["split"] == "test"].set_index(["sample_id", "model"]).drop(columns="split")
        models = {name: part.droplevel("model") for name, part in base.groupby(level="model")}
        for run in runs:
            path = work / "runs" / f"{run}_f{k}" / "predict" / "predictions.tsv"
            models[run] = pd.read_csv(path, sep="\t", dtype={"sample_id": str}).set_index(
                "sample_id"
            )
        truth = models[runs[0]]["true"]
        frame = pd.concat(
            {
                name: table.drop(columns=["true", "inputs"], errors="ignore")
                for name, table in models.items()
            },
            axis=1,
        )
        frame[("true", "class")] = truth
        frames.append(frame)
    return pd.concat(frames)


def scores(frame: pd.DataFrame, models: list[str], positive: str) -> dict[str, np.ndarray]:
    """Accuracy and AUC (of ``positive``) of each model."""
    truth = frame[("true", "class")].to_numpy()
    out = {}
    for name in models:
        probability = frame[(name, f"prob_{positive}")].to_numpy()
        auc = roc_auc_score(truth == positive, probability) if len(set(truth)) > 1 else np.nan
        out[name] = np.array([accuracy_score(truth, frame[(name, "prediction")]), auc])
    return out


def group_draws(
    frame: pd.DataFrame, groups: pd.Series, models: list[str], positive: str, draws: int = DRAWS
) -> list[dict[str, np.ndarray]]:
    """``scores`` of ``draws`` bootstrap resamples of whole groups (``groups``: a label per
    row of ``frame``), as `aam predict` draws them: the same draws for every model (paired
    differences)."""
    units = groups.to_numpy()
    picks = bootstrap_draws(len(frame), units, resamples=draws)
    return [scores(frame.iloc[rows], models, positive) for rows in picks]


def interval(values: list[np.ndarray]) -> np.ndarray:
    """The 95% percentile interval of each metric (rows: low, high)."""
    return np.nanpercentile(np.array(values), [2.5, 97.5], axis=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--group-column", required=True)
    parser.add_argument("--positive", required=True, help="the class whose probability AUC ranks")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    frame = pooled(args.work, args.dataset, args.runs)
    metadata = pd.read_csv(args.work / "data" / args.dataset / "metadata.tsv", sep="\t", dtype=str)
    groups = metadata.set_index(metadata.columns[0])[args.group_column].reindex(frame.index)
    models = [*args.runs, "random_forest", "mean"]
    point, draws = (
        scores(frame, models, args.positive),
        group_draws(frame, groups, models, args.positive),
    )
    print(
        f"{len(frame)} samples of {groups.nunique()} groups; 95% intervals over {DRAWS} group draws"
    )
    pairs = [(name, None) for name in models]
    pairs += [(args.runs[0], other) for other in [*args.runs[1:], "random_forest", "mean"]]
    for first, second in pairs:
        value = point[first] - (point[second] if second else 0)
        low, high = interval([d[first] - (d[second] if second else 0) for d in draws])
        sign = "+" if second else ""
        cells = [
            f"{m} {value[i]:{sign}.3f} [{low[i]:{sign}.3f}, {high[i]:{sign}.3f}]"
            for i, m in enumerate(("accuracy", "auc"))
        ]
        print(f"  {first}{f' - {second}' if second else ''}: " + ", ".join(cells))


if __name__ == "__main__":
    main()
