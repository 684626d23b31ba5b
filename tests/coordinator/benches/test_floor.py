"""`memfarm bench floor`: the counter on the encoder, and what each mode gives the model for one small item."""

import json

import pytest

from coordinator.benches.floor import ARMS, MODES, EncoderCount, counted_run, measure_floor, table
from memoria.encoder_watch import WATCHERS, EncoderCall, watching
from memoria.pieces import split_pieces

TURNS = [
    ("Caroline", "I went to the pottery class on Sunday. The teacher showed us how to centre the clay."),
    ("Melanie", "That sounds fun! Did you make a bowl? I always wanted to try the wheel."),
    ("Caroline", "I made a small bowl. It cracked in the kiln, sadly."),
    ("Melanie", "My kids started swimming lessons last week. They love the water already."),
    ("Caroline", "Swimming is great exercise. Which pool do they go to?"),
    ("Melanie", "The one near the library. We go every Tuesday after school."),
]


def tiny_locomo(path):
    """One conversation of two sessions (three turns each) and four questions whose evidence is in it."""
    talk = {"speaker_a": "Caroline", "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023", "session_2_date_time": "2:10 pm on 15 May, 2023"}
    for number, (speaker, text) in enumerate(TURNS):
        session = 1 + number // 3
        talk.setdefault(f"session_{session}", []).append(
            {"speaker": speaker, "dia_id": f"D{session}:{number % 3 + 1}", "text": text})
    qa = [{"question": "What did Caroline make in pottery class?", "answer": "a bowl", "evidence": ["D1:3"],
           "category": 4},
          {"question": "When do Melanie's kids go swimming?", "answer": "Tuesday", "evidence": ["D2:3"],
           "category": 4},
          {"question": "Where is the pool?", "answer": "near the library", "evidence": ["D2:3"], "category": 4},
          # the same question as the first but for its speaker's name, which a ranked mode strips before encoding
          {"question": "What did Melanie make in pottery class?", "answer": "nothing", "evidence": ["D1:2"],
           "category": 4}]
    path.write_text(json.dumps([{"sample_id": "conv-tiny", "conversation": talk, "qa": qa}]))
    return path


def test_the_counter_adds_rows_tokens_and_padding_by_hand():
    count = EncoderCount()
    with watching(count):
        assert WATCHERS == [count]
    assert WATCHERS == []  # removed on the way out
    count.called(EncoderCall(("a b", "c", "a b"), (4, 3, 4), ((16, 3, 8),), 0.5))
    count.called(EncoderCall(("d",), (20,), ((32, 1, 8),), 0.25))
    summary = count.summary()
    assert summary["model_calls"] == 2 and summary["batches"] == 2 and summary["rows_run"] == 16
    assert summary["rows"] == 4 and summary["distinct_texts"] == 3 and summary["texts_encoded_again"] == 1
    assert summary["text_tokens"] == 31 and summary["padded_tokens"] == 16 * 8 + 32 * 8
    assert summary["encoder_s"] == 0.75


def test_the_table_prints_one_line_a_run_and_a_dash_for_no_floor():
    row = {"benchmark": "locomo", "system": "memoria", "mode": "bm25", "outside_encoder_s": 1.0, "floor_s": 0.0,
           "floor_ratio": None, "padding_ratio": None, "floor_padding_ratio": None, **EncoderCount().summary()}
    lines = table([row]).splitlines()
    assert len(lines) == 2 and lines[1].split()[:3] == ["locomo", "memoria", "bm25"] and lines[1].endswith("-")


def test_each_mode_gives_the_model_each_distinct_text_at_most_once_and_bm25_and_the_arms_none(tmp_path, embedder):
    from coordinator.running.spec import RunSpec

    dataset = tiny_locomo(tmp_path / "tiny.json")
    turn_texts = {f"{speaker}: {text}" for speaker, text in TURNS}
    for mode in MODES:
        count, _, results = counted_run(RunSpec("locomo", dataset=str(dataset), retrieval_mode=mode))
        assert results["complete"] and len(results["records"]) == 4
        if mode == "bm25":
            assert (count.calls, count.rows) == (0, 0), f"bm25 gave the model {count.rows} texts"
            continue
        assert count.calls > 0
        again = {text: n for text, n in count.texts.items() if n > 1}
        assert not again, f"{mode}: texts given to the model more than once: {again}"
        rendered = [t for t in count.texts if any(turn in t or t in turn for turn in turn_texts)]
        assert len(rendered) >= len(TURNS), f"{mode}: the turns were not all encoded ({sorted(count.texts)})"
        floor = measure_floor(count.texts)  # the same texts once each in one call: the same rows, fewer batches
        assert floor.calls == 1 and floor.rows == len(count.texts) and floor.batches <= count.batches
    for arm in ARMS:
        count, _, results = counted_run(RunSpec("locomo", dataset=str(dataset), system=arm))
        assert results["complete"] and (count.calls, count.rows) == (0, 0), f"{arm} gave the model texts"


def test_an_items_questions_and_the_sentences_their_rankings_read_reach_the_model_together(tmp_path, embedder):
    """Asked one by one, each question was a batch of its own, and in `full` the sentences of its ranking's head
    another: most rows the model ran were padding. Now the questions of one state go in one call before the first
    is asked, then in `full` the sentences of every head in one more, and nothing after."""
    from coordinator.running.local_executor import run_local
    from coordinator.running.spec import RunSpec

    dataset = tiny_locomo(tmp_path / "tiny.json")
    for mode in ("dense", "raw", "fusion", "full"):
        calls = []
        with watching(type("Calls", (), {"called": staticmethod(calls.append)})()):
            results, _ = run_local(RunSpec("locomo", dataset=str(dataset), retrieval_mode=mode))
        asked = {r["diagnostics"]["system"].get("dense_query", r["query"]) for r in results["records"]}
        holding = [n for n, call in enumerate(calls) if asked & set(call.texts)]
        assert len(holding) == 1 and asked <= set(calls[holding[0]].texts), f"{mode}: questions in calls {holding}"
        later = calls[holding[0] + 1:]
        if mode == "full":
            assert len(later) == 1 and set(later[0].texts) <= {
                piece for _, text in TURNS for piece in split_pieces(text)}, f"full: {[c.texts for c in later]}"
        else:
            assert later == [], f"{mode}: the model ran {[c.texts for c in later]} after the questions"
