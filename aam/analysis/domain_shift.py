"""How another study's samples differ from a model's training samples: ASVs, sequencing depth,
the token limit and covariate categories (`aam predict --training-table`, domain_shift.json),
and which of its samples got no prediction, with the reason."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import biom
import numpy as np
import pandas as pd

from aam.data.metadata import load_metadata
from aam.data.samples import SampleSet
from aam.data.split import read_split
from aam.data.table import load_table
from aam.errors import InputError

QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)


def sample_depths(table: biom.Table) -> pd.Series:
    """Reads per sample, indexed by sample ID."""
    totals = np.asarray(table.matrix_data.sum(axis=0), dtype=np.float64).ravel()
    return pd.Series(totals, index=[str(s) for s in table.ids()])


def asv_overlap(table: biom.Table, known: Collection[str]) -> dict:
    """ASVs of ``table`` not in ``known`` (the training samples' ASVs): how many, and their
    share of each sample's reads (mean and max over the samples)."""
    known = set(known)
    unseen = np.array([str(asv) not in known for asv in table.ids("observation")])
    counts = table.matrix_data.tocsr()
    totals = np.asarray(counts.sum(axis=0), dtype=np.float64).ravel()
    unseen_reads = np.asarray(counts[np.flatnonzero(unseen)].sum(axis=0), dtype=np.float64)
    share = unseen_reads.ravel() / np.maximum(totals, 1e-300)
    return {
        "asvs": len(unseen),
        "unseen_in_training": int(unseen.sum()),
        "unseen_read_share": {"mean": float(share.mean()), "max": float(share.max())},
        "samples_with_unseen_asvs": int((share > 0).sum()),
    }


def depth_comparison(depths: pd.Series, training: pd.Series, rarefy_depth: int | None) -> dict:
    """Reads per sample of this table and of the training samples (quantiles), how many
    samples lie outside the training range, and those below the rarefaction depth."""
    below = depths.index[depths < rarefy_depth] if rarefy_depth else pd.Index([])
    return {
        "quantiles": list(QUANTILES),
        "reads": [float(v) for v in depths.quantile(QUANTILES)],
        "training_reads": [float(v) for v in training.quantile(QUANTILES)],
        "below_training_min": int((depths < training.min()).sum()),
        "above_training_max": int((depths > training.max()).sum()),
        "rarefy_depth": rarefy_depth,
        "below_rarefy_depth": len(below),
    }


def token_limit_cut(samples: SampleSet, token_limit: int) -> dict:
    """Samples with more ASVs than ``token_limit`` as the model reads them: inference keeps
    each sample's first ``token_limit`` ASVs (table order); the share of reads left out."""
    lengths = np.diff(samples.asv_ptr)
    over = np.flatnonzero(lengths > token_limit)
    left_out = []
    for s in over:
        _, counts = samples.sample_asvs(s)
        left_out.append(float(counts[token_limit:].sum() / counts.sum()))
    return {
        "token_limit": token_limit,
        "samples_over": len(over),
        "max_asvs": int(lengths.max()),
        "left_out_read_share": {
            "mean": float(np.mean(left_out)) if left_out else 0.0,
            "max": float(np.max(left_out)) if left_out else 0.0,
        },
    }


def unseen_categories(
    metadata: pd.DataFrame, ids: Sequence[str], levels: dict[str, list[str]]
) -> dict:
    """Per covariate column: samples mapped to the unknown category (index 0), split into values
    never seen in training (with their sample counts) and empty cells."""
    out = {}
    for column, known in levels.items():
        values = metadata.loc[list(ids), column]
        present = values.dropna().astype(str)
        unseen = present[~present.isin(set(known))]
        out[column] = {
            "unknown": int(len(unseen) + values.isna().sum()),
            "unseen_values": {str(k): int(v) for k, v in unseen.value_counts().items()},
            "empty": int(values.isna().sum()),
        }
    return out


def not_predicted(
    table_ids: Sequence[str],
    metadata_ids: Sequence[str] | None,
    predicted: Collection[str],
    depths: pd.Series,
    rarefy_depth: int | None,
) -> dict[str, str]:
    """Every sample of the table or the metadata without a prediction -> why."""
    in_table, in_metadata = set(table_ids), set(metadata_ids or table_ids)
    reasons = {}
    for sample in dict.fromkeys([*table_ids, *(metadata_ids or [])]):
        if sample in predicted:
            continue
        if sample not in in_table:
            reasons[sample] = "in the metadata, not in the table"
        elif sample not in in_metadata:
            reasons[sample] = "in the table, not in the metadata"
        elif rarefy_depth and depths[sample] < rarefy_depth:
            reasons[sample] = f"{depths[sample]:g} reads, fewer than rarefy_depth {rarefy_depth}"
        else:
            raise RuntimeError(f"sample {sample} was dropped for no known reason")
    return reasons


def domain_shift_report(
    table_path: Path,
    metadata_path: Path | None,
    training_table_path: Path,
    training_split_path: Path,
    samples: SampleSet,
    category_levels: dict[str, list[str]],
    token_limit: int,
    rarefy_depth: int | None,
) -> dict:
    """domain_shift.json: this table (``samples``: its samples as the model read them) against
    the training samples (the ``train`` rows of the training split in the training table)."""
    table = load_table(table_path)
    training = load_table(training_table_path)
    split = read_split(training_split_path)
    train_ids = [str(s) for s in training.ids() if split.get(str(s)) == "train"]
    if not train_ids:
        raise InputError(
            f"{training_split_path}: no train sample of {training_table_path}; pass the split "
            "and table the model was fine-tuned on"
        )
    training = training.filter(train_ids, inplace=False).remove_empty(axis="observation")
    metadata = load_metadata(metadata_path) if metadata_path is not None else None
    depths = sample_depths(table)
    table_ids = list(depths.index)
    metadata_ids = list(metadata.index) if metadata is not None else None
    skipped = not_predicted(table_ids, metadata_ids, set(samples.sample_ids), depths, rarefy_depth)
    report = {
        "training": {
            "table": str(training_table_path),
            "split": str(training_split_path),
            "train_samples": len(train_ids),
            "asvs": len(training.ids("observation")),
        },
        "samples": {
            "table": len(table_ids),
            "predicted": len(samples),
            "not_predicted": skipped,
            "also_training_samples": len(set(table_ids) & set(train_ids)),
        },
        "asvs": asv_overlap(table, {str(a) for a in training.ids("observation")}),
        "depth": depth_comparison(depths, sample_depths(training), rarefy_depth),
        "token_limit": token_limit_cut(samples, token_limit),
    }
    if category_levels:
        if metadata is None:
            raise InputError("the model uses covariates: pass --metadata")
        report["categories"] = unseen_categories(metadata, samples.sample_ids, category_levels)
    return report
