"""`memfarm bench encoders`: length buckets cut exactly; rates, ratios and medians from a clock of known costs."""

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from coordinator.benches import encoders
from coordinator.benches.encoders import length_buckets
from coordinator.cli import main


def _tokenizer():
    from tokenizers import Tokenizer

    from memoria.model_files import model_path

    tokenizer = Tokenizer.from_file(f"{model_path()}/tokenizer.json")
    tokenizer.no_padding()  # as the ONNX embedder reads texts
    tokenizer.enable_truncation(256)
    return tokenizer


def test_buckets_hold_texts_cut_to_exactly_their_length():
    tokenizer = _tokenizer()
    texts = ["user: " + " ".join(f"word{i} and more" for i in range(n)) for n in (2, 30, 90, 200)]
    buckets = length_buckets(texts, tokenizer, lengths=(16, 64, 128), per_bucket_tokens=256, natural=3)
    assert list(buckets) == ["16 tokens", "64 tokens", "128 tokens", "as generated"]
    for length in (16, 64, 128):
        chunk = buckets[f"{length} tokens"]
        assert chunk and all(len(tokenizer.encode(t).ids) == length for t in chunk), length
    assert len(buckets["16 tokens"]) == 3, "the shortest text is too short for any bucket"
    assert len(buckets["128 tokens"]) == 2 and buckets["as generated"] == texts[:3]


#: Seconds each fake backend takes per text: 100, 200 and 400 texts a second.
SECONDS_PER_TEXT = {"torch": 0.01, "onnx": 0.005, "onnx-int8": 0.0025}


def test_rates_ratios_and_the_median_round_follow_from_known_costs(tmp_path, monkeypatch):
    """Backends whose cost per text is known, on a clock only they move: onnx's second round of every bucket
    runs ten times slower (a busy machine), which the median of three rounds leaves out."""
    clock = SimpleNamespace(now=0.0)

    class Fake:
        def __init__(self, name):
            self.name, self.seen = name, {}

        def encode(self, texts):
            sighting = self.seen[tuple(texts)] = self.seen.get(tuple(texts), 0) + 1
            busy = 10 if self.name == "onnx" and sighting == 2 else 1
            clock.now += len(texts) * SECONDS_PER_TEXT[self.name] * busy

    class FakeOnnx(Fake):
        def __init__(self, folder, backend, threads, embedder=None):
            super().__init__(backend)
            self.tokenizer = _tokenizer()

    monkeypatch.setattr("memoria.embedder.Embedder", lambda embedder=None: Fake("torch"))
    monkeypatch.setattr("memoria.onnx_backend.OnnxEmbedder", FakeOnnx)
    monkeypatch.setattr("torch.set_num_threads", lambda threads: None)
    monkeypatch.setattr(encoders, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    out = tmp_path / "encoders.json"
    text = encoders.run_encoders_bench(out, rounds=3, workdir=tmp_path / "wd", per_bucket_tokens=300)
    buckets = json.loads(out.read_text())["buckets"]
    assert list(buckets) == ["16 tokens", "64 tokens", "128 tokens", "256 tokens", "as generated"]
    for row in buckets.values():
        assert row["texts_per_second"] == {"torch": 100.0, "onnx": 200.0, "onnx-int8": 400.0}
        assert row["speedup_over_torch"] == {"torch": 1.0, "onnx": 2.0, "onnx-int8": 4.0}
        assert row["rounds"] == {"torch": [100.0] * 3, "onnx": [200.0, 20.0, 200.0], "onnx-int8": [400.0] * 3}
    assert buckets["16 tokens"]["mean_tokens"] == 16.0 and buckets["256 tokens"]["mean_tokens"] == 256.0
    assert text.splitlines()[1].split()[-5:] == ["100.0", "200.0", "400.0", "2.00x", "4.00x"]


@pytest.mark.slow
def test_the_real_backends_fill_every_bucket_and_print_the_table(tmp_path):
    out = tmp_path / "encoders.json"
    result = CliRunner().invoke(main, ["bench", "encoders", "--rounds", "1", "--tokens-per-bucket", "300",
                                       "--workdir", str(tmp_path / "wd"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert list(data["buckets"]) == ["16 tokens", "64 tokens", "128 tokens", "256 tokens", "as generated"]
    for length in (16, 64, 128, 256):
        assert data["buckets"][f"{length} tokens"]["mean_tokens"] == float(length)
    for row in data["buckets"].values():
        assert row["speedup_over_torch"]["torch"] == 1.0 and min(row["texts_per_second"].values()) > 0
        assert set(row["texts_per_second"]) == {"torch", "onnx", "onnx-int8"}
    assert "onnx / torch" in result.output and str(out) in result.output
