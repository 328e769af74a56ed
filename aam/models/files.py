"""Model files: `aam pretrain` writes kind "encoder", `aam finetune` kind "predictor".

A model file holds ``kind``, ``config`` (``ModelConfig.to_dict()``) and ``model`` (the state
dict), plus what its stage needs; loading rebuilds the exact model from the file alone.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aam.errors import InputError
from aam.models.config import ModelConfig
from aam.models.predictor import SequencePredictor
from aam.models.sample_encoder import SequenceEncoder

log = logging.getLogger(__name__)

KINDS: dict[str, tuple[type[nn.Module], str, str]] = {
    "encoder": (SequenceEncoder, "an encoder", "aam pretrain"),
    "predictor": (SequencePredictor, "a fine-tuned model", "aam finetune"),
}


def read_torch_file(path: Path, map_location: str | torch.device = "cpu") -> Any:
    """``torch.load(path, weights_only=True)`` with the library's warnings held back: a file
    that fails to load is one error line of the caller's, not torch's warnings first; a file
    that loads logs each warning as one line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = torch.load(path, map_location=map_location, weights_only=True)
    for warning in caught:
        log.warning("%s: %s", path, " ".join(str(warning.message).split()))
    return state


def load_model_file(
    path: Path, kind: str, required: tuple[str, ...] = ()
) -> tuple[nn.Module, dict]:
    """(model with its weights, the file's whole dict); every problem is one InputError line."""
    cls, what, command = KINDS[kind]
    if not path.is_file():
        raise InputError(f"{path}: model not found; create it with `{command}`")
    try:
        state = read_torch_file(path)
    except Exception as err:  # torch raises many types for a damaged file
        reason = " ".join(f"{type(err).__name__}: {err}".split()).split(". ")[0]
        raise InputError(
            f"{path}: unreadable model file ({reason}); run `{command}` again"
        ) from err
    found = state.get("kind") if isinstance(state, dict) else type(state).__name__
    if found != kind:
        raise InputError(f"{path}: not {what} from `{command}` (kind {found})")
    missing = [key for key in ("config", "model", *required) if key not in state]
    if missing:
        raise InputError(f"{path}: model file lacks {missing}; run `{command}` again")
    try:
        model = cls(ModelConfig.from_dict(state["config"]))
        model.load_state_dict(state["model"])
    except (ValueError, RuntimeError, TypeError, AttributeError) as err:
        first = " ".join(str(err).split())[:240]
        raise InputError(
            f"{path}: weights do not fit the model config stored with them ({first}); the file "
            f"was written by another aam version or edited; run `{command}` again"
        ) from err
    return model, state
