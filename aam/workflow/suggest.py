"""Did you mean: the name to suggest for an unknown config key (standard library only: the
Snakefile's planning and the search's commands import this)."""

from __future__ import annotations

import difflib
from collections.abc import Collection

# Other tools' names of run options, and keys that moved, which a close match misses
# (learning_rate is far from lr): name -> the option (or, with a ".", the config key) to use.
ALIASES = {
    "learning_rate": "lr",
    "num_epochs": "epochs",
    "n_epochs": "epochs",
    "max_epochs": "epochs",
    "warmup_ratio": "warmup_fraction",
    "gradient_accumulation_steps": "grad_accum",
    "accumulate_grad_batches": "grad_accum",
    "clip_grad_norm": "max_grad_norm",
    "gradient_clip_val": "max_grad_norm",
    "early_stopping_patience": "patience",
    "num_heads": "attention_heads",
    "n_heads": "attention_heads",
    "num_layers": "layers",
    "n_layers": "layers",
    "hidden_size": "embedding_dim",
    "d_model": "embedding_dim",
    "dropout_rate": "dropout",
    "allow_missing_samples": "datasets.<dataset>.drop_samples_without_metadata",
}


def did_you_mean(key: str, known: Collection[str]) -> str:
    """`` (did you mean X?)`` for an unknown config key (``section.option`` too): its alias
    (``ALIASES``) where that is known or a key elsewhere, else the closest of ``known``; ``""``
    when none is close."""
    head, _, name = key.rpartition(".")
    alias = ALIASES.get(name)
    if alias is not None:
        named = alias if "." in alias or not head else f"{head}.{alias}"
        if "." in alias or named in known:
            return f" (did you mean {named}?)"
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]}?)" if close else ""
