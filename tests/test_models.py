"""aam.models: shapes, padding/dedup/permutation invariance, caching, masking, config, gradients."""

import io
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

from aam.data.tokenize import MASK, OTHER, PAD, START, VOCAB_SIZE, A, tokenize
from aam.models import (
    ModelConfig,
    SequenceEncoder,
    SequencePredictor,
    effective_attn_implementation,
    mask_nucleotides,
)
from aam.models.asv_encoder import sequence_keys, trim_width
from aam.models.layers import pin_sdpa_backends, sdpa_backends, set_attn_implementation
from aam.models.sample_encoder import gather_asvs

MAX_BP = 20
ATOL = 1e-5


def tiny(**changes) -> ModelConfig:
    base = dict(
        embedding_dim=32,
        attention_heads=2,
        asv_layers=1,
        sample_layers=1,
        encoder_layers=1,
        count_layers=1,
        target_layers=1,
        max_bp=MAX_BP,
        token_limit=16,
        dropout=0.1,
    )
    base.update(changes)
    return ModelConfig(**base)


def random_sequences(rng: np.random.Generator, n: int) -> list[str]:
    return ["".join(rng.choice(list("ACGTN"), size=rng.integers(3, MAX_BP + 5))) for _ in range(n)]


def make_batch(samples: list[list[str]], counts: list[list[float]], width: int | None = None):
    """Dedup the batch's sequences: unique_tokens [U, L] trimmed to ``width`` (default: longest
    row), asv_index [B, A] (-1 padding), counts [B, A]."""
    unique = sorted({s for sample in samples for s in sample})
    pos = {s: i for i, s in enumerate(unique)}
    tokens = torch.from_numpy(tokenize(unique, MAX_BP)).long()
    lengths = (tokens != PAD).sum(1)
    tokens = tokens[:, : width or int(lengths.max())]
    a = max(len(s) for s in samples)
    index = torch.full((len(samples), a), -1, dtype=torch.long)
    cnt = torch.zeros(len(samples), a)
    for i, (sample, c) in enumerate(zip(samples, counts, strict=True)):
        index[i, : len(sample)] = torch.tensor([pos[s] for s in sample])
        cnt[i, : len(sample)] = torch.tensor(c, dtype=torch.float32)
    return tokens, index, cnt


@pytest.fixture
def batch():
    rng = np.random.default_rng(0)
    pool = random_sequences(rng, 12)
    sizes = [5, 3, 7]
    samples = [list(rng.choice(pool, size=n, replace=False)) for n in sizes]
    counts = [list(rng.integers(1, 100, size=n).astype(float)) for n in sizes]
    return samples, counts


def seeded(cls, config, seed=0):
    torch.manual_seed(seed)
    return cls(config)


def assert_close(a, b, atol=ATOL):
    torch.testing.assert_close(a, b, atol=atol, rtol=0)


# -- shapes ---------------------------------------------------------------------------------


def test_output_shapes(batch):
    tokens, index, counts = make_batch(*batch)
    u, b, a = tokens.shape[0], *index.shape
    cfg = tiny(out_dim=3)
    enc = seeded(SequenceEncoder, cfg)
    masked, mask = mask_nucleotides(tokens, 0.3, torch.Generator().manual_seed(1))
    out = enc(masked, index, counts, nuc_mask=mask)
    assert set(out) == {"sample_embedding", "asv_embeddings", "asv_mask", "nuc_logits"}
    assert out["sample_embedding"].shape == (b, 32)
    assert out["asv_embeddings"].shape == (b, a, 32)
    assert out["asv_mask"].tolist() == (index >= 0).tolist()
    assert out["nuc_logits"].shape == (*tokens.shape, VOCAB_SIZE)  # every position's
    assert enc.encode_asvs(tokens).shape == (u, 32)
    assert "nuc_logits" not in enc(tokens, index, counts)

    pred = seeded(SequencePredictor, cfg)
    out = pred(tokens, index, counts)
    assert set(out) == {
        "prediction",
        "count_prediction",
        "sample_embedding",
        "asv_embeddings",
        "asv_mask",
    }
    assert out["prediction"].shape == (b, 3)
    assert out["count_prediction"].shape == (b, a)
    assert (out["count_prediction"][index < 0] == 0).all()
    assert "count_prediction" not in seeded(SequencePredictor, tiny(count_prediction=False))(
        tokens, index, counts
    )


def test_classifier_returns_log_probabilities(batch):
    tokens, index, counts = make_batch(*batch)
    pred = seeded(SequencePredictor, tiny(out_dim=4, classifier=True)).eval()
    logp = pred(tokens, index, counts)["prediction"]
    assert_close(logp.exp().sum(-1), torch.ones(index.shape[0]))


# -- invariances ----------------------------------------------------------------------------


def test_encode_trims_each_chunk_and_an_all_pad_chunk_embeds_to_zeros(batch):
    """``encode`` trims a chunk to its longest row before the (host-read-free) forward; a chunk
    of PAD rows only keeps one column and embeds to zeros, as it did before the trim moved out
    of the forward."""
    tokens, _, _ = make_batch(*batch)
    encoder = seeded(SequenceEncoder, tiny()).eval().asv_encoder
    wide = torch.zeros(len(tokens) + 2, MAX_BP + 1, dtype=torch.long)
    wide[: len(tokens), : tokens.shape[1]] = tokens
    assert trim_width(wide).shape[1] == int((tokens != PAD).sum(dim=1).max())
    assert trim_width(torch.zeros(3, MAX_BP + 1, dtype=torch.long)).shape == (3, 1)
    embedded = encoder.encode(wide, chunk_size=len(tokens))  # the last chunk: PAD rows only
    assert_close(embedded[: len(tokens)], encoder.encode(tokens))
    assert (embedded[len(tokens) :] == 0).all()


def test_a_model_without_attention_compiles():
    """--compile pins the attention kernels of the model; a model of 0-layer stacks has none
    to pin, and a model mixing implementations is refused."""
    bare = SequenceEncoder(tiny(asv_layers=0, sample_layers=0, encoder_layers=0))
    pin_sdpa_backends(bare, torch.device("cpu"))  # nothing to choose: no error
    mixed = SequenceEncoder(tiny())
    set_attn_implementation(mixed.asv_encoder, "math")
    with pytest.raises(ValueError, match="one attention implementation per compiled model"):
        pin_sdpa_backends(mixed, torch.device("cpu"))


@pytest.mark.parametrize("count_embedding", ["add", "concat", "none"])
def test_padding_invariance(batch, count_embedding):
    tokens, index, counts = make_batch(*batch)
    pred = seeded(SequencePredictor, tiny(count_embedding=count_embedding)).eval()
    masked, mask = mask_nucleotides(tokens, 0.3, torch.Generator().manual_seed(1))
    ref = pred(masked, index, counts, nuc_mask=mask)

    # Pad positions to max_bp + 1, add all-PAD unique rows, extra padding ASV slots.
    u, width = tokens.shape
    extra_rows = 3
    big = torch.zeros(u + extra_rows, MAX_BP + 1, dtype=torch.long)
    big[:u, :width] = masked
    big_mask = torch.zeros(big.shape, dtype=torch.bool)
    big_mask[:u, :width] = mask
    b, a = index.shape
    big_index = torch.full((b, a + 4), -1, dtype=torch.long)
    big_index[:, :a] = index
    big_counts = torch.zeros(b, a + 4)
    big_counts[:, :a] = counts
    out = pred(big, big_index, big_counts, nuc_mask=big_mask)

    assert_close(out["sample_embedding"], ref["sample_embedding"])
    assert_close(out["prediction"], ref["prediction"])
    assert_close(out["asv_embeddings"][:, :a], ref["asv_embeddings"])
    assert (out["asv_embeddings"][:, a:] == 0).all()
    assert_close(out["count_prediction"][:, :a], ref["count_prediction"])
    assert_close(out["nuc_logits"][big_mask], ref["nuc_logits"][mask])  # the scored positions
    assert torch.isfinite(out["nuc_logits"]).all()  # padding's too: the loss sums zeros there
    # Unique-row order does not matter either: the index decides.
    perm = torch.randperm(u + extra_rows, generator=torch.Generator().manual_seed(0))
    inverse = torch.argsort(perm)
    shuffled = big_index.clone()
    shuffled[big_index >= 0] = inverse[big_index[big_index >= 0]]
    out = pred(big[perm], shuffled, big_counts)
    assert_close(out["sample_embedding"], ref["sample_embedding"])


def test_extra_padded_sample_changes_nothing_else(batch):
    tokens, index, counts = make_batch(*batch)
    enc = seeded(SequenceEncoder, tiny()).eval()
    ref = enc(tokens, index, counts)
    index2 = torch.cat([index, torch.full((1, index.shape[1]), -1)])
    counts2 = torch.cat([counts, torch.zeros(1, index.shape[1])])
    out = enc(tokens, index2, counts2)
    assert_close(out["sample_embedding"][:-1], ref["sample_embedding"])
    assert torch.isfinite(out["sample_embedding"]).all()


def test_unique_dedup_equals_duplicated_rows(batch):
    samples, counts = batch
    tokens, index, cnt = make_batch(samples, counts)
    pred = seeded(SequencePredictor, tiny()).eval()
    ref = pred(tokens, index, cnt)
    # One token row per (sample, slot): sequences shared between samples are encoded repeatedly.
    valid = index >= 0
    dup_tokens = tokens[index[valid]]
    dup_index = torch.full_like(index, -1)
    dup_index[valid] = torch.arange(int(valid.sum()))
    out = pred(dup_tokens, dup_index, cnt)
    for key in ("sample_embedding", "asv_embeddings", "prediction", "count_prediction"):
        assert_close(out[key], ref[key])


@pytest.mark.slow
def test_permuting_asvs_keeps_sample_embedding(batch):
    tokens, index, counts = make_batch(*batch)
    pred = seeded(SequencePredictor, tiny()).eval()
    ref = pred(tokens, index, counts)
    perm = torch.tensor([6, 0, 4, 2, 1, 3, 5])  # sample 2 has 7 ASVs
    index2, counts2 = index.clone(), counts.clone()
    index2[2], counts2[2] = index[2, perm], counts[2, perm]
    out = pred(tokens, index2, counts2)
    assert_close(out["sample_embedding"], ref["sample_embedding"])
    assert_close(out["prediction"], ref["prediction"])
    assert_close(out["asv_embeddings"][2], ref["asv_embeddings"][2, perm])
    # With a sample position embedding, order is visible.
    pos = seeded(SequencePredictor, tiny(sample_position_embedding=True)).eval()
    a, b = pos(tokens, index, counts), pos(tokens, index2, counts2)
    assert not torch.allclose(a["sample_embedding"][2], b["sample_embedding"][2], atol=1e-4)


def test_counts_matter(batch):
    tokens, index, counts = make_batch(*batch)
    enc = seeded(SequenceEncoder, tiny()).eval()
    a = enc(tokens, index, counts)["sample_embedding"]
    b = enc(tokens, index, counts * 10)["sample_embedding"]
    assert not torch.allclose(a, b, atol=1e-4)


# -- cached embeddings / frozen base ------------------------------------------------------


def test_predictor_from_cached_embeddings_equals_full_forward(batch):
    tokens, index, counts = make_batch(*batch)
    pred = seeded(SequencePredictor, tiny(categorical_cardinalities=(3,)))
    cats = torch.tensor([[1], [2], [0]])
    pred.eval()
    ref = pred(tokens, index, counts, cats)
    cache = pred.encode_asvs(tokens, chunk_size=4)
    assert not cache.requires_grad
    out = pred(None, index, counts, cats, unique_embeddings=cache)
    for key in ("sample_embedding", "asv_embeddings", "prediction", "count_prediction"):
        assert_close(out[key], ref[key])

    # Frozen base stays in eval mode under train(): cached == recomputed, heads still train.
    pred.freeze_base()
    pred.train()
    assert not pred.base.training and pred.target_stack.training
    full = pred(tokens, index, counts, cats)
    cached = pred(None, index, counts, cats, unique_embeddings=pred.encode_asvs(tokens))
    assert_close(full["sample_embedding"], cached["sample_embedding"])
    assert_close(full["asv_embeddings"], cached["asv_embeddings"])
    with pytest.raises(ValueError, match="exactly one"):
        pred(tokens, index, counts, cats, unique_embeddings=cache)
    with pytest.raises(ValueError, match="nuc_mask needs"):
        pred(None, index, counts, cats, nuc_mask=tokens > 0, unique_embeddings=cache)


def test_freeze_base_leaves_base_without_grad(batch):
    tokens, index, counts = make_batch(*batch)
    pred = seeded(SequencePredictor, tiny())
    pred.freeze_base()
    out = pred(tokens, index, counts)
    (out["prediction"].sum() + out["count_prediction"].sum()).backward()
    assert all(p.grad is None and not p.requires_grad for p in pred.base.parameters())
    heads = [p for n, p in pred.named_parameters() if not n.startswith("base.")]
    assert heads and all(p.grad is not None for p in heads)


def test_gathered_asvs_sum_their_gradients_in_the_same_order_every_time():
    """Each sample slot reads its ASV's row (zeros at padding); the rows' gradients come out
    the same bit for bit on every backward, on 2 threads (indexing's atomics did not)."""
    generator = torch.Generator().manual_seed(0)
    index = torch.randint(0, 50, (32, 128), generator=generator)
    index[:, 96:] = -1  # padding slots
    rows = torch.randn(50, 32, generator=generator)
    upstream = torch.randn(32, 128, 32, generator=generator)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grads = []
        for _ in range(8):  # indexing's atomics gave a different sum in most of 8
            leaf = rows.clone().requires_grad_()
            out = gather_asvs(leaf, index)
            out.backward(upstream)
            grads.append(leaf.grad)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(out[:, :96], rows[index[:, :96]]) and not out[:, 96:].any()
    assert all(torch.equal(grads[0], g) for g in grads[1:])
    expected = torch.zeros_like(rows).index_add_(
        0, index[:, :96].reshape(-1), upstream[:, :96].reshape(-1, 32)
    )
    assert torch.allclose(grads[0], expected, atol=1e-5)


# -- masking --------------------------------------------------------------------------------


def test_mask_nucleotides():
    tokens, _, _ = make_batch([random_sequences(np.random.default_rng(3), 40)], [[1.0] * 40])
    original = tokens.clone()
    masked, mask = mask_nucleotides(tokens, 0.5, torch.Generator().manual_seed(7))
    assert torch.equal(tokens, original)  # input untouched
    assert mask.dtype == torch.bool and mask.shape == tokens.shape
    assert not mask[(tokens == PAD) | (tokens == START)].any()
    assert (masked[mask] == MASK).all() and (masked[~mask] == tokens[~mask]).all()
    eligible = (tokens >= A) & (tokens <= OTHER)
    assert 0.4 < mask.sum() / eligible.sum() < 0.6
    again, mask2 = mask_nucleotides(tokens, 0.5, torch.Generator().manual_seed(7))
    assert torch.equal(again, masked) and torch.equal(mask2, mask)
    _, other = mask_nucleotides(tokens, 0.5, torch.Generator().manual_seed(8))
    assert not torch.equal(other, mask)
    assert torch.equal(mask_nucleotides(tokens, 1.0)[1], eligible)
    assert not mask_nucleotides(tokens, 0.0)[1].any()
    with pytest.raises(ValueError, match="rate"):
        mask_nucleotides(tokens, 1.5)


# -- config ---------------------------------------------------------------------------------


def test_config_round_trip_and_rebuild_from_checkpoint(batch):
    cfg = tiny(
        categorical_cardinalities=(3, 5), categorical_fusion="add", classifier=True, out_dim=3
    )
    data = cfg.to_dict()
    assert isinstance(data["categorical_cardinalities"], list)
    assert all(isinstance(v, (int, float, bool, str, list)) for v in data.values())
    assert ModelConfig.from_dict(data) == cfg
    assert ModelConfig.from_dict({}) == ModelConfig()

    tokens, index, counts = make_batch(*batch)
    cats = torch.tensor([[1, 4], [2, 0], [0, 3]])
    model = seeded(SequencePredictor, cfg).eval()
    buf = io.BytesIO()
    torch.save({"config": model.config.to_dict(), "model": model.state_dict()}, buf)
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)
    rebuilt = SequencePredictor(ModelConfig.from_dict(ckpt["config"]))
    rebuilt.load_state_dict(ckpt["model"])  # strict
    rebuilt.eval()
    assert torch.equal(
        rebuilt(tokens, index, counts, cats)["prediction"],
        model(tokens, index, counts, cats)["prediction"],
    )


def test_config_rejects_unknown_and_invalid():
    with pytest.raises(ValueError, match=r"unknown model config key\(s\) \['bogus'\]"):
        ModelConfig.from_dict({**ModelConfig().to_dict(), "bogus": 1})
    bad = [
        dict(embedding_dim=30, attention_heads=4),
        dict(count_embedding="film"),
        dict(categorical_fusion="gmu"),
        dict(attn_implementation="sdpa"),
        dict(classifier=True, out_dim=1),
        dict(dropout=1.0),
        dict(embedding_dim="128"),
        dict(classifier=1),
        dict(categorical_cardinalities=(1,)),
        dict(max_bp=0),
    ]
    for kwargs in bad:
        with pytest.raises(ValueError):
            ModelConfig(**kwargs)


def test_input_limits_are_checked(batch):
    tokens, index, counts = make_batch(*batch)
    enc = seeded(SequenceEncoder, tiny(token_limit=6))
    with pytest.raises(ValueError, match="token_limit"):
        enc(tokens, index, counts)  # 7 ASV slots > 6
    enc = seeded(SequenceEncoder, tiny())
    too_long = torch.cat([tokens, torch.ones(tokens.shape[0], MAX_BP + 2 - tokens.shape[1])], 1)
    with pytest.raises(ValueError, match="max_bp"):
        enc(too_long.long(), index, counts)
    with pytest.raises(ValueError, match="counts shape"):
        enc(tokens, index, counts[:, :2])


# -- gradients ------------------------------------------------------------------------------


def pretrain_loss(out, tokens, mask):
    emb = out["sample_embedding"]
    dist = torch.tanh(torch.cdist(emb, emb) / 10)
    return dist.triu(1).pow(2).sum() + F.cross_entropy(out["nuc_logits"][mask], tokens[mask])


@pytest.mark.slow
def test_gradients_reach_every_parameter_in_pretraining(batch):
    tokens, index, counts = make_batch(*batch)
    for count_embedding in ("add", "concat"):
        enc = seeded(SequenceEncoder, tiny(count_embedding=count_embedding))
        masked, mask = mask_nucleotides(tokens, 0.3, torch.Generator().manual_seed(2))
        out = enc(masked, index, counts, nuc_mask=mask)
        pretrain_loss(out, tokens, mask).backward()
        for name, p in enc.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, name

    pred = seeded(SequencePredictor, tiny(categorical_cardinalities=(3,)))
    out = pred(masked, index, counts, torch.tensor([[1], [2], [1]]), nuc_mask=mask)
    loss = (
        pretrain_loss(out, tokens, mask) + out["prediction"].sum() + out["count_prediction"].sum()
    )
    loss.backward()
    for name, p in pred.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_gradient_checkpointing_matches(batch):
    tokens, index, counts = make_batch(*batch)
    masked, mask = mask_nucleotides(tokens, 0.3, torch.Generator().manual_seed(2))

    def run(checkpointing):
        model = seeded(SequencePredictor, tiny(asv_layers=2, gradient_checkpointing=checkpointing))
        model.train()
        torch.manual_seed(123)  # same dropout draws in both runs
        out = model(masked, index, counts, nuc_mask=mask)
        loss = pretrain_loss(out, tokens, mask) + out["prediction"].sum()
        loss.backward()
        return loss.detach(), {n: p.grad for n, p in model.named_parameters()}

    loss_a, grads_a = run(False)
    loss_b, grads_b = run(True)
    assert_close(loss_a, loss_b)
    for name in grads_a:
        assert_close(grads_a[name], grads_b[name], atol=1e-5)
    model = seeded(SequenceEncoder, tiny())
    model.set_gradient_checkpointing(True)
    assert model.config.gradient_checkpointing and model.encoder_stack.gradient_checkpointing


# -- categorical fusion ---------------------------------------------------------------------


@pytest.mark.parametrize("fusion", ["concat", "add"])
def test_categorical_fusion_changes_output(batch, fusion):
    tokens, index, counts = make_batch(*batch)
    pred = seeded(
        SequencePredictor, tiny(categorical_cardinalities=(3, 4), categorical_fusion=fusion)
    )
    pred.eval()
    a = pred(tokens, index, counts, torch.tensor([[1, 1], [1, 1], [1, 1]]))
    b = pred(tokens, index, counts, torch.tensor([[2, 1], [1, 1], [1, 3]]))
    assert not torch.allclose(a["prediction"][0], b["prediction"][0], atol=1e-6)
    assert torch.equal(a["prediction"][1], b["prediction"][1])
    assert not torch.allclose(a["prediction"][2], b["prediction"][2], atol=1e-6)
    # the base (and so the UniFrac embedding and count head) does not see the covariates
    assert torch.equal(a["sample_embedding"], b["sample_embedding"])
    assert torch.equal(a["count_prediction"], b["count_prediction"])
    with pytest.raises(ValueError, match="categories"):
        pred(tokens, index, counts)
    with pytest.raises(ValueError, match="categories"):
        seeded(SequencePredictor, tiny())(tokens, index, counts, torch.ones(3, 1, dtype=torch.long))


# -- attention backends ---------------------------------------------------------------------


@pytest.mark.slow
def test_sdpa_backends_on_cpu(batch):
    tokens, index, counts = make_batch(*batch)
    pred = seeded(SequencePredictor, tiny()).eval()
    results = {}
    for name in ("math", "auto", "mem_efficient", "flash"):
        pred.set_attn_implementation(name)
        assert pred.config.attn_implementation == name
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results[name] = pred(tokens, index, counts)["prediction"]
        fell_back = any("using 'math'" in str(w.message) for w in caught)
        assert fell_back == (name in ("mem_efficient", "flash"))
    assert_close(results["auto"], results["math"])
    # On CPU the fused choices run the math kernel: bit-identical to math.
    assert torch.equal(results["mem_efficient"], results["math"])
    assert torch.equal(results["flash"], results["math"])
    assert effective_attn_implementation("flash", "cpu") == "math"
    assert effective_attn_implementation("mem_efficient", "cuda") == "mem_efficient"
    assert effective_attn_implementation("auto", "cpu") == "auto"
    with pytest.raises(ValueError):
        pred.set_attn_implementation("sdpa")


def test_auto_attention_leaves_out_cudnn_on_gpus_only():
    """auto on a GPU: flash, mem_efficient or math, never cuDNN attention (3.8x slower bf16
    pretraining at batch 8 on an H100); on a CPU PyTorch's own choice; a named kernel is itself."""
    on_gpu = sdpa_backends("auto", "cuda")
    assert SDPBackend.CUDNN_ATTENTION not in on_gpu
    assert SDPBackend.EFFICIENT_ATTENTION in on_gpu and SDPBackend.MATH in on_gpu
    assert sdpa_backends("auto", "cpu") is None
    assert sdpa_backends("mem_efficient", "cuda") == [SDPBackend.EFFICIENT_ATTENTION]
    assert sdpa_backends("flash", "cpu") == [SDPBackend.MATH]


def test_flash_with_padding_masks_is_one_line_before_any_kernel(batch, monkeypatch):
    """flash where it is flash (a GPU; faked here by the device seam) and a stack has masks:
    one line naming the flag and the fix, eager or compiled alike (the stack is not compiled);
    a RuntimeError too, so the backend comparisons report flash as unsupported."""
    from aam.errors import InputError
    from aam.models import layers

    tokens, index, counts = make_batch(*batch)
    pred = seeded(SequencePredictor, tiny())
    pred.set_attn_implementation("flash")
    monkeypatch.setattr(layers, "effective_attn_implementation", lambda name, device: name)
    with pytest.raises(layers.FlashRefusesMasks) as caught:
        pred(tokens, index, counts)
    assert isinstance(caught.value, InputError) and isinstance(caught.value, RuntimeError)
    assert str(caught.value) == layers.FLASH_REFUSES_MASKS and "\n" not in str(caught.value)


# -- degenerate inputs ----------------------------------------------------------------------


def test_no_nan_for_short_single_asv_samples():
    samples = [["A"], [""], ["ACGTACGT", "C"]]
    tokens, index, counts = make_batch(samples, [[5.0], [1.0], [3.0, 0.0]])
    pred = seeded(SequencePredictor, tiny())
    for mode in (True, False):
        pred.train(mode)
        out = pred(tokens, index, counts)
        for key, value in out.items():
            if value.is_floating_point():
                assert torch.isfinite(value).all(), key
    out["prediction"].sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in pred.parameters() if p.grad is not None)


def test_model_follows_parameter_device_and_dtype(batch):
    tokens, index, counts = make_batch(*batch)
    enc = seeded(SequenceEncoder, tiny()).eval().to(torch.float64)
    out = enc(tokens, index, counts)
    assert out["sample_embedding"].dtype == torch.float64
    assert out["sample_embedding"].device == next(enc.parameters()).device


# -- ASV identity embedding ----------------------------------------------------------------


def test_sequences_one_base_apart_get_different_identity_buckets():
    enc = seeded(SequenceEncoder, tiny(asv_identity_buckets=65521)).asv_encoder
    rng = np.random.default_rng(5)
    seq = "".join(rng.choice(list("ACGT"), size=MAX_BP))
    variants = {seq[:i] + base + seq[i + 1 :] for i in range(MAX_BP) for base in "ACGTN"}
    tokens = torch.from_numpy(tokenize(sorted(variants), MAX_BP)).long()
    keys = sequence_keys(tokens, enc.identity_weights, 65521)
    assert len(set(keys.tolist())) == len(variants) == 4 * MAX_BP + 1
    assert torch.equal(keys, sequence_keys(tokens, enc.identity_weights, 65521))


def test_identity_embedding_starts_at_zero_and_then_separates_asvs(batch):
    tokens, index, counts = make_batch(*batch)
    off = seeded(SequencePredictor, tiny()).eval()
    on = SequencePredictor(tiny(asv_identity_buckets=101)).eval()
    missing = on.load_state_dict(off.state_dict(), strict=False).missing_keys
    assert sorted(missing) == [
        "base.asv_encoder.identity.weight",
        "base.asv_encoder.identity_weights",
    ]
    with torch.no_grad():
        assert_close(
            on(tokens, index, counts)["prediction"], off(tokens, index, counts)["prediction"]
        )
        on.base.asv_encoder.identity.weight.normal_()
        changed = on(tokens, index, counts)["prediction"]
    assert not torch.allclose(changed, off(tokens, index, counts)["prediction"])


def test_the_encoder_masks_itself_and_keeps_the_identity_of_the_originals(batch):
    tokens, index, counts = make_batch(*batch)
    enc = seeded(SequenceEncoder, tiny(asv_identity_buckets=101)).eval()
    with torch.no_grad():
        enc.asv_encoder.identity.weight.normal_()
        masked, nuc_mask = mask_nucleotides(tokens, 0.3, torch.Generator().manual_seed(1))
        from_originals = enc(tokens, index, counts, nuc_mask=nuc_mask)
        from_masked = enc(masked, index, counts, nuc_mask=nuc_mask)
    # the nucleotide path reads MASK either way; only the originals keep each ASV's identity row
    assert_close(from_originals["nuc_logits"], from_masked["nuc_logits"])
    keys = enc.asv_encoder.identity_weights
    assert not torch.equal(sequence_keys(masked, keys, 101), sequence_keys(tokens, keys, 101))
    assert not torch.allclose(from_originals["sample_embedding"], from_masked["sample_embedding"])


def test_cpu_dropout_drops_at_its_rate_keeps_the_mean_and_is_seeded():
    from aam.models.layers import Dropout

    drop = Dropout(0.1).train()
    x = torch.ones(1000, 1000, requires_grad=True)
    torch.manual_seed(0)
    y = drop(x)
    zeros = (y == 0).float().mean().item()
    assert abs(zeros - 0.1) < 0.003 and abs(y.mean().item() - 1.0) < 0.005
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach())  # gradient: the same mask and scale
    torch.manual_seed(0)
    assert torch.equal(drop(x), y)
    assert torch.equal(drop.eval()(x), x) and torch.equal(Dropout(0.0).train()(x), x)
