"""Inference: model outputs for a set of samples, in eval mode, each table ASV encoded once.

``model_outputs`` is the one forward of a ``Batch``, shared by the step loss, evaluation,
prediction and the golden check. ASV embeddings from ``encode_table_asvs`` are passed in
explicitly: a frozen base's (encoded once per run), or the current weights' for one
evaluated set.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

from aam.data.batching import Batch
from aam.data.samples import SampleSet
from aam.training.device import unwrap
from aam.training.inputs.study import Study
from aam.training.inputs.target_scale import TargetScale


def model_outputs(
    model: nn.Module,
    batch: Batch,
    *,
    tokens: torch.Tensor | None = None,
    nuc_mask: torch.Tensor | None = None,
    asv_embeddings: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The model's outputs for ``batch``: from the rows of ``asv_embeddings`` (every table ASV)
    of its ASVs when given, else from ``tokens`` (default the batch's own) with ``nuc_mask``."""
    kwargs: dict[str, torch.Tensor | None] = {"nuc_mask": nuc_mask}
    if asv_embeddings is not None:
        kwargs["unique_embeddings"] = asv_embeddings[batch.asv_rows]
        tokens = None
    elif tokens is None:
        tokens = batch.unique_tokens
    if batch.categories is not None:
        kwargs["categories"] = batch.categories
    return model(tokens, batch.asv_index, batch.counts, **kwargs)


def encode_table_asvs(
    model: nn.Module, samples: SampleSet, device: torch.device, chunk: int = 512
) -> torch.Tensor:
    """Embeddings of every table ASV (rows of ``samples.tokens``), in eval mode (no dropout)."""
    was_training = model.training
    model.eval()
    tokens = torch.from_numpy(samples.tokens.astype(np.int64)).to(device)
    embeddings = model.encode_asvs(tokens, chunk_size=chunk)
    model.train(was_training)
    return embeddings


@torch.no_grad()
def batch_outputs(
    model: nn.Module,
    study: Study,
    positions: np.ndarray,
    device: torch.device,
    *,
    batch_size: int,
    token_limit: int,
    asv_sampling: str = "first",
    asv_embeddings: torch.Tensor | None = None,
) -> Iterator[tuple[Batch, dict[str, torch.Tensor]]]:
    """``(batch, outputs)`` over every sample of ``positions`` in order (call in eval mode).
    Without ``asv_embeddings`` every table ASV is first encoded once with the current weights."""
    model = unwrap(model)
    if asv_embeddings is None:
        asv_embeddings = encode_table_asvs(model, study.samples, device)
    for batch in study.batches(positions, batch_size, token_limit, asv_sampling):
        batch = batch.to(device)
        yield batch, model_outputs(model, batch, asv_embeddings=asv_embeddings)


def predict(
    model: nn.Module,
    study: Study,
    positions: np.ndarray,
    device: torch.device,
    *,
    batch_size: int,
    token_limit: int,
    scale: TargetScale | None = None,
) -> np.ndarray:
    """Predictions for ``positions``: in the target's units given its regression ``scale``,
    else class log-probabilities."""
    raw = _output(model, study, positions, device, "prediction", batch_size, token_limit)
    if scale is None:
        return raw
    return scale.original(raw.squeeze(-1))


def sample_embeddings(
    model: nn.Module,
    study: Study,
    positions: np.ndarray,
    device: torch.device,
    *,
    batch_size: int,
    token_limit: int,
) -> np.ndarray:
    """The base's ``sample_embedding`` [len(positions), D] of each sample (an encoder's, or a
    predictor's base), in eval mode: what pretraining taught it about the sample's microbiome."""
    return _output(model, study, positions, device, "sample_embedding", batch_size, token_limit)


def _output(
    model: nn.Module,
    study: Study,
    positions: np.ndarray,
    device: torch.device,
    key: str,
    batch_size: int,
    token_limit: int,
) -> np.ndarray:
    """Output ``key`` of the model for every sample of ``positions``, in order, in eval mode."""
    model.eval()
    outputs = batch_outputs(
        model, study, positions, device, batch_size=batch_size, token_limit=token_limit
    )
    return torch.cat([out[key].float().cpu() for _, out in outputs]).numpy()
