"""Token-budget batching: coverage, the budget, the batch floor, determinism."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from aam.data.token_batches import batch_floor, token_batches

lengths_st = st.lists(st.integers(1, 300), min_size=0, max_size=400).map(np.array)
budget_st = st.integers(1, 4000)
min_size_st = st.integers(1, 3)
multiple_st = st.integers(1, 4)


@given(lengths_st, budget_st, min_size_st, st.integers(0, 2**32))
def test_every_sample_appears_exactly_once_per_epoch(lengths, budget, min_size, seed):
    batches = token_batches(lengths, budget, np.random.default_rng(seed), min_size=min_size)
    seen = np.concatenate(batches) if batches else np.array([], dtype=int)
    if len(lengths) >= min_size:
        assert sorted(seen.tolist()) == list(range(len(lengths)))
    else:
        assert seen.size == 0


@given(lengths_st, budget_st, min_size_st, multiple_st, st.integers(0, 2**32))
def test_batches_keep_the_floor_split_evenly_and_cover_all_but_a_remainder(
    lengths, budget, min_size, multiple, seed
):
    batches = token_batches(
        lengths, budget, np.random.default_rng(seed), min_size=min_size, multiple=multiple
    )
    floor = batch_floor(min_size, multiple)
    seen = np.concatenate(batches).tolist() if batches else []
    assert len(seen) == len(set(seen))
    usable = len(lengths) - len(lengths) % multiple
    assert len(seen) == (usable if usable >= floor else 0)
    for batch in batches:
        assert len(batch) >= floor and len(batch) % multiple == 0


@given(lengths_st, budget_st, min_size_st, multiple_st, st.integers(0, 2**32))
def test_no_batch_exceeds_the_budget_unless_it_cannot_be_split(
    lengths, budget, min_size, multiple, seed
):
    batches = token_batches(
        lengths, budget, np.random.default_rng(seed), min_size=min_size, multiple=multiple
    )
    floor = batch_floor(min_size, multiple)
    for batch in batches:
        if padded_tokens(lengths[batch]) > budget:
            assert len(batch) < 2 * floor  # not two batches of the floor


@given(lengths_st, budget_st, st.integers(0, 2**32))
def test_single_samples_over_budget_are_the_only_oversize_batches_without_pairs(
    lengths, budget, seed
):
    for batch in token_batches(lengths, budget, np.random.default_rng(seed)):
        if padded_tokens(lengths[batch]) > budget:
            assert len(batch) == 1 and lengths[batch[0]] > budget


@given(lengths_st, budget_st, multiple_st, st.integers(0, 2**32))
def test_batches_are_a_function_of_the_seed(lengths, budget, multiple, seed):
    def run():
        rng = np.random.default_rng([seed, 3])
        return token_batches(lengths, budget, rng, min_size=2, multiple=multiple)

    assert [b.tolist() for b in run()] == [b.tolist() for b in run()]


def padded_tokens(lengths: np.ndarray) -> int:
    """Tokens of a batch of samples with ``lengths`` ASVs, padded to the longest (the budget's
    measure)."""
    return len(lengths) * int(lengths.max(initial=0))


def test_short_samples_make_large_batches_and_long_ones_small():
    lengths = np.array([10] * 100 + [200] * 20)
    batches = token_batches(lengths, 1000, np.random.default_rng(0), min_size=2)
    sizes = {int(lengths[b].max()): len(b) for b in batches if len(set(lengths[b])) == 1}
    assert sizes[10] > 20 * sizes[200] / 4  # 1000 tokens: up to 100 short or 5 long samples
    assert max(padded_tokens(lengths[b]) for b in batches) <= 1000


def test_batch_mates_change_between_epochs():
    lengths = np.random.default_rng(1).integers(10, 100, size=200)
    first, second = (
        {frozenset(b.tolist()) for b in token_batches(lengths, 800, np.random.default_rng(e))}
        for e in (0, 1)
    )
    assert first != second
