"""What a split means for a test score: whether the test samples' groups (subjects, studies)
also have training samples."""

from __future__ import annotations

import pandas as pd


def split_groups(tested: pd.Series, trained: pd.Series) -> dict:
    """Whether the test samples' groups (``tested``: a label per test sample) have training
    samples (``trained``): a random split of time series or studies puts a group on both
    sides, and its score then partly measures recognising the group."""
    known = tested[tested != "unknown"]
    shared = sorted(set(known) & set(trained[trained != "unknown"]))
    return {
        "column": tested.name,
        "test_groups": int(known.nunique()),
        "in_training": shared,
        "test_samples": len(known),
        "test_samples_in_trained_groups": int(known.isin(shared).sum()),
    }
