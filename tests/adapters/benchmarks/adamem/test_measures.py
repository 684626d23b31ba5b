"""AdaMem's six measures on hand-made inputs whose values are worked out by hand."""

import pytest

from adapters.benchmarks.adamem.judge import evaluate_episode
from adapters.benchmarks.adamem.measures import (answer_support, best_span, prompt_tokens, run_measures, stale_fact,
                                      write_amplification)
from adapters.systems.adamem import AdaMem
from tests.factories import run_context

BLOCK = "- Caroline moved to Boston in 2021.\n- She likes hiking."


def test_answer_support_on_a_block_worked_by_hand():
    # block tokens after normalisation: caroline moved to boston in 2021 she likes hiking
    assert answer_support(["Boston"], BLOCK) == {"answer_exact": 1.0, "answer_f1": 1.0, "answer_in_context": True}
    # gold "moved to new york" (4 tokens); best span "moved to": P 2/2, R 2/4, F1 2/3
    # ("caroline moved to boston": P 2/4, R 2/4, F1 1/2; "moved to boston": P 2/3, R 2/4, F1 4/7)
    support = answer_support(["moved to New York"], BLOCK)
    assert support["answer_exact"] == 0.0 and support["answer_f1"] == pytest.approx(2 / 3)
    assert support["answer_in_context"] is False
    # punctuation and articles do not count; the string test ignores case only
    assert best_span("the boston!", BLOCK) == (1.0, 1.0)
    assert answer_support(["BOSTON in 2021"], BLOCK)["answer_in_context"] is True
    assert answer_support(["Boston, 2021"], BLOCK)["answer_in_context"] is False
    # several gold strings (an episode's expected substrings): exact and in-context the minimum, F1 the mean
    both = answer_support(["Boston", "Denver"], BLOCK)
    assert both == {"answer_exact": 0.0, "answer_f1": 0.5, "answer_in_context": False}
    assert answer_support([], BLOCK)["answer_f1"] is None


def test_prompt_tokens_are_minilm_wordpieces_without_special_tokens():
    # '-', 'the', 'cat', 'sat', 'on', 'the', 'mat', '.'
    assert prompt_tokens("- the cat sat on the mat.") == 8
    # BERT's own example of a word split into pieces: 'una', '##ffa', '##ble' (plus '-')
    assert prompt_tokens("- unaffable") == 4
    assert prompt_tokens("") == 0


def test_a_stale_fact_in_the_top_k_counts_once():
    forbidden = ["us-east-1", "us-east"]
    # in the top_k twice, in the context block as well, two forbidden strings found: still one stale query
    assert stale_fact(forbidden, ["We deploy to us-east-1.", "Old: us-east-1."], "- We deploy to us-east-1.") is True
    assert stale_fact(forbidden, ["Production runs in eu-west-2."], "- Production runs in eu-west-2.") is False
    assert stale_fact([], ["We deploy to us-east-1."], "") is None  # the query names no stale fact

    def record(stale, **extra):
        return {"status": "ok", **extra, "measures": {
            "answer_exact": 1.0, "answer_f1": 1.0, "answer_in_context": True, "stale_fact": stale,
            "latency_ms": {"retrieve": 1.0, "context": 2.0}, "prompt_tokens": 10}}

    records = [record(True), record(False), record(None), record(None)]
    measures = run_measures(records, [], {"session": {}, "turn": {}, "evaluable": {"session": 0, "turn": 0}})
    assert measures["stale_fact_rate"] == 0.5 and measures["stale_fact_queries"] == 2
    unmarked = run_measures([record(None)], [], {"session": {}, "turn": {}, "evaluable": {"session": 0, "turn": 0}})
    assert unmarked["stale_fact_rate"] is None and "not measured" in unmarked["stale_fact_note"]


def test_run_measures_latency_answers_and_write_amplification_by_hand():
    def record(n, abstention=False):
        return {"status": "ok", "abstention": abstention, "measures": {
            "answer_exact": float(n % 2), "answer_f1": n / 20, "answer_in_context": n % 2 == 1, "stale_fact": None,
            "latency_ms": {"retrieve": float(n), "context": float(100 + n)}, "prompt_tokens": n}}

    records = [record(n) for n in range(1, 21)] + [record(1000, abstention=True)]
    outcomes = [{"stats": {"write": {"events": 4, "entries": 3, "folded": 1, "supersession_edges": 1, "links": 0,
                                     "bytes": 400}}},
                {"stats": {"write": {"events": 2, "entries": 2, "folded": 0, "supersession_edges": 0, "links": 1,
                                     "bytes": 200}}}]
    metrics_all = {"session": {"recall_any@5": 0.5}, "turn": {}, "evaluable": {"session": 20, "turn": 0}}
    m = run_measures(records, outcomes, metrics_all)
    # 21 latencies 1..20 and 1000: nearest rank p50 = 11th = 11, p95 = ceil(19.95) = 20th = 20
    assert m["latency_ms"] == {"p50": 11.0, "p95": 20.0, "context_p95": 120.0}
    # answers: the abstention is left out; 10 of 1..20 odd; F1 mean of n/20 = 10.5/20
    assert m["answered"] == 20 and m["answer_exact"] == 0.5 and m["answer_in_context"] == 0.5
    assert m["answer_f1"] == pytest.approx(0.525)
    assert m["recall"]["session"] == {"recall_any@5": 0.5}
    assert m["write_amplification"]["entries_per_event"] == pytest.approx(5 / 6)
    assert m["write_amplification"]["bytes_per_event"] == pytest.approx(100.0)


@pytest.mark.slow  # the real model
def test_write_amplification_of_three_events_one_folded_one_superseding(embedder):
    memory = AdaMem(embedder=embedder)
    memory.observe({"content": "We deploy to us-east-1.", "label": "old", "metadata": {"memory_key": "region"}})
    memory.observe({"content": "We deploy to us-east-1.", "label": "again", "metadata": {"memory_key": "region"}})
    memory.observe({"content": "Production moved to eu-west-2 in May.", "label": "new",
                    "metadata": {"memory_key": "region"}})
    write = write_amplification(memory)
    # 2 entries for 3 events; bytes: content (23 and 37) + vector (384 x 4) + metadata '{"memory_key":"region"}'
    # (23) for each entry, plus 8 for the one supersession edge
    assert write == {"events": 3, "entries": 2, "folded": 1, "supersession_edges": 1, "links": 0,
                     "bytes": (23 + 1536 + 23) + (37 + 1536 + 23) + 8}


@pytest.mark.slow  # the real model
def test_every_measure_of_a_hand_made_episode(embedder):
    episode = {"id": "cat", "observations": [
        {"label": "cat", "content": "The cat sat on the mat."},
        {"label": "again", "content": "The cat sat on the mat."},
        {"label": "why", "content": "The dog chased the cat.", "cause_labels": ["cat"]},
    ], "queries": [{"id": "q1", "query": "Where did the cat sit?", "expected_substrings": ["mat"],
                    "forbidden_substrings": ["sofa"], "top_k": 1}]}
    item = {"item_id": "cat", "episode": episode, "questions": [{"question_id": "cat:q1"}]}
    result = evaluate_episode(item, AdaMem.ablation("semantic_only", embedder=embedder))
    measures = result["records"][0]["measures"]
    top = result["records"][0]["candidates"][0]["text"]
    assert top == "The cat sat on the mat."  # the one memory holding the answer is also the nearest
    assert (measures["answer_exact"], measures["answer_f1"], measures["answer_in_context"]) == (1.0, 1.0, True)
    assert measures["stale_fact"] is False
    assert measures["prompt_tokens"] == 8  # "- the cat sat on the mat."
    assert measures["recall"]["turn"]["recall_any@1"] == 1.0 and measures["recall"]["session"] is None
    assert measures["latency_ms"]["retrieve"] > 0 and measures["latency_ms"]["context"] > 0
    # 3 events, 1 folded, 1 cause link; "The cat sat on the mat." 23 bytes, "The dog chased the cat." 23, metadata {}
    assert result["stats"]["write"] == {"events": 3, "entries": 2, "folded": 1, "supersession_edges": 0, "links": 1,
                                        "bytes": (23 + 1536 + 2) * 2 + 8}


@pytest.mark.slow  # the real model
def test_a_turn_item_measured_with_nothing_marked_stale(embedder):
    from adapters.systems.adamem import AdaMemSystem
    from coordinator.running.reducer import reduce_run
    from workers.item.evaluate import evaluate_item

    turns = [{"session_id": "D1", "turn_id": f"D1:{n}", "text": text, "props": {"speaker": "A"}}
             for n, text in enumerate(["A: I moved to Boston last spring.", "B: The weather was cold."], start=1)]
    question = {"question_id": "c:q0", "question": "Where did A move?", "expected": "Boston", "answer": "Boston",
                "gold_turns": ["D1:1"], "gold_sessions": ["D1"], "abstention": False}
    item = {"item_id": "c", "benchmark": "locomo", "turns": turns, "questions": [question]}
    outcome = evaluate_item(item, AdaMemSystem("full", embedder=embedder), top_k=2)
    measures = outcome["records"][0]["measures"]
    # the context block packs both turns (fewer than CONTEXT_ENTRIES): the answer is in it whatever the order
    assert (measures["answer_exact"], measures["answer_f1"], measures["answer_in_context"]) == (1.0, 1.0, True)
    assert measures["stale_fact"] is None and measures["answer"] == "Boston"
    # '-', 'a', ':', 'i', 'moved', 'to', 'boston', 'last', 'spring', '.' and '-', 'b', ':', 'the', 'weather', 'was',
    # 'cold', '.'
    assert measures["prompt_tokens"] == 18
    assert outcome["stats"]["write"]["events"] == 2 and outcome["stats"]["write"]["entries"] == 2
    context = run_context(benchmark="locomo", benchmark_title="LoCoMo", group_key=None, dataset_path="x",
                          dataset_sha256="0", system_config={"name": "adamem"}, top_k=2, k_values=(1, 3, 5, 10, 30, 50),
                          command="")
    results, manifest = reduce_run([outcome], context, elapsed_seconds=0.0)
    assert results["measures"]["stale_fact_rate"] is None and results["measures"]["stale_fact_queries"] == 0
    assert results["measures"]["recall"]["session"] == results["metrics"]["all"]["session"]
    assert results["measures"]["write_amplification"]["entries_per_event"] == 1.0
    assert manifest["measures"] == results["measures"]
