"""A text's vector does not depend on what it is batched with; near ties are broken by id, not by noise."""

import json

import numpy as np
import pytest

from memoria import defaults
from memoria.canonical_batches import batch_rows, canonical_batches, padded_width
from memoria.rrf import reciprocal_rank_fusion
from memoria.ties import best_first, score_key
from memoria.vectors import VectorIndex


def test_every_batch_holds_one_padded_width_and_every_text_once():
    lengths = [3, 17, 16, 40, 300, 1, 18, 32, 33]
    batches = canonical_batches(lengths, max_length=256, step=16, rows=2)
    assert sorted(i for _, indices in batches for i in indices) == list(range(len(lengths)))
    for width, indices in batches:
        assert len(indices) <= 2
        assert {padded_width(lengths[i], 256, 16) for i in indices} == {width}
    assert [padded_width(n, 256, 16) for n in (1, 16, 17, 33, 300)] == [16, 16, 32, 48, 256]
    assert padded_width(300, 250, 16) == 250, "never wider than the model's window"


def test_a_widths_batches_hold_about_the_same_tokens_and_only_its_last_is_part_full():
    """Rows follow the width (many short texts or one long one a batch), so a batch a width leaves part full, the
    only place copies fill rows, costs less than one batch of tokens."""
    tokens = defaults.CANONICAL_BATCH_TOKENS
    for width in (1, 4, 12, 64, tokens // 2 + 1, tokens, 256):
        rows = batch_rows(width)
        assert rows >= 1 and (rows * width <= tokens or rows == 1) and (rows + 1) * width > tokens
    lengths = [int(n) for n in np.random.default_rng(3).integers(1, 300, size=500)]
    batches = canonical_batches(lengths, max_length=256)
    assert sorted(i for _, indices in batches for i in indices) == list(range(len(lengths)))
    last = {}
    for width, indices in batches:
        assert width % defaults.CANONICAL_PAD_STEP == 0 or width == 256
        assert 0 < len(indices) <= batch_rows(width)
        assert width not in last or len(last[width]) == batch_rows(width), "a part-full batch before a full one"
        last[width] = indices


@pytest.fixture(scope="module")
def turns(locomo_path):
    conversations = json.loads(locomo_path.read_text())
    texts = [turn["text"] for c in conversations[:1] for key, session in c["conversation"].items()
             if key.startswith("session_") and isinstance(session, list) for turn in session if turn.get("text")]
    return texts[:120] + ["x " * 400]


def test_a_text_encoded_alone_or_in_any_batch_gets_the_same_bits(embedder, turns):
    alone = np.stack([embedder.encode([t])[0] for t in turns[:40]])
    together = embedder.encode(turns, batch_size=32)
    shuffled = np.random.default_rng(5).permutation(len(turns))
    reordered = embedder.encode([turns[i] for i in shuffled], batch_size=7)
    assert np.array_equal(alone, together[:40])
    assert np.array_equal(reordered, together[shuffled])
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-6)
    # the vectors are still the model's: ordinary batching gives the same up to float noise
    plain = embedder.model.encode(turns, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    assert (plain * together).sum(axis=1).min() > 0.99999


def test_the_model_runs_batches_of_one_shape_per_width_whatever_the_texts_and_batch_size(embedder, turns):
    """Threaded matrix products split their work by the product's shape (on an AVX-512 machine a text alone and
    in a batch of 32 differed by ~5e-8): every batch the model runs has the same rows, so one width, one shape."""
    from memoria.canonical_batches import encode_sentence_transformer

    shapes = []

    class Watching:  # the real model, its batches' shapes noted
        tokenizer, device = embedder.model.tokenizer, embedder.model.device

        def __call__(self, features):
            shapes.append(tuple(features["input_ids"].shape))
            return embedder.model(features)

    class Told:  # what the encoder tells a watcher it ran (memfarm bench floor counts padding from it)
        batches = []

        def called(self, call):
            self.batches += [(rows, width) for width, _, rows in call.batches]

    from memoria.encoder_watch import watching

    got, told = {}, Told()
    with watching(told):
        for batch_size, texts in ((1, turns[:1]), (32, turns), (7, turns[:13]), (64, turns[:3])):
            got[batch_size] = encode_sentence_transformer(Watching(), texts, batch_size, embedder.max_seq_length,
                                                          embedder.dimension)
    assert all(rows == batch_rows(width) for rows, width in shapes), shapes
    assert told.batches == shapes, "the watcher hears the shapes the model ran"
    assert len({width for _, width in shapes}) > 1, "texts of several widths were encoded"
    assert np.array_equal(got[1][0], got[32][0]) and np.array_equal(got[7], got[32][:13])


@pytest.mark.parametrize("threads", [1, 2])
def test_bits_do_not_depend_on_the_batch_at_any_thread_count_and_agree_closely_across_counts(embedder, turns,
                                                                                             threads):
    """What holds on any CPU: at one thread count a text gets the same bits in any batch; other thread counts (or
    CPUs) may move the last bits only."""
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        alone = np.stack([embedder.encode([t])[0] for t in turns[:12]])
        together = embedder.encode(turns[:60], batch_size=32)
    finally:
        torch.set_num_threads(before)
    assert np.array_equal(alone, together[:12])
    np.testing.assert_allclose(together, embedder.encode(turns[:60]), atol=1e-6)


def test_scores_that_differ_by_noise_alone_tie_and_the_lower_id_wins():
    noise = 10.0 ** -(defaults.TIE_DECIMALS + 3)
    assert best_first([(7, 0.5 + noise), (3, 0.5), (9, 0.6)]) == [(9, 0.6), (3, 0.5), (7, 0.5 + noise)]
    assert best_first([(7, 0.5 + 10.0 ** -(defaults.TIE_DECIMALS - 1)), (3, 0.5)])[0][0] == 7, "a real gap counts"
    assert score_key(0.1234564) == score_key(0.1234561)


def test_the_vector_index_orders_near_ties_by_id():
    index = VectorIndex(2)
    tilt = 3e-7  # a cosine 3e-7 below the first: float noise, below the tie grid
    vectors = np.array([[1.0, 0.0], [1.0 - tilt, np.sqrt(2 * tilt)], [0.0, 1.0]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index.add([5, 2, 8], vectors)
    assert [i for i, _ in index.search(np.array([1.0, 0.0], dtype=np.float32), 3)] == [2, 5, 8]


def test_fusion_orders_equal_sums_by_id():
    fused = reciprocal_rank_fusion({"a": [4, 1], "b": [1, 4]})
    assert [e["id"] for e in fused] == [1, 4]


def test_the_padding_rule_is_part_of_the_vectors_signature(monkeypatch):
    """Other padding, other bits: a cache or store written under one padding step is never read under another."""
    from memoria.model_files import packaged_signature

    before = packaged_signature()
    monkeypatch.setattr(defaults, "CANONICAL_PAD_STEP", defaults.CANONICAL_PAD_STEP * 2)
    after = packaged_signature()
    assert after != before and after["model_files"] == before["model_files"]
    monkeypatch.setattr(defaults, "CANONICAL_BATCH_TOKENS", defaults.CANONICAL_BATCH_TOKENS * 2)
    assert packaged_signature() not in (before, after), "other rows per batch, other bits on some CPUs"
