"""Which ASVs carry the signal: AAM's and the random forest's per-ASV importance, side by side.

AAM: gradient x input on each ASV's embedding as it enters the sample encoder, summed over the
embedding, its absolute value averaged over the explained test samples (0 where an ASV is
absent). It credits every ASV of a sample with its first-order share of that sample's
prediction (a classifier's: the log-probability of its predicted class) in one backward pass
per batch; integrated gradients would cost ~50 passes per sample, and the count of reads enters
the model after this point (so a gradient on the abundances would miss the ASV's identity).
At most ``max_samples`` test samples are explained: the cost is bounded on any corpus.

The forest: permutation importance (scikit-learn) on the test split, the drop of the forest's
score (R^2, or accuracy) when one ASV's abundances are shuffled across the test samples, for
the ``FOREST_CANDIDATES`` ASVs of highest impurity importance (the others: 0), so that its cost
does not grow with the number of ASVs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn

from aam.analysis.baselines import fit_forest, relative_abundances
from aam.analysis.taxonomy import short_ids, taxa_of
from aam.training.inference import encode_table_asvs, model_outputs
from aam.training.inputs.study import Study

FOREST_CANDIDATES = 50  # each costs PERMUTATION_REPEATS scorings of the whole forest
PERMUTATION_REPEATS = 3


def aam_importance(
    model: nn.Module,
    study: Study,
    positions: np.ndarray,
    device: torch.device,
    *,
    batch_size: int,
    token_limit: int,
) -> np.ndarray:
    """(n_asvs,) mean over ``positions`` of |gradient x input| of each table ASV (see above)."""
    model.eval().requires_grad_(False)  # gradients of the inputs only
    with torch.no_grad():
        table_embeddings = encode_table_asvs(model, study.samples, device)
    captured: list[torch.Tensor] = []

    def capture(_module, args):  # the ASV embeddings entering the sample encoder
        x = args[0].detach().requires_grad_(True)
        captured.append(x)
        return (x, *args[1:])

    hook = model.base.sample_encoder.register_forward_pre_hook(capture)
    total = np.zeros(len(study.samples.tokens))
    try:
        for batch in study.batches(positions, batch_size, token_limit):
            batch = batch.to(device)
            captured.clear()
            out = model_outputs(model, batch, asv_embeddings=table_embeddings)
            prediction = out["prediction"]
            if prediction.dim() == 2:  # log-probabilities: the predicted class's
                prediction = prediction.gather(1, prediction.argmax(1, keepdim=True))
            prediction.sum().backward()
            x = captured[0]
            attribution = (x.grad * x).sum(-1).abs()  # (B, A)
            present = batch.asv_index >= 0
            rows = batch.asv_rows[batch.asv_index.clamp_min(0)]  # (B, A) table ASV rows
            np.add.at(
                total,
                rows[present].cpu().numpy(),
                attribution[present].detach().double().cpu().numpy(),
            )
    finally:
        hook.remove()
    return total / max(len(positions), 1)


def forest_importance(
    study: Study, train: np.ndarray, test: np.ndarray, *, trees: int, seed: int, threads: int
) -> tuple[np.ndarray, np.ndarray]:
    """(n_asvs,) permutation importance of the forest fitted as `aam baselines` fits it, on the
    test samples, for the ``FOREST_CANDIDATES`` ASVs of highest impurity importance (0 for the
    others), and those candidates' table ASV indices."""
    from sklearn.inspection import permutation_importance

    forest = fit_forest(study, train, trees=trees, seed=seed, threads=threads)
    # Its ~150 scorings of the few test samples on one thread: joblib's dispatch over the trees
    # cost more than it saved (~3x per scoring on 2 cores), and one thread sums the trees'
    # predictions in the same order every run.
    forest.set_params(n_jobs=1)
    x_test = relative_abundances(study.samples, test)
    candidates = np.argsort(-forest.feature_importances_, kind="stable")[:FOREST_CANDIDATES]
    candidates = candidates[forest.feature_importances_[candidates] > 0]
    y = study.targets[test]
    if study.classes:
        y = y.astype(np.int64)
    scores = np.zeros(x_test.shape[1])
    if len(candidates):
        columns = x_test[:, candidates].toarray()
        rest = x_test.toarray()

        class OnCandidates:  # the forest reading the permuted candidate columns
            def fit(self, *_):
                return self

            def score(self, x, y_true):
                full = rest.copy()
                full[:, candidates] = x
                return forest.score(full, y_true)

        result = permutation_importance(
            OnCandidates(), columns, y, n_repeats=PERMUTATION_REPEATS, random_state=seed
        )
        scores[candidates] = result.importances_mean
    return scores, candidates


def importance_table(
    study: Study,
    train: np.ndarray,
    aam: np.ndarray,
    forest: np.ndarray,
    candidates: np.ndarray,
    taxonomy: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per ASV present in the training samples, AAM's rank order: its short ID
    (``aam.analysis.taxonomy.short_ids``), its Taxon and Confidence where ``taxonomy`` (as
    ``read_taxonomy`` reads it) has it, both scores and their ranks (1 = most important; the
    forest's among the ASVs it measured, its ``candidates``: ``forest_scored``, empty for the
    others), prevalence and mean relative abundance over the training samples, the sequence."""
    abundances = relative_abundances(study.samples, train)
    prevalence = np.asarray((abundances > 0).mean(axis=0)).ravel()
    mean_abundance = np.asarray(abundances.mean(axis=0)).ravel()
    asvs = list(study.samples.asv_ids)
    taxa = taxa_of(asvs, taxonomy) if taxonomy is not None else None
    scored = np.isin(np.arange(len(forest)), candidates)
    table = pd.DataFrame(
        {
            "asv_id": short_ids(asvs),
            "taxon": taxa["taxon"].to_numpy() if taxa is not None else np.nan,
            "confidence": taxa["confidence"].to_numpy() if taxa is not None else np.nan,
            "aam_score": aam,
            "forest_score": forest,
            "forest_scored": scored,
            "prevalence": prevalence,
            "mean_abundance": mean_abundance,
            "asv": asvs,
        }
    )
    table = table[table["prevalence"] > 0].copy()
    table["aam_rank"] = table["aam_score"].rank(ascending=False, method="min").astype(int)
    forest_rank = (
        table["forest_score"].where(table["forest_scored"]).rank(ascending=False, method="min")
    )
    table["forest_rank"] = forest_rank.astype("Int64")
    columns = ["asv_id", "taxon", "confidence", "aam_rank", "aam_score", "forest_rank"]
    columns += ["forest_score", "forest_scored", "prevalence", "mean_abundance", "asv"]
    return table.sort_values(["aam_rank", "asv"])[columns]


def rank_agreement(table: pd.DataFrame) -> float:
    """Spearman correlation of the two scores over the ASVs both scored (``forest_scored``;
    NaN if either score is constant there)."""
    from scipy.stats import spearmanr

    scored = table[table["forest_scored"]]
    if scored["aam_score"].nunique() < 2 or scored["forest_score"].nunique() < 2:
        return float("nan")
    return float(spearmanr(scored["aam_score"], scored["forest_score"]).statistic)
