"""The `longmemeval-official` profile, worked by hand on a haystack with every awkward case.

The haystack of question q1, in order:
  s_a        user "alpha" | assistant "beta" | user "" (empty)
  answer_e1  user "I bought a red bike" (has_answer) | assistant "nice" (has_answer) | user "it cost 300"
  answer_e2  user "hello there" | assistant "the bike is red" (has_answer): no has_answer user turn
  answer_e1  again (a duplicated session)
Official turn corpus: s_a_1, s_a_3, answer_e1_1, noans_e1_3, noans_e2_1, answer_e1_1, noans_e1_3
(7 ids; gold = answer_e1_1, twice in the corpus, so the ideal holds 2 relevant positions).
Official session corpus: s_a, answer_e1, noans_e2, answer_e1 (gold answer_e1, twice).
q2 has no gold (scored: recall_any 0, recall_all 1, ndcg 0); q3_abs is left out of the averages.
Every number below is worked by hand with DCG = rel_1 + sum_{i>=2} rel_i / log2(i).
"""

import json
import math
import re

import pytest
from click.testing import CliRunner

from adapters.benchmarks.longmemeval import official
from adapters.benchmarks.longmemeval.reader import LongMemEval
from coordinator.cli import main
from coordinator.results.run_files import current_profile_names
from tests.adapters.systems.scripted_system import Scripted
from workers.item.evaluate import evaluate_item

K = (1, 3, 5, 10, 30, 50)
OFFICIAL = "longmemeval-official"


def _haystack_q1():
    e1 = [{"role": "user", "content": "I bought a red bike", "has_answer": True},
          {"role": "assistant", "content": "nice", "has_answer": True},
          {"role": "user", "content": "it cost 300", "has_answer": False}]
    return {
        "question_id": "q1", "question": "What colour is my bike?", "answer": "red", "question_type": "single-session-user",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["s_a", "answer_e1", "answer_e2", "answer_e1"],
        "haystack_dates": ["2023/01/01 (Sun) 10:00"] * 4,
        "haystack_sessions": [
            [{"role": "user", "content": "alpha"}, {"role": "assistant", "content": "beta"},
             {"role": "user", "content": ""}],
            e1,
            [{"role": "user", "content": "hello there", "has_answer": False},
             {"role": "assistant", "content": "the bike is red", "has_answer": True}],
            e1,
        ],
        "answer_session_ids": ["answer_e1", "answer_e2"],
    }


def _dataset(tmp_path):
    q2 = {"question_id": "q2", "question": "Anything?", "answer": "no", "question_type": "multi-session",
          "haystack_session_ids": ["s_b"], "haystack_dates": ["2023/01/01 (Sun) 10:00"],
          "haystack_sessions": [[{"role": "user", "content": "xray"}, {"role": "assistant", "content": "yes"}]],
          "answer_session_ids": ["s_b"]}
    q3 = {"question_id": "q3_abs", "question": "Never said?", "answer": "unknown", "question_type": "multi-session",
          "haystack_session_ids": ["s_c"], "haystack_dates": ["2023/01/01 (Sun) 10:00"],
          "haystack_sessions": [[{"role": "user", "content": "zeta"}]], "answer_session_ids": ["answer_c_abs"]}
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([_haystack_q1(), q2, q3]))
    return path


def _expect(rows: dict) -> dict:
    """{k: (recall_any, recall_all, ndcg)} -> metric names."""
    out = {}
    for k, (r_any, r_all, ndcg) in rows.items():
        out.update({f"recall_any@{k}": r_any, f"recall_all@{k}": r_all, f"ndcg_any@{k}": ndcg})
    return out


def _same(got: dict, want: dict):
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, abs=1e-12), name


L3, L4, L5, L6 = math.log2(3), math.log2(4), math.log2(5), math.log2(6)
NO_GOLD = _expect({k: (0.0, 1.0, 0.0) for k in K})


def test_corpus_ids_and_gold_follow_the_official_rules():
    raw = _haystack_q1()
    turns, sessions = official.corpora(list(zip(raw["haystack_session_ids"], raw["haystack_sessions"])))
    assert turns == ["s_a_1", "s_a_3", "answer_e1_1", "noans_e1_3", "noans_e2_1", "answer_e1_1", "noans_e1_3"]
    assert sessions == ["s_a", "answer_e1", "noans_e2", "answer_e1"]
    gold = official.question_gold("q1", list(zip(raw["haystack_session_ids"], raw["haystack_sessions"])))
    assert gold["turn"] == {"gold": ["answer_e1_1"], "ideal": 2, "ideal_session": 2, "corpus_size": 7,
                            "counts": {"answer_e1_1": 2}, "session_counts": {"answer_e1": 2}}
    assert gold["session"] == {"gold": ["answer_e1"], "ideal": 2, "corpus_size": 4, "counts": {"answer_e1": 2}}
    assert gold["scored"] and not official.question_gold("x_abs", [])["scored"]
    assert official.session_of("noans_e1_3") == "noans_e1" and official.session_of("sharegpt_yy_0_12") == "sharegpt_yy_0"


def test_the_item_indexes_user_turns_of_every_occurrence_and_never_an_empty_one(tmp_path):
    item = next(LongMemEval(_dataset(tmp_path), profile=OFFICIAL).iter_items())
    assert [t["official_id"] for t in item["turns"]] == [
        "s_a_1", "s_a_3", "answer_e1_1", "noans_e1_3", "noans_e2_1", "answer_e1_1", "noans_e1_3"]
    assert item["stats"]["empty_turns_not_indexed"] == 1
    question = item["questions"][0]
    assert question["gold_turns"] == ["answer_e1#0", "answer_e1#0"] and "excluded" not in question
    text_item = next(LongMemEval(_dataset(tmp_path)).iter_items())  # expected-text corpus: every non-empty turn, once
    assert len(text_item["turns"]) == 7 and text_item["stats"]["duplicate_sessions_skipped"] == 1


def _score(tmp_path, level, lines, profile=OFFICIAL):
    rankings = tmp_path / f"{level}.jsonl"
    rankings.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / f"scored_{level}_{profile}.json"
    result = CliRunner().invoke(main, ["score", "--dataset", str(_dataset(tmp_path)), "--rankings", str(rankings),
                                       "--level", level, "--profile", profile, "--output", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text()), result.output


def test_score_turn_rankings_reproduces_the_hand_worked_numbers(tmp_path):
    # ranked: s_a_1, s_a_3, noans_e2_1, answer_e1_1, noans_e1_3, answer_e1_1, noans_e1_3 in both id forms,
    # then an unknown id and a third answer_e1_1 (the corpus holds two): both dropped.
    q1 = ["s_a#0", "s_a_3", "noans_e2_1", "answer_e1#0", "answer_e1_3", "answer_e1_1", "noans_e1_3", "zz_9",
          "answer_e1#0"]
    results, output = _score(tmp_path, "turn", [{"question_id": "q1", "ranked": q1},
                                                {"question_id": "q2", "ranked": ["s_b#0"]},
                                                {"question_id": "q3_abs", "ranked": ["s_c_1"]}])
    records = {r["question_id"]: r for r in results["records"]}
    tail = (0.5 + 1 / L6) / 2  # relevant at 4 and 6, ideal 1 + 1
    _same(records["q1"]["metrics"]["turn"], _expect({1: (0, 0, 0), 3: (0, 0, 0), 5: (1, 1, 0.5 / 2),
                                                     10: (1, 1, tail), 30: (1, 1, tail), 50: (1, 1, tail)}))
    # sessions: s_a, s_a, noans_e2, answer_e1, noans_e1, answer_e1, noans_e1; k=3 widens to 4 (3 sessions),
    # k=5 to the whole corpus (only 4 sessions exist)
    _same(records["q1"]["metrics"]["session"], _expect({1: (0, 0, 0), 3: (1, 1, 0.5 / 2), 5: (1, 1, tail),
                                                        10: (1, 1, tail), 30: (1, 1, tail), 50: (1, 1, tail)}))
    assert records["q1"]["diagnostics"]["dropped_ids"] == 2
    _same(records["q2"]["metrics"]["turn"], NO_GOLD)
    _same(records["q2"]["metrics"]["session"], NO_GOLD)
    assert records["q3_abs"]["metrics"] is None
    averaged = results["metrics"]["all"]
    assert averaged["evaluable"] == {"session": 2, "turn": 2}
    assert averaged["turn"]["recall_any@5"] == pytest.approx(0.5) and averaged["turn"]["recall_all@1"] == 0.5
    assert averaged["session"]["ndcg_any@10"] == pytest.approx(tail / 2)
    # the expected-text profile is computed too, on the same ranking: q3_abs is excluded; q2's answer session s_b
    # is its gold there (no has_answer turn is needed)
    text_block = results["metrics_by_profile"]["expected-text"]["all"]
    assert text_block["evaluable"]["session"] == 2 and results["metrics_by_profile"][OFFICIAL]["own_corpus"]


def test_score_session_rankings_uses_the_session_corpus(tmp_path):
    # answer_e2 is written raw: it is the noans_e2 document (no has_answer user turn), never gold.
    q1 = ["s_a", "answer_e2", "answer_e1", "answer_e1", "answer_e1"]
    results, _ = _score(tmp_path, "session", [{"question_id": "q1", "ranked": q1},
                                              {"question_id": "q2", "ranked": ["s_b"]}])
    records = {r["question_id"]: r for r in results["records"]}
    full = (1 / L3 + 1 / L4) / 2
    _same(records["q1"]["metrics"]["session"], _expect({1: (0, 0, 0), 3: (1, 1, (1 / L3) / 2), 5: (1, 1, full),
                                                        10: (1, 1, full), 30: (1, 1, full), 50: (1, 1, full)}))
    assert records["q1"]["metrics"]["turn"] is None and records["q1"]["diagnostics"]["dropped_ids"] == 1
    _same(records["q2"]["metrics"]["session"], NO_GOLD)


def test_a_run_asks_for_the_whole_corpus_and_keeps_top_k_candidates(tmp_path):
    item = next(LongMemEval(_dataset(tmp_path), profile=OFFICIAL).iter_items())
    system = Scripted()
    outcome = evaluate_item(item, system, top_k=2, k_values=K, profile=OFFICIAL)
    record = outcome["records"][0]
    assert system.asked == [6] and len(record["candidates"]) == 2  # 6 non-empty user turns indexed
    # ranked: s_a_1, noans_e2_1, answer_e1_1, answer_e1_1, noans_e1_3, noans_e1_3 (the empty turn is not indexed)
    head, full = (1 / L3) / 2, (1 / L3 + 1 / L4) / 2
    want = _expect({1: (0, 0, 0), 3: (1, 1, head), 5: (1, 1, full), 10: (1, 1, full), 30: (1, 1, full),
                    50: (1, 1, full)})
    _same(record["metrics"]["turn"], want)
    _same(record["metrics"]["session"], want)  # k=3 spans 3 sessions at once; k=5 widens to the whole ranking
    assert record["metrics_by_profile"][OFFICIAL] == record["metrics"]


def test_the_cli_run_prints_every_profile_and_says_which_corpus(tmp_path):
    data = _dataset(tmp_path)
    system = "tests/adapters/systems/scripted_system.py:Scripted"
    cited = tmp_path / "cited.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", system,
                                       "--output", str(cited)])
    assert result.exit_code == 0, result.output
    assert "longmemeval-official *" not in result.output and "expected-text *" in result.output
    first = next(line for line in result.output.splitlines() if "recall" in line)
    assert re.fullmatch(r"session recall_all@5 \d\.\d{3}: \d/2 questions with every answer session in the top 5", first)
    assert "(diagnostic: session recall_any@5 " in result.output
    analysis = CliRunner().invoke(main, ["analyze", str(cited)]).output
    assert analysis.index("session recall_all@5") < analysis.index("retrieved / top-1")
    results = json.loads(cited.read_text())
    assert results["scoring_profile"] == results["corpus"] == OFFICIAL, "citable numbers by default"
    assert results["metrics_by_profile"][OFFICIAL]["all"]["evaluable"]["turn"] == 2
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", system,
                                       "--profile", "expected-text", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "longmemeval-official *" in result.output and "not citable" in result.output
    assert "turn recall is low" in result.output
    results = json.loads(out.read_text())
    assert results["corpus"] == "expected-text" and not results["metrics_by_profile"][OFFICIAL]["own_corpus"]


def test_analyze_reads_a_file_under_another_profile_and_refuses_to_mix_corpora(tmp_path):
    data = _dataset(tmp_path)
    system = "tests/adapters/systems/scripted_system.py:Scripted"
    paths = []
    for profile in ("expected-text", OFFICIAL):
        paths.append(tmp_path / f"{profile}.json")
        result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", system,
                                           "--profile", profile, "--output", str(paths[-1])])
        assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(main, ["analyze", str(paths[0]), "--profile", OFFICIAL, "--json"])
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.output)
    assert report["scoring_profile"] == OFFICIAL and report["corpus"] == "expected-text" and report["evaluable"] == 2
    mixed = CliRunner().invoke(main, ["analyze", "--compare", "--profile", OFFICIAL, *map(str, paths)])
    assert mixed.exit_code == 2 and "corpus" in mixed.output
    forced = CliRunner().invoke(main, ["analyze", "--compare", "--force", "--profile", OFFICIAL, *map(str, paths)])
    assert forced.exit_code == 0, forced.output


def test_the_old_profile_name_memoria_reads_as_expected_text(tmp_path):
    data = _dataset(tmp_path)
    system = "tests/adapters/systems/scripted_system.py:Scripted"
    new = tmp_path / "new.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", system,
                                       "--scoring-profile", "memoria", "--output", str(new)])
    assert result.exit_code == 0, result.output
    written = json.loads(new.read_text())
    assert written["scoring_profile"] == written["corpus"] == "expected-text"
    assert set(written["records"][0]["metrics_by_profile"]) == {"expected-text", OFFICIAL}
    # a results file and manifest as a run wrote them when the profile was named `memoria`
    old = tmp_path / "old.json"
    old.write_text(new.read_text().replace('"expected-text"', '"memoria"'))
    old_manifest = json.loads(new.with_name("new.manifest.json").read_text().replace('"expected-text"', '"memoria"'))
    assert json.loads(old.read_text())["metrics_by_profile"]["memoria"]["corpus"] == "memoria"
    assert current_profile_names(old_manifest)["evaluation"]["scoring_profile"] == "expected-text"
    assert current_profile_names(old_manifest)["evaluation"]["profiles_computed"] == sorted(["expected-text", OFFICIAL])
    shown = CliRunner().invoke(main, ["analyze", str(old), "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["scoring_profile"] == "expected-text"
    official_view = CliRunner().invoke(main, ["analyze", str(old), "--profile", OFFICIAL, "--json"])
    assert official_view.exit_code == 0, official_view.output
    assert json.loads(official_view.output)["corpus"] == "expected-text"
    for profile in ("expected-text", "memoria"):  # the old name on the command line too
        same = CliRunner().invoke(main, ["analyze", str(old), "--profile", profile, "--json"])
        assert same.exit_code == 0, same.output
        assert json.loads(same.output) == json.loads(shown.output)
    lined_up = CliRunner().invoke(main, ["analyze", "--compare", str(old), str(new)])
    assert lined_up.exit_code == 0, lined_up.output


def test_locomo_refuses_the_official_profile(tmp_path):
    data = tmp_path / "l.json"
    data.write_text("[]")
    result = CliRunner().invoke(main, ["run", "locomo", "--dataset", str(data), "--profile", OFFICIAL])
    assert result.exit_code == 2 and "does not apply to locomo" in result.output


# -- the same rules, written again from the facts, checked on random haystacks -----------------------------------
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _reference(ids: list[str], ranking: list[int], k: int, widen: bool) -> tuple[float, float, float]:
    """An independent reading of the facts: corpus positions, a ranking of positions, relevance by id."""
    gold = {d for d in ids if "answer" in d}
    if widen:  # session metrics from turns: ids become sessions, k widens to span k distinct sessions
        ids = ["_".join(d.split("_")[:-1]) for d in ids]
        gold = {"_".join(d.split("_")[:-1]) for d in gold}
        wanted = k
        while k <= len(ids) and len({ids[i] for i in ranking[:k]}) < wanted:
            k += 1

    def dcg(rels):
        return sum(rel if i == 0 else rel / math.log2(i + 1) for i, rel in enumerate(rels))

    relevance = [1 if d in gold else 0 for d in ids]
    top = {ids[i] for i in ranking[:k]}
    ideal = dcg(sorted(relevance, reverse=True)[:k])
    return (float(any(g in top for g in gold)), float(all(g in top for g in gold)),
            dcg([relevance[i] for i in ranking[:k]]) / ideal if ideal else 0.0)


_turn = st.fixed_dictionaries({"role": st.sampled_from(["user", "user", "assistant"]), "content": st.just("t"),
                               "has_answer": st.booleans()})
_haystack = st.lists(st.tuples(st.sampled_from(["answer_a", "answer_b_1", "s_x", "s_y_2", "noise"]),
                               st.lists(_turn, max_size=5)), max_size=7)


@given(haystack=_haystack, data=st.data())
def test_official_metrics_match_an_independent_reading_of_the_facts(haystack, data):
    turn_ids, session_ids = official.corpora(haystack)
    gold = official.question_gold("q", haystack)
    turn_rank = data.draw(st.permutations(range(len(turn_ids))))[:data.draw(st.integers(0, len(turn_ids)))]
    got = official.metrics([turn_ids[i] for i in turn_rank], gold, "turn", K)
    session_rank = data.draw(st.permutations(range(len(session_ids))))[:data.draw(st.integers(0, len(session_ids)))]
    got_sessions = official.metrics([session_ids[i] for i in session_rank], gold, "session", K)
    for k in K:
        for level, values, want in (("turn", got["turn"], _reference(turn_ids, turn_rank, k, widen=False)),
                                    ("turn->session", got["session"], _reference(turn_ids, turn_rank, k, widen=True)),
                                    ("session", got_sessions["session"],
                                     _reference(session_ids, session_rank, k, widen=False))):
            assert (values[f"recall_any@{k}"], values[f"recall_all@{k}"]) == want[:2], (level, k)
            assert values[f"ndcg_any@{k}"] == pytest.approx(want[2], abs=1e-12), (level, k)


# -- repeated ids, collisions, short rankings, exports, silent drops ---------------------------------------------
def _one(tmp_path, ids, sessions, name="one.json"):
    raw = {"question_id": "q1", "question": "q?", "answer": "a", "question_type": "t", "haystack_session_ids": ids,
           "haystack_dates": ["2023/01/01 (Sun) 10:00"] * len(ids), "haystack_sessions": sessions,
           "answer_session_ids": [i for i in ids if "answer" in i][:1]}
    path = tmp_path / name
    path.write_text(json.dumps([raw]))
    return path


def _score_file(tmp_path, data, level, ranked, *extra):
    rankings = tmp_path / f"r_{level}.jsonl"
    rankings.write_text(json.dumps({"question_id": "q1", "ranking": ranked}) + "\n")  # the `ranking` alias
    out = tmp_path / f"s_{level}.json"
    result = CliRunner().invoke(main, ["score", "--dataset", str(data), "--rankings", str(rankings), "--level", level,
                                       "--profile", OFFICIAL, "--output", str(out), *extra])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())["records"][0], result


def test_a_session_listed_twice_with_different_content_is_two_entries(tmp_path):
    data = _one(tmp_path, ["answer_s", "answer_s"], [[{"role": "user", "content": "x"}],
                                                     [{"role": "user", "content": "y", "has_answer": True}]])
    turn, _ = _score_file(tmp_path, data, "turn", ["answer_s_1", "noans_s_1"])
    assert turn["metrics"]["turn"]["recall_any@1"] == 1.0 and turn["metrics"]["session"]["recall_any@1"] == 1.0
    session, _ = _score_file(tmp_path, data, "session", ["answer_s", "noans_s"])
    assert session["metrics"]["session"]["recall_any@1"] == 1.0


def test_an_official_id_two_entries_share_stands_for_both(tmp_path):
    data = _one(tmp_path, ["answer_x", "noans_x"], [
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b", "has_answer": True}],
        [{"role": "user", "content": "c"}]])
    record, result = _score_file(tmp_path, data, "turn", ["noans_x_1", "noans_x_1", "answer_x_2", "answer_x#1"])
    assert record["metrics"]["turn"]["ndcg_any@3"] == pytest.approx(1 / L3)  # gold third; ideal 1
    assert record["diagnostics"]["dropped_ids"] == 1  # answer_x#1 is answer_x_2 again
    assert "1 ranked ids are not in the turn corpus" in result.output and "q1: answer_x#1" in result.output


def test_rare_id_shapes_follow_the_official_rules():
    haystack = [("answer_answer_q", [{"role": "user", "content": "u"}, {"role": "system", "content": "s"},
                                     {"content": "no role"}, {"role": "user", "content": "v", "has_answer": True}])]
    turns, sessions = official.corpora(haystack)
    assert turns == ["noans_noans_q_1", "answer_answer_q_4"], "every 'answer' is replaced; only user turns count"
    assert sessions == ["answer_answer_q"]
    assert official.session_id("answer_answer_q", [{"role": "user", "content": "u"}]) == "noans_noans_q"
    assert not official.question_gold("a_abs_b", [])["scored"], "_abs anywhere in the id leaves it out"


def test_memoria_reads_only_the_kept_candidates_of_a_deeper_ranking():
    from adapters.metrics import profile_metrics

    ranked = [{"session_id": "X", "turn_id": "X#0"}, {"session_id": "G", "turn_id": "G#0"}]
    question = {"question_id": "q", "gold_sessions": ["G"], "gold_turns": ["G#0"]}
    deep = profile_metrics(question, ranked, level="turn", k_values=(2,), depth=1)
    assert deep["expected-text"]["turn"]["recall_any@2"] == 0.0
    assert deep["expected-text"]["session"]["recall_any@2"] == 0.0


def test_a_short_ranking_is_said_and_the_export_reproduces_the_official_numbers(tmp_path):
    data = _dataset(tmp_path)
    shy = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system",
                                    "tests/adapters/systems/scripted_system.py:Shy", "--profile", OFFICIAL,
                                    "--output", str(tmp_path / "shy.json")])
    assert shy.exit_code == 0, shy.output
    assert json.loads((tmp_path / "shy.json").read_text())["short_rankings"] == 1  # q1: 2 of 6 docs; q2, q3: 1 of 1
    assert "returned fewer docs than the corpus" in shy.output
    out = tmp_path / "deep.json"
    run = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system",
                                    "tests/adapters/systems/scripted_system.py:Scripted", "--profile", OFFICIAL,
                                    "--top-k", "1", "--output", str(out)])
    assert run.exit_code == 0, run.output
    assert "fewer docs" not in run.output, "a system that ranks every doc is not short, whatever --top-k"
    exported = tmp_path / "deep.jsonl"
    assert CliRunner().invoke(main, ["rankings", str(out), "--level", "turn", "--output", str(exported)]).exit_code == 0
    scored = tmp_path / "rescored.json"
    again = CliRunner().invoke(main, ["score", "--dataset", str(data), "--rankings", str(exported), "--level", "turn",
                                      "--profile", OFFICIAL, "--output", str(scored)])
    assert again.exit_code == 0, again.output
    assert json.loads(scored.read_text())["metrics"] == json.loads(out.read_text())["metrics"]


def test_score_records_a_malformed_item_as_failed_and_says_each_problem_once(tmp_path):
    bad = _haystack_q1()
    bad["question_id"], bad["haystack_dates"] = "broken", ["2023/01/01 (Sun) 10:00"]  # one date for four sessions
    data = tmp_path / "two.json"
    data.write_text(json.dumps([_haystack_q1(), bad]))
    rankings = tmp_path / "r.jsonl"
    rankings.write_text('{"question_id": "q1", "ranked": ["answer_e1_1"]}\n{"question_id": "nobody", "ranked": []}\n')
    out = tmp_path / "s.json"
    result = CliRunner().invoke(main, ["score", "--dataset", str(data), "--rankings", str(rankings), "--level", "turn",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert results["question_count"] == 2 and results["failed"] == 1
    assert [r["status"] for r in results["records"]] == ["ok", "failed"]
    assert result.output.count("unknown question_id 'nobody'") == 1


def test_a_ranking_that_names_one_corpus_entry_twice_gains_nothing(tmp_path):
    """answer_e1_1 is two corpus entries (its session is listed twice), answer_e9_1 would be one: naming the
    first three times or the second twice counts only the entries the corpus holds, and nDCG stays within 1."""
    raw = _haystack_q1()
    gold = official.question_gold("q1", list(zip(raw["haystack_session_ids"], raw["haystack_sessions"])))
    honest = official.metrics(["answer_e1_1", "answer_e1_1", "s_a_1"], gold, "turn", (1, 3, 5))
    repeated = official.metrics(["answer_e1_1", "answer_e1_1", "answer_e1_1", "s_a_1"], gold, "turn", (1, 3, 5))
    assert honest["turn"]["ndcg_any@3"] == pytest.approx(1.0)
    assert repeated["turn"]["ndcg_any@5"] == pytest.approx(1.0) and repeated["turn"]["ndcg_any@3"] == pytest.approx(1.0)
    for k in (1, 3, 5):
        for level in ("turn", "session"):
            assert 0 <= repeated[level][f"ndcg_any@{k}"] <= 1
    # a gold id named more often than it is held: the extra copies count as nothing, not as relevant
    once = {**gold, "turn": {**gold["turn"], "counts": {"answer_e1_1": 1}, "ideal": 1, "ideal_session": 1,
                             "session_counts": {"answer_e1": 1}}}
    twice = official.metrics(["s_a_1", "answer_e1_1", "answer_e1_1"], once, "turn", (3,))
    assert twice["turn"]["ndcg_any@3"] == pytest.approx(1 / 1.0)  # rel at 2: 1/log2(2) = 1 over ideal 1
    thrice = official.metrics(["answer_e1_1"] * 3, once, "turn", (3,))
    assert thrice["turn"]["ndcg_any@3"] == pytest.approx(1.0)


def test_a_system_name_with_terminal_escapes_is_printed_escaped(tmp_path):
    data = _dataset(tmp_path)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system",
                                       "tests/adapters/systems/scripted_system.py:Disguised",
                                       "--output", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output
    assert "scripted\\x1b]0;owned\\x07\\u202e" in result.output
