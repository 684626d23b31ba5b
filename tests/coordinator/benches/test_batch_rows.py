"""`memfarm bench batch-rows`: every rule encodes the same real turns and questions, and the chosen one is the
rule the encoder runs."""

import json

from coordinator.benches.batch_rows import run_batch_rows_bench
from memoria import defaults


def test_each_rule_is_timed_on_the_same_texts_and_the_encoders_own_rule_is_the_one_chosen(locomo_path, tmp_path,
                                                                                          embedder):
    import torch

    threads = torch.get_num_threads()
    run_batch_rows_bench(locomo_path, 16, 2, 1, tmp_path / "rows.json", threads=1)
    written = json.loads((tmp_path / "rows.json").read_text())
    assert written["torch_threads"] == 1 and torch.get_num_threads() == threads, "the caller's threads given back"
    rules = written["rules"]
    chosen = [r for r in rules if r["chosen"]]
    assert [(r["rows"], r["pad_step"]) for r in chosen] == [("width", defaults.CANONICAL_PAD_STEP)]
    assert ("8", 16) in {(str(r["rows"]), r["pad_step"]) for r in rules}, "the rule before this one, side by side"
    before = rules[0]
    assert before["rows"] == "up to 32" and before["turns_seconds_ratio"] == before["question_seconds_ratio"] == 1.0
    assert all(r["turns_per_second"] > 0 and r["question_ms"] > 0 for r in rules)


def test_every_rule_is_warmed_before_any_clock_and_no_rule_always_runs_first():
    from coordinator.benches.batch_rows import _medians

    calls = []
    rules = {"a": ("a",), "b": ("b",), "c": ("c",)}
    median = _medians(lambda batch, rule: calls.append((rule[0], len(batch))), rules, ["t"] * 20, ["q1", "q2"], 2)
    warm, timed = calls[:6], calls[6:]
    assert sorted(warm) == [("a", 1), ("a", 16), ("b", 1), ("b", 16), ("c", 1), ("c", 16)]
    firsts = [rule for rule, size in timed if size == 20]  # each rule's turns call, in the order the rounds ran them
    assert firsts == ["a", "b", "c", "c", "b", "a"]
    assert set(median) == set(rules) and all(set(m) == {"turns", "questions"} for m in median.values())
