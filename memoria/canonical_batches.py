"""Encoding batches whose make-up cannot change a vector.

A transformer's output for a text depends, in its last bits, on how many padding tokens its batch added:
the attention and pooling sums run over the padded sequence, and a longer sum is rounded differently. So
the vector of a text changed with the texts it happened to share a batch with, which an embedding store,
a cache or a worker's item order all change; near ties between candidates then flipped. Here every text
is padded to a width set by its own token length alone (the next multiple of `CANONICAL_PAD_STEP`, at most
the model's window), and texts are batched only with texts of the same width. Measured on 2 CPU cores
with torch: a text encoded alone and the same text in any such batch (sizes 1 to 64) are bit-identical,
while ordinary longest-in-batch padding changed 30 of 40 LoCoMo turns (by up to 1.6e-7).

The width alone is not enough on every CPU: threaded matrix products choose how to split their work by the
shape of the product, so on an AVX-512 machine a text encoded alone and in a batch of 32 differed by ~5e-8.
So every batch the model runs at a width has the same number of rows too (`batch_rows`: `CANONICAL_BATCH_TOKENS`
over the width, at least one: many short texts or one long one), the rows a batch lacks filled with copies of
its first text, whose outputs are dropped: for a given width every product has one shape, and a text's vector
depends only on its width, the machine and its thread count. What holds on any CPU: one machine with one thread count gives every text the same bits in any batch; two CPUs of other
kinds, or other thread counts, may differ in the last bits (about 1e-7), below the tie grid of
`memoria.ties` except for scores that lie on the grid's edge.
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np

from memoria import defaults, encoder_watch


def padded_width(length: int, max_length: int, step: int | None = None) -> int:
    """The width a text of `length` tokens is padded to: the next multiple of `step` (`CANONICAL_PAD_STEP`, read
    when called, as the embedding signature reads it), at most `max_length`."""
    step = step or defaults.CANONICAL_PAD_STEP
    return max(1, min(max_length, -(-length // step) * step))


def batch_rows(width: int, tokens: int | None = None) -> int:
    """The rows every batch of `width` has: `tokens` (`CANONICAL_BATCH_TOKENS`, read when called) over the width,
    at least one."""
    return max(1, (tokens or defaults.CANONICAL_BATCH_TOKENS) // max(1, width))


def canonical_batches(lengths: list[int], max_length: int, step: int | None = None,
                      rows: int | None = None) -> list[tuple[int, list[int]]]:
    """`(width, indices)` batches, narrowest first: each holds texts of one padded width only, at most
    `batch_rows(width)` of them (or `rows`, where a caller fixes it)."""
    by_width: dict[int, list[int]] = defaultdict(list)
    for index, length in enumerate(lengths):
        by_width[padded_width(length, max_length, step)].append(index)
    batches = []
    for width, indices in sorted(by_width.items()):
        size = max(1, int(rows)) if rows else batch_rows(width)
        batches += [(width, indices[start:start + size]) for start in range(0, len(indices), size)]
    return batches


def full_rows(indices: list[int], rows: int) -> list[int]:
    """`indices` filled up to `rows` with copies of its first index: every batch of a width has the same rows."""
    return list(indices) + [indices[0]] * (rows - len(indices))


def encode_sentence_transformer(model, texts: list[str], batch_size: int, max_length: int,
                                dimension: int) -> np.ndarray:
    """Unit-length float32 vectors of a SentenceTransformer, each padded to its canonical width, in batches of
    `batch_rows(width)` rows whatever `batch_size` says (it stays the callers' unit of work).

    Texts are stripped as SentenceTransformer does before tokenizing; the model's own modules (transformer,
    mean pooling) run on each batch, then L2 normalisation. An installed watcher (`memoria.encoder_watch`)
    hears what each call ran.
    """
    import torch

    started = time.perf_counter()
    texts = [str(t).strip() for t in texts]
    out = np.zeros((len(texts), dimension), dtype=np.float32)
    if not texts:
        return out
    tokenizer = model.tokenizer
    lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
    batches = canonical_batches(lengths, max_length)
    with torch.inference_mode():
        for width, indices in batches:
            features = tokenizer([texts[i] for i in full_rows(indices, batch_rows(width))], padding="max_length",
                                 truncation=True, max_length=width, return_tensors="pt")
            features = {name: tensor.to(model.device) for name, tensor in features.items()}
            pooled = model(features)["sentence_embedding"][:len(indices)]
            pooled = torch.nn.functional.normalize(pooled.float(), p=2, dim=1)
            out[indices] = pooled.cpu().numpy()
    if encoder_watch.WATCHERS:
        encoder_watch.tell(encoder_watch.EncoderCall(
            tuple(texts), tuple(lengths),
            tuple((width, len(indices), batch_rows(width)) for width, indices in batches),
            time.perf_counter() - started))
    return out
