"""`memfarm bench encoders`: texts per second of each embedder backend (torch, onnx, onnx-int8) by text
length, the backends interleaved in every round, the median round reported."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from coordinator.benches.common import write_bench
from memoria.defaults import DEFAULT_EMBEDDER


def length_buckets(texts: list[str], tokenizer, lengths=(16, 64, 128, 256), per_bucket_tokens: int = 20000,
                   natural: int = 300) -> dict[str, list[str]]:
    """The same kind of text at fixed token lengths (each cut to exactly that many tokens, [CLS] and [SEP]
    included), about `per_bucket_tokens` tokens per bucket, and the texts as they come (`natural`)."""
    encodings = tokenizer.encode_batch(texts)
    buckets = {}
    for length in lengths:
        wanted = max(4, per_bucket_tokens // length)
        picked = [tokenizer.decode(e.ids[1:length - 1]) for e in encodings if len(e.ids) >= length][:wanted]
        if picked:
            buckets[f"{length} tokens"] = picked
    buckets["as generated"] = texts[:natural]
    return buckets


def run_encoders_bench(output: str | Path, rounds: int = 3, threads: int = 2, workdir: str | Path = "cache/bench_encoders",
                       per_bucket_tokens: int = 20000, embedder: str = DEFAULT_EMBEDDER) -> str:
    """Texts per second of each embedder backend by text length, the backends interleaved in every round so
    that a change in the machine's load falls on all alike; the median round is reported."""
    import torch

    from adapters.generators.longmemeval_s import iter_questions
    from memoria.embedder import Embedder
    from memoria.onnx_backend import OnnxEmbedder

    torch.set_num_threads(threads)
    model = embedder  # the name: `embedder` below is each backend in turn
    texts = [f"{turn['role']}: {turn['content']}" for question in iter_questions(4, seed=7, scale=1.0)
             for session in question["haystack_sessions"] for turn in session]
    name = "onnx" if embedder == DEFAULT_EMBEDDER else f"onnx-{embedder.replace('/', '_')}"
    folder = Path(workdir) / name
    backends = {"torch": Embedder(embedder=embedder),
                "onnx": OnnxEmbedder(folder, "onnx", threads=threads, embedder=embedder),
                "onnx-int8": OnnxEmbedder(folder, "onnx-int8", threads=threads, embedder=embedder)}
    tokenizer = backends["onnx"].tokenizer
    buckets = length_buckets(texts, tokenizer, per_bucket_tokens=per_bucket_tokens)
    for embedder in backends.values():
        embedder.encode(texts[:8])  # first-call setup is not a text's cost
    rates = {bucket: {name: [] for name in backends} for bucket in buckets}
    for _ in range(rounds):
        for bucket, chunk in buckets.items():
            for name, embedder in backends.items():
                started = time.perf_counter()
                embedder.encode(chunk)
                rates[bucket][name].append(len(chunk) / (time.perf_counter() - started))
    table = {}
    for bucket, chunk in buckets.items():
        median = {name: statistics.median(values) for name, values in rates[bucket].items()}
        tokens = sum(len(e.ids) for e in tokenizer.encode_batch(chunk)) / len(chunk)
        table[bucket] = {"texts": len(chunk), "mean_tokens": round(tokens, 1),
                         "texts_per_second": {n: round(v, 1) for n, v in median.items()},
                         "speedup_over_torch": {n: round(v / median["torch"], 3) for n, v in median.items()},
                         "rounds": {n: [round(v, 1) for v in values] for n, values in rates[bucket].items()}}
    data = {"threads": threads, "rounds": rounds, "embedder": model, "buckets": table,
            "texts": "generated LongMemEval-S turns ('role: content'), cut to each length with the model's tokenizer"}
    path = write_bench("encoders", data, output)
    names = list(backends)
    lines = [f"{'texts':<16}{'tokens':>8}" + "".join(f"{n + ' texts/s':>18}" for n in names) +
             "".join(f"{n + ' / torch':>18}" for n in names[1:])]
    for bucket, row in table.items():
        lines.append(f"{bucket:<16}{row['mean_tokens']:>8.1f}" +
                     "".join(f"{row['texts_per_second'][n]:>18.1f}" for n in names) +
                     "".join(f"{row['speedup_over_torch'][n]:>17.2f}x" for n in names[1:]))
    lines.append(f"median of {rounds} interleaved rounds, {threads} threads each; wrote {path}")
    return "\n".join(lines)
