"""Small helpers shared by tests: generated datasets and independent metric checks."""

import json
import math
import os
import re
import zlib
from pathlib import Path

import numpy as np

import pytest

from adapters.generators.longmemeval_s import generate


def skip_outside_ci(message: str):
    """Skip for a part of the environment this machine lacks; in CI (`CI=true`) every part is there by
    construction, so its absence is a fault and the test fails instead of passing unnoticed."""
    __tracebackhide__ = True  # the skip reason names the caller's line, not this one
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI=true: every test must run here)")
    pytest.skip(message)


def write_dataset(path: Path, questions=8, seed=3, scale=0.06, mutate=None) -> Path:
    data = generate(questions, seed=seed, scale=scale)
    if mutate:
        data = mutate(data)
    path.write_text(json.dumps(data))
    return path


def independent_session_metrics(record: dict, k: int) -> dict:
    """Recompute session metrics from a record's retrieved ids, without the product's code."""
    ranking = []
    for candidate in record["candidates"]:
        sid = candidate["metadata"]["session_id"]
        if sid not in ranking:
            ranking.append(sid)
    gold = set(record["expected_ids"])
    top = ranking[:k]
    dcg = sum(1 / math.log2(i + 2) for i, s in enumerate(top) if s in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return {
        f"recall_any@{k}": float(any(s in gold for s in top)),
        f"recall_all@{k}": float(all(s in top for s in gold)),
        f"ndcg_any@{k}": dcg / ideal,
    }


def independent_turn_metrics(raw_question: dict, expected: str, record: dict, k: int) -> dict:
    """Turn metrics of a record recomputed from the raw dataset question (not the record's own gold):
    gold = turns of answer sessions whose text contains `expected`, ids `<session>#<index>`."""
    answers = set(raw_question["answer_session_ids"])
    gold = set()
    for sid, session in zip(raw_question["haystack_session_ids"], raw_question["haystack_sessions"]):
        for index, turn in enumerate(session):
            if sid in answers and isinstance(turn.get("content"), str) and expected in turn["content"]:
                gold.add(f"{sid}#{index}")
    ranking = []
    for candidate in record["candidates"]:
        if candidate["metadata"]["turn_id"] not in ranking:
            ranking.append(candidate["metadata"]["turn_id"])
    top = ranking[:k]
    dcg = sum(1 / math.log2(i + 2) for i, t in enumerate(top) if t in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return {f"recall_any@{k}": float(any(t in gold for t in top)), f"recall_all@{k}": float(gold <= set(top)),
            f"ndcg_any@{k}": dcg / ideal if ideal else 0.0}


def render_in_chromium(page: Path, screenshot: Path, height: int = 1600) -> str:
    """The DOM of `page` as headless chromium builds it; a screenshot (1200 px wide, `height` tall) saved."""
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.fail("chromium is not installed (tools/system-packages installs it)")
    args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
    dom = subprocess.run(args + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    subprocess.run(args + [f"--screenshot={screenshot}", f"--window-size=1200,{height}", page.as_uri()],
                   capture_output=True, timeout=120)
    return dom


def realmem_persona(source: Path, sessions: int, path: Path) -> Path:
    """The first `sessions` sessions of a RealMem persona file, written to `path` (a shorter persona for a test;
    queries whose gold is later are then named unscorable by the adapter, as any other)."""
    data = json.loads(source.read_text())
    data["dialogues"] = data["dialogues"][:sessions]
    path.write_text(json.dumps(data))
    return path


class WordEmbedder:
    """Unit bag-of-words vectors (each word hashed to one of 256 dimensions): the engine, cache and files are
    real, the model is not needed where a test compares two paths of one state."""

    dimension = 256
    signature = {"model_id": "tests/bag-of-words", "dimension": 256}

    def encode(self, texts, batch_size=32, **_):
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                out[row, zlib.crc32(word.encode()) % self.dimension] += 1.0
            out[row] /= np.linalg.norm(out[row]) or 1.0
        return out
