"""The analyzer and `memfarm score` on small hand-made result files with known answers."""

import json

import pytest

from click.testing import CliRunner

from coordinator.results import analyze as analysis
from coordinator.cli import main
from coordinator.results.run_files import RESULTS_FORMAT, ResultsFile
from adapters.errors import ResultsError


def _candidate(rank, session, turn, score, signals=None):
    diagnostics = {"sources": {"faiss": {"rank": rank, "score": score}}}
    if signals:
        diagnostics["ranking"] = {"signals": signals, "contributions": signals}
    return {"rank": rank, "id": f"x-{rank}", "text": f"text of {turn}", "score": score, "final_score": score,
            "metadata": {"session_id": session, "turn_id": turn}, "diagnostics": diagnostics}


def _record(qid, qtype, expected_rank, candidates, session_metrics, turn_metrics=None, abstention=False):
    return {"question_id": qid, "question_type": qtype, "item_id": qid, "status": "ok", "query": f"question {qid}",
            "expected": "gold text", "expected_ids": ["S1"], "gold": {"sessions": ["S1"], "turns": ["S1#0"]},
            "expected_rank": expected_rank, "retrieved": expected_rank is not None, "candidates": candidates,
            "runtime_ms": 10.0, "abstention": abstention,
            "metrics": None if abstention else _metrics(candidates),
            "diagnostics": {"system": {"policy": "all", "finish_reason": "all_completed", "embed_ms": 2.0,
                                       "wait_ms": 5.0, "sources_submitted": ["faiss", "bm25"],
                                       "sources_completed": ["faiss"], "sources_pending": [],
                                       "sources_failed": {"bm25": "boom"},
                                       "ranking": {"mmr": {"applied": True, "moved": 2, "max_shift": 3}}}}}


def _metrics(candidates):
    """What the record's own ranking gives against its gold (S1, S1#0): a file's metrics are checked when read."""
    from adapters.defaults import K_VALUES
    from adapters.metrics import question_metrics

    turns = [c["metadata"]["turn_id"] for c in candidates]
    return question_metrics(turns, {c["metadata"]["turn_id"]: c["metadata"]["session_id"] for c in candidates},
                            ["S1"], ["S1#0"], K_VALUES)


def _results(path, records, mode="fusion", benchmark="LongMemEval-S", profile="expected-text"):
    from adapters.metrics import average

    scored = [r for r in records if r["metrics"]]
    groups = {}
    for r in scored:
        groups.setdefault(r["question_type"], []).append(r)
    data = {"format": RESULTS_FORMAT, "benchmark": benchmark, "system": "memoria", "retrieval_mode": mode,
            "scoring_profile": profile, "question_count": len(records), "retrieval_evaluable": len(scored),
            "abstentions_excluded": len(records) - len(scored), "failed": 0, "excluded": 0, "records": records,
            "metrics": {"all": average(scored), "by_question_type": {k: average(v) for k, v in groups.items()}}}
    path.write_text(json.dumps(data))
    return path


S_HIT = {"recall_any@1": 1.0, "recall_any@3": 1.0, "recall_any@5": 1.0, "recall_any@10": 1.0, "ndcg_any@10": 1.0}
S_MISS = {"recall_any@1": 0.0, "recall_any@3": 1.0, "recall_any@5": 1.0, "recall_any@10": 1.0, "ndcg_any@10": 0.5}


@pytest.fixture()
def files(tmp_path):
    signals_w = {"semantic": 0.9, "token": 0.2}
    signals_e = {"semantic": 0.5, "token": 0.6}
    first = _results(tmp_path / "a.json", [
        _record("q1", "single", 1, [_candidate(1, "S1", "S1#0", 0.9), _candidate(2, "S2", "S2#0", 0.5)], S_HIT),
        _record("q2", "single", 3, [_candidate(1, "S2", "S2#1", 0.8, signals_w), _candidate(2, "S3", "S3#0", 0.7),
                                    _candidate(3, "S1", "S1#0", 0.6, signals_e)], S_MISS),
        _record("q3", "multi", None, [_candidate(1, "S4", "S4#0", 0.4)], {**S_MISS, "recall_any@3": 0.0,
                                                                         "recall_any@5": 0.0, "recall_any@10": 0.0,
                                                                         "ndcg_any@10": 0.0}),
        _record("q4", "multi", None, [], None, abstention=True),
    ])
    second = _results(tmp_path / "b.json", [
        _record("q1", "single", 1, [_candidate(1, "S1", "S1#0", 0.9)], S_HIT),
        _record("q2", "single", 1, [_candidate(1, "S1", "S1#0", 0.9)], S_HIT),
    ], mode="dense")
    return first, second


def test_every_section_on_a_known_file(files):
    report = analysis.analyze(ResultsFile.read(files[0]))
    assert report["evaluable"] == 3 and report["abstentions"] == 1
    assert report["rates"]["retrieved"] == {"rate": 2 / 3, "count": 2, "of": 3}
    assert report["rates"]["top1"]["count"] == 1 and report["rates"]["top3"]["count"] == 2
    assert report["rank_buckets"]["1"]["count"] == 1 and report["rank_buckets"]["2-3"]["count"] == 1
    assert report["rank_buckets"]["not retrieved"]["count"] == 1
    assert report["final_score"]["top1"]["max"] == 0.9 and report["final_score"]["top1"]["n"] == 3
    assert report["average_candidates"] == pytest.approx((2 + 3 + 1 + 0) / 4)
    assert report["timing_ms"]["accounted"] == pytest.approx(4 * 7.0)
    assert report["timing_ms"]["unaccounted"] == pytest.approx(4 * 3.0)
    assert report["finish_reasons"] == {"all_completed": 4} and report["policies"] == {"all": 4}
    assert report["sources"] == {"submitted": 8, "completed": 4, "pending": 0, "failed": 4}
    assert report["mmr"]["applied"] == 4 and report["mmr"]["max_shift"] == 3
    assert report["recall_at_k"][3]["count"] == 2 and report["recall_at_k"][1]["count"] == 1
    assert report["official"]["session"]["recall_any@1"] == pytest.approx(1 / 3)
    assert set(report["groups"]["values"]) == {"single", "multi"}
    text = analysis.render_analysis(report)
    assert "(2/3)" in text and "by question_type" in text


def test_compare_lines_up_files_and_refuses_mismatches(files, tmp_path):
    with pytest.raises(ResultsError, match="question set"):  # b.json holds two of a.json's four questions
        analysis.compare([ResultsFile.read(f) for f in files])
    rows = analysis.compare([ResultsFile.read(f) for f in files], force=True)
    assert [r["mode"] for r in rows] == ["fusion", "dense"]
    assert rows[1]["R@1"] == 1.0 and rows[0]["R@1"] == pytest.approx(1 / 3) and rows[0]["evaluable"] == 3
    other = _results(tmp_path / "c.json", [_record("q1", "x", 1, [_candidate(1, "S1", "S1#0", 1.0)], S_HIT)],
                     benchmark="LoCoMo")
    with pytest.raises(ResultsError, match="differ"):
        analysis.compare([ResultsFile.read(files[0]), ResultsFile.read(other)])
    assert len(analysis.compare([ResultsFile.read(files[0]), ResultsFile.read(other)], force=True)) == 2
    result = CliRunner().invoke(main, ["analyze", "--compare", str(files[0]), str(other)])
    assert result.exit_code == 2 and "--force" in result.output


def test_explain_splits_never_retrieved_and_outranked(files):
    report = analysis.explain(ResultsFile.read(files[0]), worst=5)
    assert report["never_retrieved"] == 1 and report["outranked"] == 1
    assert [e["kind"] for e in report["worst"]] == ["never retrieved", "outranked"]
    near = report["worst"][1]
    assert near["signals"]["semantic"] == {"winner": 0.9, "expected": 0.5}
    assert report["average_signal_advantage"]["semantic"] == pytest.approx(0.4)
    assert report["average_signal_advantage"]["token"] == pytest.approx(-0.4)


def test_explain_is_printed_under_the_analysis_and_says_where_the_gold_ranked(files):
    said = CliRunner().invoke(main, ["analyze", str(files[0]), "--explain", "2"])
    assert said.exit_code == 0, said.output
    analysis_at, worst_at = said.output.index(f"== {files[0]}"), said.output.index("the 2 worst questions")
    assert analysis_at < worst_at, "the worst questions are added under the analysis, not in its place"
    assert "None" not in said.output and "(no gold in its ranking)" in said.output
    assert "(its first gold at rank " in said.output
    data = json.loads(CliRunner().invoke(main, ["analyze", str(files[0]), "--explain", "2", "--json"]).output)
    assert data["explain"]["never_retrieved"] == 1 and "questions" in data


def test_all_summarises_a_directory_and_skips_foreign_files(files, tmp_path):
    (tmp_path / "notes.json").write_text(json.dumps({"hello": 1}))
    (tmp_path / "a.manifest.json").write_text("{}")
    result = CliRunner().invoke(main, ["analyze", "--all", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert set(summary["files"]) == {"a.json", "b.json"} and "notes.json" in summary["skipped"]
    assert summary["files"]["b.json"]["session"]["recall_any@5"] == 1.0


@pytest.mark.parametrize("content, words", [("[1, 2]", "top level is a JSON array"),
                                            ('{"benchmark": "x"}', "missing"), ("not json", "cannot read")])
def test_foreign_or_old_files_get_a_clear_message(tmp_path, content, words):
    path = tmp_path / "old.json"
    path.write_text(content)
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 2 and words in result.output and "old.json" in result.output


def test_an_older_format_is_named(files, tmp_path):
    data = json.loads(files[0].read_text())
    data["format"] = "memoria-farm/results/0"
    (tmp_path / "older.json").write_text(json.dumps(data))
    with pytest.raises(ResultsError, match="results/0"):
        ResultsFile.read(tmp_path / "older.json")


def test_every_per_file_chart_names_its_file(files, monkeypatch):
    from coordinator.results import plots

    titles = []
    monkeypatch.setattr(plots, "_png", lambda fig: titles.append(fig.axes[0].get_title()) or b"")
    loaded = [ResultsFile.read(f) for f in files]
    plots.charts(loaded)
    per_file = [t for t in titles if "recall_any@K" not in t]
    assert per_file == ["a.json: by question type", f"a.json: rank histogram {per_file[1].split('histogram ')[1]}",
                        "b.json: by question type", f"b.json: rank histogram {per_file[3].split('histogram ')[1]}"]


def test_plots_and_html_report_in_headless_chromium(files, tmp_path, chromium):
    report = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["analyze", str(files[0]), str(files[1]), "--plot", str(tmp_path / "plots"),
                                       "--html", str(report)])
    assert result.exit_code == 0, result.output
    pngs = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert {"recall_session.png", "recall_turn.png", "groups_0.png", "ranks_0.png"} <= set(pngs)
    assert all((tmp_path / "plots" / p).read_bytes().startswith(b"\x89PNG") for p in pngs)
    shot = tmp_path / "report.png"
    dom = chromium(report, shot)
    assert "<table>" in dom and dom.count("<img") >= 4 and "data:image/png;base64," in dom
    assert "id=\"comparison\"" in dom and "a.json" in dom and "b.json" in dom
    assert "Farm run" not in dom, "no farm section for local runs"
    # each file's charts sit under its own heading, their alt text naming it
    first, second = dom[dom.index("<h2>a.json</h2>"):dom.index("<h2>b.json</h2>")], dom[dom.index("<h2>b.json</h2>"):]
    assert 'alt="groups_0.png of a.json"' in first and 'alt="ranks_0.png of a.json"' in first
    assert 'alt="ranks_1.png of b.json"' in second and "a.json" not in second
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000
