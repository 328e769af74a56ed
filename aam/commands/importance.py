"""`aam importance`: which ASVs carry the signal, by AAM (gradient x input) and by the random
forest (permutation importance) on the test split, side by side (``aam.analysis.importance``)."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from aam.analysis.cross_validation import read_test_metrics
from aam.analysis.figures import add_label_arguments, target_label, title
from aam.analysis.importance import (
    FOREST_CANDIDATES,
    PERMUTATION_REPEATS,
    aam_importance,
    forest_importance,
    importance_table,
    rank_agreement,
)
from aam.analysis.importance_plot import plot_importance, row_labels
from aam.analysis.overview import best_constant, skill_caveat
from aam.analysis.prediction_tables import model_label
from aam.analysis.taxonomy import read_taxonomy
from aam.commands.baselines import add_forest_options
from aam.errors import InputError, NonFiniteError
from aam.models.files import load_model_file
from aam.options import add_options, from_args, option
from aam.runtime.atomic import atomic_output, check_output_dir, write_json
from aam.runtime.figures import add_format_argument, figure_name
from aam.runtime.threads import usable_threads
from aam.training.config import RuntimeConfig
from aam.training.device import resolve_device
from aam.training.inputs.study import Labels, load_study
from aam.training.inputs.study_options import StudyOptions

log = logging.getLogger(__name__)


@dataclass
class ImportanceOptions:
    """The options of `aam importance` but the shared ones (the forest's, titles, figure
    format, reading and run options)."""

    model: Path = option(None, "model.pt from `aam finetune`", required=True)
    table: Path = option(None, "BIOM table of the samples", required=True)
    metadata: Path = option(None, "sample metadata TSV", required=True)
    split: Path = option(None, "the model's split.tsv", required=True)
    output_dir: Path = option(
        None, "importance.tsv, importance.json, importance.<figure format>", required=True
    )
    max_samples: int = option(
        200, "test samples AAM's attributions are averaged over (the first ones)", minimum=1
    )
    top: int = option(20, "ASVs in the heatmap", minimum=1)
    metrics: Path | None = option(
        None,
        "the model's metrics.json from `aam predict`: where AAM did not beat the training "
        "mean, importance.tsv (a '#' line first), .json and the figure say so",
    )
    taxonomy: Path | None = option(
        None,
        "QIIME 2 taxonomy TSV of the ASVs (Feature ID: the sequence or its md5, Taxon, "
        "Confidence): each ASV is named by its deepest confident rank and its short ID",
    )
    batch_size: int = option(32, "samples per batch", minimum=1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam importance`."""
    add_options(parser, ImportanceOptions)
    add_forest_options(parser)
    add_options(parser, StudyOptions, "importance")
    add_options(parser, RuntimeConfig, "importance")
    add_format_argument(parser)
    add_label_arguments(parser)


def run(args: argparse.Namespace) -> None:
    """Write importance.tsv (one row per training ASV), importance.json (the rank agreement
    and the methods) and importance.png (the top ASVs' abundances against the target)."""
    opts = from_args(ImportanceOptions, args)
    if args.threads:
        torch.set_num_threads(usable_threads(args.threads))
    device = resolve_device(args.device)
    out_dir = check_output_dir(opts.output_dir, "output")
    model, state = load_model_file(opts.model, "predictor", ("target", "categorical"))
    target, categorical = state["target"], state["categorical"]
    study = load_study(
        opts.table,
        max_bp=model.config.max_bp,
        labels=Labels(
            opts.metadata,
            target["column"],
            bool(target["classes"]),
            categorical["columns"],
            categorical["levels"],
        ),
        split_path=opts.split,
        reading=from_args(StudyOptions, args),
        training=False,
    )
    train, test = study.subset("train"), study.subset("test")
    if not len(train) or not len(test):
        raise InputError(f"{opts.split}: needs train and test samples ({len(train)}, {len(test)})")
    explained = test[: opts.max_samples]
    aam = aam_importance(
        model.to(device),
        study,
        explained,
        device,
        batch_size=opts.batch_size,
        token_limit=model.config.token_limit,
    )
    forest, candidates = forest_importance(
        study, train, test, trees=args.trees, seed=args.seed, threads=args.threads or 1
    )
    if not (np.isfinite(aam).all() and np.isfinite(forest).all()):
        raise NonFiniteError(
            f"{opts.model}: an importance is NaN or infinite (the model's weights or gradients "
            "overflow); retrain the model (e.g. with a lower --lr)"
        )
    metrics = read_test_metrics(opts.metrics, "the model") if opts.metrics else None
    caveat = skill_caveat(metrics) if metrics else None
    taxonomy = read_taxonomy(opts.taxonomy) if opts.taxonomy else None
    table = importance_table(study, train, aam, forest, candidates, taxonomy)
    spearman = rank_agreement(table)
    _write_tables(out_dir, table, caveat, spearman, len(candidates), len(explained), len(test))
    plot_importance(
        out_dir / figure_name("importance", args.figure_format),
        study,
        test,
        table,
        opts.top,
        spearman,
        target_label(target["column"], args.target_unit),
        title("ASV importance", args.dataset, args.run)
        + (
            "\nof a model without shown skill: AAM did not beat the "
            + model_label(best_constant(metrics), classifier=bool(study.classes))
            if caveat
            else ""
        ),
    )
    log.info(
        "%s: %d ASVs; Spearman of AAM's and the forest's importance %.2f; top ASV: %s",
        out_dir,
        len(table),
        spearman,
        row_labels(table.head(1), int(table["forest_scored"].sum()), bool(study.classes))[0],
    )


def _write_tables(
    out_dir: Path,
    table: pd.DataFrame,
    caveat: str | None,
    spearman: float,
    candidates: int,
    explained: int,
    test: int,
) -> None:
    """importance.tsv (the skill caveat, if any, as a '#' line above it) and importance.json:
    the rank agreement over the forest's ``candidates`` and how each method scored."""
    with atomic_output(out_dir / "importance.tsv") as tmp:
        tmp.write_text(f"# {caveat}\n" if caveat else "")
        table.to_csv(tmp, sep="\t", index=False, float_format="%.6g", mode="a")
    write_json(
        out_dir / "importance.json",
        {
            "spearman_aam_forest": spearman,
            "skill_caveat": caveat,
            "spearman_over": f"the forest's {candidates} candidate ASVs (both scores)",
            "asvs": len(table),
            "explained_test_samples": explained,
            "test_samples": test,
            "aam": "mean over the explained test samples of |gradient x input| on each ASV's "
            "embedding entering the sample encoder (0 where absent)",
            "forest": f"permutation importance on the test split ({PERMUTATION_REPEATS} "
            f"shuffles each) of the {FOREST_CANDIDATES} ASVs of highest impurity importance; "
            "the others 0",
        },
    )
