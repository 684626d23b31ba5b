"""The M bench's projection, by hand: encoding work scales with the full file's distinct texts times the fleet's
ratio, the rest with the question count, spread over two workers a machine."""

from coordinator.benches.longmemeval_m import _projection


def test_the_projection_by_hand():
    # one worker: 2 questions, 1,000 texts encoded in 100 s, 20 s of everything else; 50 distinct sessions
    one = {"texts_encoded": 1000, "phases_ms": {"encode_ms": 100_000, "extract_ms": 15_000, "recall_ms": 5_000}}
    full = {"sessions_stored": 10_000}
    projection = _projection(one, 2, 1.1, full, 50)
    # 20 texts a session -> 200,000 distinct texts; 1.1 x 200,000 x 0.1 s + 500 x 10 s = 27,000 worker-seconds
    assert projection["distinct_texts_full_file"] == 200_000
    assert projection["hours"] == {1: round(27_000 / 2 / 3600, 2), 8: round(27_000 / 16 / 3600, 2),
                                   32: round(27_000 / 64 / 3600, 2)}
    assert projection["seconds_per_text_encoded"] == 0.1 and projection["other_seconds_per_question"] == 10.0
