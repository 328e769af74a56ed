"""Crash-safe training checkpoints (DESIGN.md section 4, "Training resume").

``save_checkpoint`` writes through ``aam.atomic.atomic_output``, keeping the old file as
``<stem>.prev.pt``, so a crash leaves a loadable file under one of the two names.
``resume_checkpoint`` moves a file that failed to load aside (``<name>.corrupt``), so the next
save cannot rotate it over the good previous file. Checkpoints hold only what
``torch.load(..., weights_only=True)`` accepts.
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from aam.atomic import atomic_output
from aam.errors import InputError

log = logging.getLogger(__name__)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def checkpoint_paths(directory: Path) -> tuple[Path, Path]:
    """Return the ``(latest.pt, best.pt)`` paths inside a checkpoint directory."""
    directory = Path(directory)
    return directory / "latest.pt", directory / "best.pt"


def previous_path(path: Path) -> Path:
    """Return where ``save_checkpoint`` keeps the file it replaced: ``<stem>.prev.pt``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev.pt")


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Atomically write ``state`` to ``path``, keeping the file it replaces as the previous one.
    A full disk raises ``DiskFullError`` (one line) with ``path`` and its previous file as they
    were."""
    path = Path(path)
    previous = previous_path(path)
    with (
        atomic_output(path, keep_previous=previous, what="checkpoint") as tmp,
        open(tmp, "wb") as handle,
    ):
        torch.save(state, handle)  # to a handle: the archive is not named after the temporary


def _try_load(path: Path, map_location: str | torch.device) -> tuple[dict[str, Any] | None, str]:
    """Load one checkpoint file; return ``(state, "")`` or ``(None, reason)``."""
    if not path.exists():
        return None, "missing"
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # any failure means this file is unusable; report why
        first_line = next(iter(str(exc).strip().splitlines()), "").split(". ")[0]
        return None, f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__
    if not isinstance(state, dict):
        return None, f"holds a {type(state).__name__}, not a checkpoint dict"
    return state, ""


def _load_with_fallback(
    path: Path, map_location: str | torch.device
) -> tuple[dict[str, Any] | None, Path, str]:
    """``(state, file used, why path itself was unusable or "")``; state None if neither exists.

    Raises InputError when both ``path`` and its previous file exist and are unusable.
    """
    prev = previous_path(path)
    if not path.exists() and not prev.exists():
        return None, path, ""
    state, reason = _try_load(path, map_location)
    if state is not None:
        return state, path, ""
    prev_state, prev_reason = _try_load(prev, map_location)
    if prev_state is None:
        raise InputError(
            f"cannot load checkpoint {path} ({reason}) nor {prev} ({prev_reason}); "
            f"delete {path.parent} to start over"
        )
    log.warning("checkpoint %s unusable (%s); using %s", path, reason, prev)
    return prev_state, prev, reason


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any] | None:
    """Load ``path``, falling back to its previous file if it is missing or corrupt.

    Returns None when neither file exists; raises InputError when both are unusable.
    """
    return _load_with_fallback(Path(path), map_location)[0]


def resume_checkpoint(
    path: Path, map_location: str | torch.device = "cpu", tidy: bool = True
) -> tuple[dict[str, Any] | None, Path]:
    """``load_checkpoint`` for resuming: also returns the file actually used. With ``tidy``, a
    ``path`` that exists but failed to load is renamed ``<name>.corrupt``, so the next save does
    not rotate it onto the good previous file it fell back to."""
    path = Path(path)
    state, used, reason = _load_with_fallback(path, map_location)
    if tidy and used != path and path.exists():
        aside = path.with_name(f"{path.name}.corrupt")
        os.replace(path, aside)
        log.warning("moved unusable %s (%s) aside to %s", path, reason, aside.name)
    return state, used


def capture_rng_state() -> dict[str, Any]:
    """Capture the Python, numpy (legacy global), torch CPU and CUDA RNG states."""
    name, keys, pos, has_gauss, cached_gaussian = np.random.get_state()  # noqa: NPY002
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached_gaussian),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restore RNG states from ``capture_rng_state``; CUDA only for devices present now."""
    random.setstate(state["python"])
    name, keys, pos, has_gauss, cached_gaussian = state["numpy"]
    np.random.set_state(  # noqa: NPY002
        (name, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached_gaussian)
    )
    torch.set_rng_state(state["torch"].cpu())
    if torch.cuda.is_available() and "cuda" in state:
        for device, cuda_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state.cpu(), device)


def _flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def check_config_matches(
    saved: dict[str, Any], current: dict[str, Any], path: Path, shown: int = 5
) -> None:
    """Raise InputError listing keys (nested as ``a.b``) whose saved and current values differ."""
    old, new = _flatten(saved), _flatten(current)
    differing = [
        key
        for key in sorted(old.keys() | new.keys())
        if old.get(key, _MISSING) != new.get(key, _MISSING)
    ]
    if not differing:
        return
    details = "; ".join(
        f"{key}: saved {old.get(key, _MISSING)!r}, current {new.get(key, _MISSING)!r}"
        for key in differing[:shown]
    )
    more = f" (+{len(differing) - shown} more)" if len(differing) > shown else ""
    raise InputError(
        f"checkpoint {path} was made with a different config: {details}{more}; "
        "use the config it was trained with, or a checkpoint trained with this config"
    )
