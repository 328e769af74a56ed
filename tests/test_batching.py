"""Batches: per-batch padding, each distinct ASV once, every sample covered."""

import biom
import numpy as np
import pytest

from aam.data.batching import batch_indices, make_batch, select_asvs
from aam.data.samples import SampleSet
from aam.data.tokenize import PAD, START
from aam.errors import InputError


def _table() -> biom.Table:
    # 4 ASVs (one shorter, one with an N) x 3 samples; sample s2 shares ASVs with s0.
    data = np.array([[5, 0, 1], [0, 2, 0], [3, 0, 4], [1, 7, 0]], dtype=float)
    asvs = ["ACGTACGT", "ACG", "TTTTNNGG", "GGGGCCCC"]
    return biom.Table(data, asvs, ["s0", "s1", "s2"])


def test_sample_set_lists_each_samples_asvs_in_table_order():
    samples = SampleSet.from_table(_table(), max_bp=10)
    asvs, counts = samples.sample_asvs(0)
    assert asvs.tolist() == [0, 2, 3] and counts.tolist() == [5, 3, 1]
    assert samples.tokens.shape == (4, 11)


def test_batch_is_padded_to_its_own_longest_sample_and_sequence():
    samples = SampleSet.from_table(_table(), max_bp=50)
    batch = make_batch(samples, [1], token_limit=100)
    assert batch.asv_index.shape == (1, 2)  # sample s1 has 2 ASVs
    assert batch.unique_tokens.shape == (2, 9)  # START + 8 bases, not max_bp + 1
    assert (batch.unique_tokens[:, 0] == START).all()


def test_shared_asvs_are_encoded_once_and_indices_recover_them():
    samples = SampleSet.from_table(_table(), max_bp=10)
    batch = make_batch(samples, [0, 2], token_limit=100)
    assert batch.asv_rows.tolist() == [0, 2, 3]  # s2's ASVs {0, 2} are s0's too
    for row, s in enumerate([0, 2]):
        asvs, counts = samples.sample_asvs(s)
        idx = batch.asv_index[row][batch.asv_mask[row]]
        assert batch.asv_rows[idx].tolist() == asvs.tolist()
        assert batch.counts[row][batch.asv_mask[row]].tolist() == counts.tolist()
    assert batch.counts[1, 2] == 0 and batch.asv_index[1, 2] == -1  # padding


def test_targets_and_categories_follow_the_batch_order():
    samples = SampleSet.from_table(_table(), max_bp=10)
    batch = make_batch(
        samples,
        [2, 0],
        token_limit=10,
        targets=np.array([10.0, 11.0, 12.0]),
        categories=np.array([[1], [2], [3]]),
    )
    assert batch.distances is None  # the objective adds the UniFrac block
    assert batch.targets.tolist() == [12.0, 10.0]
    assert batch.categories.tolist() == [[3], [1]]


class _FirstAsvOnly:
    """A read draw that keeps each sample's first ASV with 5 reads."""

    def reads(self, samples, s):
        asvs, _ = samples.sample_asvs(s)
        return asvs[:1], np.array([5.0])


def test_a_draw_decides_the_reads_a_batch_sees():
    samples = SampleSet.from_table(_table(), max_bp=10)
    batch = make_batch(samples, [0, 2], token_limit=10, draw=_FirstAsvOnly())
    assert batch.asv_mask.sum(axis=1).tolist() == [1, 1]
    assert batch.counts[batch.asv_mask].tolist() == [5.0, 5.0]


def test_token_limit_selection_strategies():
    asvs, counts = np.array([10, 11, 12, 13]), np.array([1.0, 9.0, 3.0, 7.0])
    rng = np.random.default_rng(0)
    assert select_asvs(asvs, counts, 2, "first", rng)[0].tolist() == [10, 11]
    assert select_asvs(asvs, counts, 2, "abundance", rng)[0].tolist() == [11, 13]
    picked = select_asvs(asvs, counts, 3, "random", rng)[0]
    assert len(set(picked.tolist())) == 3 and set(picked.tolist()) <= set(asvs.tolist())


def test_batch_indices_cover_every_sample_once_and_merge_a_lone_last_sample():
    batches = list(batch_indices(9, 4, shuffle=True, rng=np.random.default_rng(1), min_size=2))
    assert [len(b) for b in batches] == [4, 5]
    assert sorted(np.concatenate(batches).tolist()) == list(range(9))
    assert [len(b) for b in batch_indices(9, 4, shuffle=False)] == [4, 4, 1]


def test_empty_sample_is_an_error_naming_it():
    table = biom.Table(np.array([[1.0, 0.0]]), ["ACGT"], ["full", "hollow"])
    with pytest.raises(InputError, match="hollow"):
        SampleSet.from_table(table, max_bp=10, table_name="t.biom")


def test_demo_table_batches_have_no_all_padding_rows(demo_table):
    samples = SampleSet.from_table(demo_table, max_bp=100)
    batch = make_batch(samples, range(8), token_limit=256)
    assert ((batch.unique_tokens != PAD).sum(dim=1) > 1).all()
    assert batch.asv_mask.sum(dim=1).min() >= 1
