"""`memfarm compare`: the paired statistics against independent computations, and the refusals."""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from adapters.files import write_json
from coordinator.cli import main
from coordinator.results.run_files import ResultsFile
from coordinator.results.compare import bootstrap_interval, compare_files, holm, paired, parse_metric
from coordinator.running.reducer import reduce_run
from adapters.records import candidate, question_record
from adapters.errors import ResultsError
from tests.factories import run_context


def _binary(wins: int, losses: int, both_hit: int, both_miss: int) -> tuple[dict, dict]:
    """(baseline, system) hit/miss values with that many wins, losses and ties for the system."""
    pairs = [(0.0, 1.0)] * wins + [(1.0, 0.0)] * losses + [(1.0, 1.0)] * both_hit + [(0.0, 0.0)] * both_miss
    return ({f"q{i:02d}": a for i, (a, _) in enumerate(pairs)}, {f"q{i:02d}": b for i, (_, b) in enumerate(pairs)})


def test_mcnemar_agrees_with_the_binomial_formula_on_7_wins_and_2_losses():
    baseline, system = _binary(wins=7, losses=2, both_hit=4, both_miss=3)
    entry = paired(baseline, system, hit_or_miss=True, resamples=2000)
    # two-sided exact test: twice P(X <= 2) for X ~ Binomial(9, 1/2), written out
    expected = 2 * sum(math.comb(9, i) for i in range(3)) / 2 ** 9
    assert expected == pytest.approx(0.1796875)
    assert entry["p_value"] == pytest.approx(expected, abs=1e-12)
    assert entry["test"] == "mcnemar-exact"
    assert entry["n"] == 16
    assert (entry["wins"]["count"], entry["losses"]["count"], entry["ties"]["count"]) == (7, 2, 7)
    assert entry["wins"]["question_ids"] == [f"q{i:02d}" for i in range(7)]
    assert entry["losses"]["question_ids"] == ["q07", "q08"]
    assert entry["baseline_value"] == pytest.approx(6 / 16) and entry["system_value"] == pytest.approx(11 / 16)
    assert entry["delta"] == pytest.approx(5 / 16)


def test_mcnemar_with_no_discordant_pair_is_one_and_a_lopsided_one_is_small():
    baseline, system = _binary(wins=0, losses=0, both_hit=5, both_miss=5)
    assert paired(baseline, system, hit_or_miss=True, resamples=200)["p_value"] == 1.0
    baseline, system = _binary(wins=10, losses=0, both_hit=0, both_miss=0)
    assert paired(baseline, system, hit_or_miss=True, resamples=200)["p_value"] == pytest.approx(2 / 2 ** 10)


def test_null_values_are_left_out_of_the_pairs():
    baseline, system = _binary(wins=3, losses=1, both_hit=0, both_miss=0)
    baseline["abstained"], system["abstained"] = None, None
    baseline["no turn gold here"], system["no turn gold here"] = 1.0, None
    entry = paired(baseline, system, hit_or_miss=True, resamples=200)
    assert entry["n"] == 4
    assert "abstained" not in entry["ties"]["question_ids"]


def _correlated_pairs(n=300, seed=7):
    """Graded values of two systems that agree on most questions, so a paired interval is narrow."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 1, n)
    system = np.clip(base + rng.choice([0.0, 0.0, 0.0, 0.25, -0.15], n), 0, 1)
    return base, system


def test_bootstrap_interval_agrees_with_a_direct_numpy_bootstrap_and_the_normal_approximation():
    base, system = _correlated_pairs()
    diffs = system - base
    low, high = bootstrap_interval(diffs, resamples=10_000, seed=0)
    # an independent percentile bootstrap with other draws: same interval up to Monte Carlo error
    rng = np.random.default_rng(12345)
    means = diffs[rng.integers(0, len(diffs), (20_000, len(diffs)))].mean(axis=1)
    assert low == pytest.approx(np.percentile(means, 2.5), abs=0.002)
    assert high == pytest.approx(np.percentile(means, 97.5), abs=0.002)
    # and the mean +- 1.96 standard errors of the paired differences
    half = 1.96 * diffs.std(ddof=1) / math.sqrt(len(diffs))
    assert low == pytest.approx(diffs.mean() - half, abs=0.003)
    assert high == pytest.approx(diffs.mean() + half, abs=0.003)
    # pairing matters: resampling each system on its own would give an interval several times wider
    unpaired_half = 1.96 * math.sqrt(base.var(ddof=1) / len(base) + system.var(ddof=1) / len(system))
    assert high - low < unpaired_half


def test_bootstrap_is_reproducible_by_seed_and_degenerate_differences_give_a_point():
    diffs = _correlated_pairs()[1] - _correlated_pairs()[0]
    assert bootstrap_interval(diffs, resamples=2000, seed=3) == bootstrap_interval(diffs, resamples=2000, seed=3)
    assert bootstrap_interval(diffs, resamples=2000, seed=3) != bootstrap_interval(diffs, resamples=2000, seed=4)
    assert bootstrap_interval(np.array([0.25] * 9), resamples=2000) == [0.25, 0.25]


def test_sign_flip_test_is_exact_on_a_hand_worked_case():
    # differences 0.5, 0.3, -0.1, 0.2, 0.4 (mean 0.26): of the 32 sign patterns, the observed one and the one
    # flipping -0.1 reach |sum| >= 1.3, and so do their mirror images: p = 4/32
    baseline = {f"q{i}": 0.5 for i in range(5)}
    system = {f"q{i}": 0.5 + d for i, d in enumerate((0.5, 0.3, -0.1, 0.2, 0.4))}
    entry = paired(baseline, system, hit_or_miss=False, resamples=2000, permutations=1000)
    assert entry["p_value"] == pytest.approx(4 / 32)
    assert entry["test"] == "sign-flip (exact, all 32 sign patterns)"
    assert (entry["wins"]["count"], entry["losses"]["count"], entry["ties"]["count"]) == (4, 1, 0)


def test_sign_flip_test_draws_its_permutations_when_there_are_more_patterns():
    base, system = _correlated_pairs(n=40)
    entry = paired(dict(enumerate(base)), dict(enumerate(system)), hit_or_miss=False, resamples=500,
                   permutations=500)
    assert entry["test"] == "sign-flip (500 permutations)"
    assert 0 < entry["p_value"] <= 1


def test_holm_on_a_hand_worked_case():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> kept monotone: 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.6, None, 0.7]) == [1.0, None, 1.0]
    assert holm([0.2]) == [0.2]


def test_metric_names_are_checked():
    assert parse_metric("turn:ndcg_any@10") == ("turn", "ndcg_any", 10)
    for bad in ("session:recall@5", "sessions:recall_all@5", "session:recall_all", "recall_all@5"):
        with pytest.raises(ResultsError):
            parse_metric(bad)


# --- whole files through the command line ---------------------------------------------------------------------


def _record(qid, item, hit, *, status="ok"):
    """A record made by the project's own record code: a hit ranks the gold turn first, a miss ranks another."""
    if status != "ok":
        return {"question_id": qid, "item_id": item, "status": status, "error": "boom", "metrics": None}
    question = {"question_id": qid, "question": "q?", "question_type": "t", "gold_sessions": ["D1"],
                "gold_turns": ["D1:1"], "abstention": hit is None}
    ranked = [("D1", "D1:1")] if hit else [("D9", "D9:1")]
    candidates = [candidate(rank, turn, session_id=session, turn_id=turn) for rank, (session, turn) in
                  enumerate(ranked + [("D8", "D8:2")], start=1)]
    return question_record(question, item, candidates, level="turn", k_values=(5, 10), profile="expected-text",
                           worker="test", attempt=1)


def results_file(path, hits: dict, *, mode="fusion", checksum="abc", profile="expected-text", failed=(),
                 unread=()) -> str:
    """A LoCoMo-shaped results file made by the reducer: `hits` {question_id: 1/0/None}, items `c1`, `c2`, ...;
    `failed` item ids fail with their questions known, `unread` ones before their questions were read."""
    by_item: dict[str, list] = {}
    for qid, hit in hits.items():
        item = qid.split(":")[0]
        by_item.setdefault(item, []).append(_record(qid, item, hit, status="failed" if item in failed else "ok"))
    for item in unread:
        by_item[item] = [_record(item, item, None, status="failed")]
    outcomes = [{"item_id": item, "records": records} for item, records in by_item.items()]
    context = run_context(benchmark="locomo", benchmark_title="LoCoMo", dataset_sha256=checksum,
                          system_config={"name": "memoria", "retrieval_mode": mode}, scoring_profile=profile, top_k=5,
                          k_values=(5, 10))
    results, _ = reduce_run(outcomes, context, elapsed_seconds=0.0, commit="c")
    write_json(path, results)
    return str(path)


HITS_A = {"c1:q0": 1, "c1:q1": 0, "c1:q2": None, "c2:q0": 1, "c2:q1": 1}
HITS_B = {"c1:q0": 1, "c1:q1": 1, "c1:q2": None, "c2:q0": 1, "c2:q1": 0}


def compare(*args):
    return CliRunner().invoke(main, ["compare", *map(str, args)])


def test_compare_prints_the_table_and_writes_the_json(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["/venv/bin/memfarm", "compare", "a.json", "b.json"])  # as a user types it
    a = results_file(tmp_path / "a.json", HITS_A)
    b = results_file(tmp_path / "b.json", HITS_B, mode="full")
    out = tmp_path / "cmp.json"
    result = compare(a, b, "--json", out, "--resamples", 500, "--seed", 4)
    assert result.exit_code == 0, result.output
    assert "500 resamples, seed 4" in result.output
    assert [line.split()[0] for line in result.output.splitlines() if line.startswith(("session:", "turn:"))] == \
        ["session:recall_all@5", "session:recall_any@5", "session:ndcg_any@10", "turn:recall_any@10"]
    table = json.loads(out.read_text())
    first = table["comparisons"][0]
    assert set(first) == {"metric", "baseline", "system", "baseline_value", "system_value", "delta", "ci95", "p_value",
                          "p_holm", "holm_family", "test", "wins", "losses", "ties", "n", "outcome", "verdict"}
    assert (first["baseline"], first["system"], first["n"]) == ("memoria/fusion", "memoria/full", 4)
    assert first["wins"]["question_ids"] == ["c1:q1"] and first["losses"]["question_ids"] == ["c2:q1"]
    assert first["delta"] == 0 and first["p_value"] == 1.0 and len(first["ci95"]) == 2
    assert table["resamples"] == 500 and table["seed"] == 4 and table["permutations"] == 10_000
    # what made it, so that a figure in the manual quoted from this file can be traced and made again
    assert table["command"] == "memfarm compare a.json b.json" and table["commit"] and table["created"].endswith("Z")
    assert table["cores"] >= 1 and len(table["load"]) == 3


def test_metric_option_chooses_the_rows(tmp_path):
    a = results_file(tmp_path / "a.json", HITS_A)
    b = results_file(tmp_path / "b.json", HITS_B, mode="full")
    c = results_file(tmp_path / "c.json", HITS_B, mode="bm25")
    out = tmp_path / "cmp.json"
    result = compare(a, b, c, "--metric", "turn:recall_any@10", "--json", out, "--resamples", 200)
    assert result.exit_code == 0, result.output
    table = json.loads(out.read_text())
    assert [(c["metric"], c["system"]) for c in table["comparisons"]] == \
        [("turn:recall_any@10", "memoria/full"), ("turn:recall_any@10", "memoria/bm25")]
    assert compare(a, b, "--metric", "session:recall@5").exit_code == 2


@pytest.mark.parametrize("change, named", [({"checksum": "other"}, "dataset checksum other differs"),
                                           ({"profile": "longmemeval-official"}, "b.json")])
def test_refuses_files_of_another_dataset_or_profile(tmp_path, change, named):
    """A file of another profile is refused in one line (its metrics, checked when read, are not that profile's
    own here; `tests/coordinator/results/test_pairing.py` has the pairing rule on every field)."""
    a = results_file(tmp_path / "a.json", HITS_A)
    b = results_file(tmp_path / "b.json", HITS_B, mode="full", **change)
    result = compare(a, b)
    assert result.exit_code == 2
    assert named in result.output and "b.json" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_refuses_another_question_set(tmp_path):
    a = results_file(tmp_path / "a.json", HITS_A)
    b = results_file(tmp_path / "b.json", {**HITS_B, "c3:q0": 1}, mode="full")
    result = compare(a, b)
    assert result.exit_code == 2
    assert "question set differs" in result.output and "c3:q0" in result.output


def test_refuses_an_incomplete_file_unless_failures_count_as_misses(tmp_path):
    a = results_file(tmp_path / "a.json", HITS_A)
    b = results_file(tmp_path / "b.json", HITS_B, mode="full", failed=("c2",))
    refused = compare(a, b)
    assert refused.exit_code == 2
    assert "b.json: incomplete run (1 failed items, 2 questions: c2)" in refused.output
    out = tmp_path / "cmp.json"
    counted = compare(a, b, "--count-failed-as-miss", "--json", out, "--resamples", 200)
    assert counted.exit_code == 0, counted.output
    assert "memoria/full scores its 2 failed questions (items c2) as misses" in counted.output
    table = json.loads(out.read_text())
    strict = table["comparisons"][0]
    # c2's two questions, hits for the baseline, are misses for the failed run: two more losses
    assert strict["n"] == 4 and strict["losses"]["question_ids"] == ["c2:q0", "c2:q1"]
    assert strict["system_value"] == pytest.approx(0.5) and strict["baseline_value"] == pytest.approx(0.75)
    assert table["failed_scored_as_miss"] == {"memoria/full": {"questions": 2, "item_ids": ["c2"]}}


def test_an_item_failed_before_its_questions_were_read_is_refused_even_with_the_flag(tmp_path):
    hits = {q: h for q, h in HITS_A.items() if not q.startswith("c2")}
    a = results_file(tmp_path / "a.json", hits, unread=("c2",))
    b = results_file(tmp_path / "b.json", {q: h for q, h in HITS_B.items() if not q.startswith("c2")}, mode="full",
                     unread=("c2",))
    result = compare(a, b, "--count-failed-as-miss")
    assert result.exit_code == 2
    assert "a.json: item(s) c2 failed before their questions were read" in result.output


def test_an_old_file_without_complete_reads_as_complete_only_without_failures(tmp_path):
    a = results_file(tmp_path / "a.json", HITS_A)
    b = results_file(tmp_path / "b.json", HITS_B, mode="full")
    c = results_file(tmp_path / "c.json", HITS_B, mode="bm25", failed=("c2",))
    for path in (a, b, c):
        data = json.loads(open(path).read())
        del data["complete"], data["failures"]
        write_json(path, data)
    assert compare(a, b, "--resamples", 200).exit_code == 0
    refused = compare(a, c)
    assert refused.exit_code == 2 and "c.json: incomplete run" in refused.output


def _two_sided_binomial(wins: int, losses: int) -> float:
    """The exact McNemar p-value written out: twice the smaller tail of Binomial(wins + losses, 1/2)."""
    n, low = wins + losses, min(wins, losses)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(low + 1)) / 2 ** n) if n else 1.0


@pytest.mark.slow  # two real runs of one LoCoMo conversation with the real model
def test_two_real_runs_compared_through_the_command_line(tmp_path, locomo_path):
    runner, files = CliRunner(), {}
    for mode in ("fusion", "full"):
        files[mode] = tmp_path / f"{mode}.json"
        run = runner.invoke(main, ["run", "locomo", "--dataset", str(locomo_path), "--limit", "1",
                                   "--retrieval-mode", mode, "--output", str(files[mode])])
        assert run.exit_code == 0, run.output
    out = tmp_path / "cmp.json"
    result = compare(files["fusion"], files["full"], "--json", out)
    assert result.exit_code == 0, result.output
    assert "baseline memoria/fusion" in result.output and "10000 resamples, seed 0" in result.output
    table = json.loads(out.read_text())
    fusion, full = (json.loads(files[m].read_text()) for m in ("fusion", "full"))
    assert fusion["complete"] is True and full["complete"] is True
    strict = table["comparisons"][0]
    assert strict["metric"] == "session:recall_all@5" and strict["n"] == fusion["retrieval_evaluable"]
    assert strict["baseline_value"] == pytest.approx(fusion["metrics"]["all"]["session"]["recall_all@5"])
    assert strict["system_value"] == pytest.approx(full["metrics"]["all"]["session"]["recall_all@5"])
    per_question = {m: {r["question_id"]: r["metrics"]["session"]["recall_all@5"] for r in data["records"]
                        if r["metrics"]} for m, data in (("fusion", fusion), ("full", full))}
    assert strict["wins"]["question_ids"] == sorted(q for q in per_question["full"]
                                                    if per_question["full"][q] > per_question["fusion"][q])
    for c in table["comparisons"]:
        assert c["wins"]["count"] + c["losses"]["count"] + c["ties"]["count"] == c["n"]
        assert c["ci95"][0] <= c["delta"] <= c["ci95"][1] and c["p_value"] <= c["p_holm"] <= 1
        if c["test"] == "mcnemar-exact":
            assert c["p_value"] == pytest.approx(_two_sided_binomial(c["wins"]["count"], c["losses"]["count"]))


def test_the_html_report_pairs_the_files_strict_metric_first_and_plots_each_difference(tmp_path, chromium):
    hits_a = {f"c{i % 3}:q{i}": int(i % 5 < 3) for i in range(40)}
    hits_b = {q: 1 if n % 4 == 0 else hit for n, (q, hit) in enumerate(hits_a.items())}
    a = results_file(tmp_path / "fusion.json", hits_a)
    b = results_file(tmp_path / "full.json", hits_b, mode="full")
    page = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["analyze", a, b, "--html", str(page)])
    assert result.exit_code == 0, result.output
    dom = chromium(page, tmp_path / "report.png", height=2400)
    paired = dom[dom.index('id="paired"'):dom.index("<h2>Charts")]
    assert paired.index("session:recall_all@5") < paired.index("session:recall_any@5") < paired.index("turn:recall_any@10")
    table = compare_files([ResultsFile.read(a), ResultsFile.read(b)])
    first = table["comparisons"][0]
    assert f"[{first['ci95'][0]:+.3f}, {first['ci95'][1]:+.3f}]" in paired and f"{first['delta']:+.3f}" in paired
    assert 'alt="paired differences"' in paired and "data:image/png;base64," in paired
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_files_that_cannot_be_paired_say_why_in_the_html_report(tmp_path):
    a = results_file(tmp_path / "a.json", HITS_A)
    b = results_file(tmp_path / "b.json", HITS_B, checksum="other")
    page = tmp_path / "report.html"
    assert CliRunner().invoke(main, ["analyze", a, b, "--html", str(page)]).exit_code == 0
    assert "Not paired: " in page.read_text() and "dataset" in page.read_text()


def test_a_tiny_p_is_printed_as_below_a_thousandth_and_each_row_has_its_verdict(tmp_path):
    """Fifteen wins and no loss: McNemar's p is 2 / 2**15, which the table once printed as 6e-05 and the bench as 0."""
    base = {f"c1:q{i}": 0 for i in range(15)}
    a = results_file(tmp_path / "a.json", base)
    b = results_file(tmp_path / "b.json", {q: 1 for q in base}, mode="full")
    out = tmp_path / "cmp.csv"
    result = compare(a, b, "--metric", "session:recall_all@5", "--resamples", 200, "--csv", out)
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("session:recall_all@5"))
    assert row.split()[8:10] == ["<0.001", "<0.001"]  # p and p_holm
    assert ("memoria/full retrieves better than memoria/fusion on session:recall_all@5 on this set: significant "
            "after Holm over 1 comparison (p <0.001; Δ +1.000 [+1.000, +1.000], 15 wins / 0 losses)") in result.output
    assert "Holm over 1 comparison per metric" in result.output
    header, line = out.read_text().splitlines()[:2]
    assert "verdict" in header.split(",") and "holm_family" in header.split(",") and "retrieves better" in line
