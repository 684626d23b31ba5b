"""`memfarm bench encoders`: length buckets cut exactly, and a table whose ratios are its own rates."""

import json

import pytest
from click.testing import CliRunner

from coordinator.benches.encoders import length_buckets
from coordinator.cli import main

pytestmark = pytest.mark.slow


def test_buckets_hold_texts_cut_to_exactly_their_length():
    from tokenizers import Tokenizer

    from memoria.model_files import model_path

    tokenizer = Tokenizer.from_file(f"{model_path()}/tokenizer.json")
    tokenizer.no_padding()  # as the ONNX embedder reads texts
    tokenizer.enable_truncation(256)
    texts = ["user: " + " ".join(f"word{i} and more" for i in range(n)) for n in (2, 30, 90, 200)]
    buckets = length_buckets(texts, tokenizer, lengths=(16, 64, 128), per_bucket_tokens=256, natural=3)
    assert list(buckets) == ["16 tokens", "64 tokens", "128 tokens", "as generated"]
    for length in (16, 64, 128):
        chunk = buckets[f"{length} tokens"]
        assert chunk and all(len(tokenizer.encode(t).ids) == length for t in chunk), length
    assert len(buckets["16 tokens"]) == 3, "the shortest text is too short for any bucket"
    assert len(buckets["128 tokens"]) == 2 and buckets["as generated"] == texts[:3]


def test_the_bench_writes_each_backends_rate_and_its_ratio_to_torch(tmp_path):
    out = tmp_path / "encoders.json"
    result = CliRunner().invoke(main, ["bench", "encoders", "--rounds", "1", "--tokens-per-bucket", "300",
                                       "--workdir", str(tmp_path / "wd"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert set(data["buckets"]) == {"16 tokens", "64 tokens", "128 tokens", "256 tokens", "as generated"}
    for row in data["buckets"].values():
        rates = row["texts_per_second"]
        assert set(rates) == {"torch", "onnx", "onnx-int8"} and min(rates.values()) > 0
        for name, ratio in row["speedup_over_torch"].items():
            assert ratio == pytest.approx(rates[name] / rates["torch"], rel=0.01)
    assert data["buckets"]["256 tokens"]["mean_tokens"] == 256.0
    assert "onnx / torch" in result.output and str(out) in result.output
