"""`aam embedding-forest`: the random forest on AAM's pretrained sample embeddings, and on the
embeddings beside the relative abundances, fitted on the training samples of a split and
predicting every sample, in `aam baselines`' layout: does the representation pretraining learned
carry what the forest on abundances lacks?"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aam.analysis.embedding_forest import EMBEDDING, embedding_forests
from aam.analysis.prediction_tables import MICROBIOME, baseline_table
from aam.commands.baselines import add_fit_arguments, add_forest_options
from aam.data.outputs import TSV_SUFFIXES, check_output_file
from aam.errors import InputError
from aam.models.files import load_model_file
from aam.options import add_options, from_args, option
from aam.runtime.atomic import atomic_output
from aam.training.device import resolve_device
from aam.training.inference import sample_embeddings
from aam.training.inputs.study import Labels, load_study

log = logging.getLogger(__name__)


@dataclass
class EmbeddingOptions:
    """The options of `aam embedding-forest` but those it shares with `aam baselines` (what a
    forest is fitted on, the forest's own)."""

    encoder: Path = option(None, "encoder.pt from `aam pretrain`", required=True)
    batch_size: int = option(32, "samples per batch", minimum=1)
    device: str = option("auto", "torch device of the encoder")
    threads: int = option(1, "CPU threads")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam embedding-forest`."""
    add_options(parser, EmbeddingOptions)
    add_fit_arguments(parser)
    add_forest_options(parser)


def run(args: argparse.Namespace) -> None:
    """Embed every sample with the encoder, fit both forests on the split's train samples,
    write their predictions of every sample."""
    opts = from_args(EmbeddingOptions, args)
    check_output_file(args.output, TSV_SUFFIXES, "embedding-forest predictions")
    encoder, _ = load_model_file(opts.encoder, "encoder")
    study = load_study(
        args.table,
        max_bp=encoder.config.max_bp,
        labels=Labels(args.metadata, args.target_column, args.classifier),
        split_path=args.split,
    )
    train = study.subset("train")
    if not len(train):
        raise InputError(f"{args.split}: no train samples to fit the forests on")
    device = resolve_device(opts.device)
    ids = list(study.samples.sample_ids)
    embeddings = sample_embeddings(
        encoder.to(device),
        study,
        np.arange(len(ids)),
        device,
        batch_size=opts.batch_size,
        token_limit=encoder.config.token_limit,
    )
    if not np.isfinite(embeddings).all():
        raise InputError(f"{opts.encoder}: non-finite sample embeddings; pretrain it again")
    predicted = embedding_forests(
        study, train, embeddings, trees=args.trees, seed=args.seed, threads=opts.threads
    )
    inputs = {
        "random_forest_embeddings": [EMBEDDING],
        "random_forest_embeddings_abundances": [EMBEDDING, MICROBIOME],
    }
    split = study.split.reindex(ids).to_numpy()
    table = baseline_table(ids, split, predicted, inputs, study.classes)
    with atomic_output(args.output) as tmp:
        table.to_csv(tmp, sep="\t", index=False, float_format="%.8g")
    log.info(
        "wrote %s: forests on %d-dimensional embeddings fitted on %d train samples",
        args.output,
        embeddings.shape[1],
        len(train),
    )
