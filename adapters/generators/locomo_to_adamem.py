"""LoCoMo conversations converted into AdaMem episodes (`memfarm convert locomo-to-adamem`)."""

from __future__ import annotations

from pathlib import Path

from adapters.benchmarks.locomo.reader import CATEGORIES, id_number, normalise_evidence, render
from adapters.errors import DatasetError
from adapters.files import read_json


def convert_locomo(source: str | Path, expected: str = "evidence", top_k: int = 10) -> list[dict]:
    """LoCoMo conversations as AdaMem episodes: a turn per observation, a QA per query (category 5 left out)."""
    if expected not in ("evidence", "answer", "both"):
        raise ValueError("expected must be evidence, answer or both")
    data = read_json(source, "LoCoMo file (an array of conversations)", DatasetError, top=list)
    episodes = []
    for conversation in data:
        talk = conversation["conversation"]
        numbers = []
        for key in talk:
            if key.startswith("session_") and key.count("_") == 1 and key[8:].isdigit():
                if id_number(key[8:]) is None or key != f"session_{id_number(key[8:])}":
                    raise DatasetError(f"{source}: conversation {conversation.get('sample_id')}: field {key[:40]}: "
                                       "not a session number this converter reads (session_<n>, n under 10 digits)")
                numbers.append(id_number(key[8:]))
        numbers.sort()
        observations, known = [], set()
        for n in numbers:
            date = talk.get(f"session_{n}_date_time", "")
            for turn in talk[f"session_{n}"]:
                ids, _ = normalise_evidence([turn["dia_id"]])
                if not ids:
                    continue
                known.add(ids[0])
                observations.append({"label": ids[0], "content": f"[{ids[0]}] ({date}) {render(turn)}",
                                     "importance": 0.5, "metadata": {"dia_id": ids[0], "session_date": date}})
        queries = []
        for index, qa in enumerate(conversation["qa"]):
            if qa.get("category") == 5:
                continue
            evidence = [i for i in normalise_evidence(qa.get("evidence"))[0] if i in known]
            answer = str(qa.get("answer", ""))
            if expected != "answer" and not evidence:
                continue  # nothing to retrieve: no annotated evidence matches a turn
            wanted = {"evidence": [f"[{i}]" for i in evidence], "answer": [answer] if answer else [],
                      "both": [f"[{i}]" for i in evidence] + ([answer] if answer else [])}[expected]
            if not wanted:
                continue
            queries.append({"id": f"q{index}", "query": qa["question"], "expected_substrings": wanted,
                            "forbidden_substrings": [], "top_k": top_k,
                            "category": CATEGORIES.get(qa.get("category"), str(qa.get("category")))})
        episodes.append({"id": conversation["sample_id"], "observations": observations, "queries": queries})
    return episodes
