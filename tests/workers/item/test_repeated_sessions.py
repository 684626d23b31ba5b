"""LongMemEval-M repeats a session id inside one history (same content, another date), and the official
evaluation keeps the occurrences apart. Everything that keys by session keeps them apart too: the official
corpus, the docs a system is given, the engine's notion of a session, and staging's session chunks."""

import json

import pytest

from adapters.generators import longmemeval_m as M
from adapters.benchmarks.longmemeval.reader import LongMemEval
from adapters.benchmarks.longmemeval.official import PROFILE as OFFICIAL
from workers.item.evaluate import label_for, make_docs
from workers.farm.staging_codec import join_sessions, split_sessions


@pytest.fixture()
def repeated(tmp_path):
    """An M question with a repeated filler, and a copy of it where the repeat sits right after the first."""
    question = next(q for q in M.generate(10, seed=5, sessions=24)
                    if len(set(q["haystack_session_ids"])) < len(q["haystack_session_ids"]))
    ids = question["haystack_session_ids"]
    twice = next(sid for sid in ids if ids.count(sid) > 1)
    first = ids.index(twice)
    adjacent = json.loads(json.dumps(question))
    adjacent["question_id"] = "adjacent"
    for field in ("haystack_session_ids", "haystack_sessions"):
        adjacent[field].insert(first + 1, adjacent[field][first])
    adjacent["haystack_dates"].insert(first + 1, adjacent["haystack_dates"][first + 1])  # the next one's date
    path = tmp_path / "m.json"
    path.write_text(json.dumps([question, adjacent]))
    return path, twice


def test_the_official_item_holds_every_occurrence_as_its_own_session(repeated):
    path, twice = repeated
    for item in LongMemEval(path, profile=OFFICIAL).iter_items():
        raw_ids = [s["session_id"] for s in item["sessions"]]
        gold = item["questions"][0]["gold_by_profile"][OFFICIAL]
        assert gold["session"]["corpus_size"] == len(raw_ids) and raw_ids.count(twice) >= 2
        places = {t["props"]["session_index"] for t in item["turns"] if t["session_id"] == twice}
        assert len(places) == raw_ids.count(twice)
        docs, native = make_docs(item)
        assert len(docs) == sum(1 for t in item["turns"] if t["text"])
        engine_sessions = {(d["label"], d["props"]["session_index"], d["props"]["date"]) for d in docs
                           if native[d["external_id"]]["session_id"] == twice}
        assert len(engine_sessions) == raw_ids.count(twice)  # the engine's session key parts them
        assert all(d["label"] == label_for(item["item_id"]) for d in docs)


def test_staging_stores_the_session_once_and_gives_back_every_occurrence(repeated):
    path, twice = repeated
    for item in LongMemEval(path, profile=OFFICIAL).iter_items():
        staged, chunks = split_sessions(item)
        occurrences = len(item["sessions"])
        assert len(staged["turn_chunks"]) == occurrences  # adjacent repeats are two references, not one run
        distinct = {s["session_id"] for s in item["sessions"]}
        refs = [o["chunk"] for o in staged["turn_chunks"]]
        assert len(chunks) == len(set(refs)) == len(distinct)  # content-addressed: each session stored once
        assert join_sessions(staged, {d: json.loads(raw) for d, raw in chunks.items()}) == item
        places = [o["props"].get("session_index") for o in staged["turn_chunks"]]
        assert len(set(places)) == occurrences
