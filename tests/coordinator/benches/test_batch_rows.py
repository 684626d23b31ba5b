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


def test_every_rule_runs_once_untimed_then_each_round_times_turns_and_questions_apart(monkeypatch):
    from coordinator.benches import batch_rows

    clock, calls = [0.0], []

    def encode(batch, rule):  # a turn costs its rule's number of seconds, a question seven times that
        calls.append((rule[0], len(batch)))
        clock[0] += rule[0] * (len(batch) if len(batch) > 1 else 7)

    monkeypatch.setattr(batch_rows.time, "perf_counter", lambda: clock[0])
    rules = {"a": (1,), "b": (2,), "c": (3,)}
    median = batch_rows._medians(encode, rules, ["t"] * 20, ["q1", "q2"], 2)
    turn_calls = [rule for rule, size in calls if size == 20]  # each rule's turns, in the order they ran
    assert turn_calls == [1, 2, 3, 3, 2, 1, 1, 2, 3], "an untimed round first, then no rule always first"
    assert median == {name: {"turns": 20.0 * cost, "questions": 14.0 * cost} for name, (cost,) in rules.items()}
