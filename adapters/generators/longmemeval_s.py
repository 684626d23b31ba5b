"""Generate LongMemEval-S-shaped files: same schema, statistics and quirks.

The real `longmemeval_s_cleaned.json` cannot be fetched everywhere; code
tested on these files runs unchanged on it. Deterministic for a seed.
`scale` shrinks the number of sessions per haystack (1.0 = ~48).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import random
from pathlib import Path

from adapters.generators import text as T
from adapters.defaults import MAX_SYNTH_SESSION_OCCURRENCES
from adapters.errors import DatasetError
from adapters.files import replacing

#: Question-type mix of the real file (500 questions) and its abstentions (30).
TYPE_COUNTS = {
    "single-session-user": 70, "single-session-assistant": 56, "single-session-preference": 30,
    "multi-session": 133, "temporal-reasoning": 133, "knowledge-update": 78,
}
ABSTENTION_COUNTS = {"multi-session": 12, "temporal-reasoning": 6, "knowledge-update": 6, "single-session-user": 6}
SESSIONS_PER_QUESTION = 47.7
TURNS_PER_SESSION = 10.3
DISTINCT_SESSION_SHARE = 19195 / 23867
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"
#: Quirk rates per question in the real file (at least one of each in a file of 10+ questions).
QUIRK_RATES = {"duplicate_session": 13 / 500, "late_session": 76 / 500, "empty_turn": 12 / 500, "huge_turn": 4 / 500}
NON_ALTERNATING_SHARE = 1947 / 23867
DISTRACTOR_SHARE = 0.5
HEARSAY_SHARE = 0.15
HUGE_TURN_BYTES = 33_000


def generate(questions: int, seed: int = 0, scale: float = 1.0) -> list[dict]:
    """Build the whole file in memory (tests); `write` streams it instead."""
    return list(iter_questions(questions, seed, scale))


def write(path: str | Path, questions: int, seed: int = 0, scale: float = 1.0,
          distinct_share: float | None = None) -> int:
    """Write a JSON array one question at a time; returns the question count."""
    check_size(questions, max(3, round(SESSIONS_PER_QUESTION * scale)))
    return write_array(path, iter_questions(questions, seed, scale, distinct_share))


def write_array(path: str | Path, values) -> int:
    """Write the values as one JSON array, one at a time (a file of any size in little memory); their count.

    Through `replacing`: a link at `path` is refused, and a failure part-way leaves an earlier file whole."""
    count = 0
    with replacing(path, "generated file", DatasetError) as out:
        out.write("[")
        for value in values:
            out.write(",\n" if count else "\n")
            out.write(json.dumps(value, ensure_ascii=False))
            count += 1
        out.write("\n]\n")
    return count


def check_size(questions: int, sessions_per_question: int) -> None:
    """Refuse a file larger than `MAX_SYNTH_SESSION_OCCURRENCES` sessions in all, before anything is made or written."""
    occurrences = questions * sessions_per_question
    if occurrences > MAX_SYNTH_SESSION_OCCURRENCES:
        raise DatasetError(f"{questions} questions of {sessions_per_question} sessions make {occurrences:,} sessions; "
                           f"a generated file holds at most {MAX_SYNTH_SESSION_OCCURRENCES:,} "
                           "(fewer --questions or --sessions)")


def iter_questions(questions: int, seed: int = 0, scale: float = 1.0, distinct_share: float | None = None):
    """The questions of a generated file. With `distinct_share` (e.g. DISTINCT_SESSION_SHARE, the real file's
    0.804), the filler pool is sized so that about that share of session occurrences are distinct; without
    it the pool holds that share of the occurrences, and a file repeats itself more (about 0.6 distinct)."""
    if questions < 1:
        raise ValueError("questions must be at least 1")
    if not 0 < scale <= 1.0:
        raise ValueError("scale must be in (0, 1]")
    rng = random.Random(seed)
    plan = _plan_types(questions, rng)
    sessions_per_q = max(3, round(SESSIONS_PER_QUESTION * scale))
    check_size(questions, sessions_per_q)
    occurrences = questions * sessions_per_q
    size = occurrences * DISTINCT_SESSION_SHARE if distinct_share is None else occurrences / _draws_per_session(
        distinct_share)
    pool = _filler_pool(rng, max(4, round(size)))
    quirks = {name: set(rng.sample(range(questions), _quirk_count(rate, questions))) for name, rate in QUIRK_RATES.items()}
    used_ids: set[str] = set()
    for index, (qtype, abstention) in enumerate(plan):
        yield _question(rng, seed, index, qtype, abstention, sessions_per_q, pool, quirks, used_ids)


def _draws_per_session(distinct_share: float) -> float:
    """x with (1 - e^-x) / x = distinct_share: drawing x * P sessions (with repeats) from a pool of P leaves
    about that share of the draws distinct."""
    if not 0 < distinct_share < 1:
        raise ValueError("distinct_share must be in (0, 1)")
    # (1 - e^-x) / x < 1 / x: at x = 1 / distinct_share the share is already below the one asked for
    low, high = 1e-9, 1.0 / distinct_share
    for _ in range(100):
        middle = (low + high) / 2
        if (1 - math.exp(-middle)) / middle > distinct_share:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _quirk_count(rate: float, questions: int) -> int:
    return min(questions, max(1 if questions >= 10 else 0, round(rate * questions)))


def _plan_types(questions: int, rng: random.Random) -> list[tuple[str, bool]]:
    total = sum(TYPE_COUNTS.values())
    shares = {t: c * questions / total for t, c in TYPE_COUNTS.items()}
    counts = {t: int(s) for t, s in shares.items()}
    for t in sorted(shares, key=lambda t: counts[t] - shares[t])[: questions - sum(counts.values())]:
        counts[t] += 1
    abs_total = round(sum(ABSTENTION_COUNTS.values()) * questions / total)
    abs_types = sorted(ABSTENTION_COUNTS, key=lambda t: -ABSTENTION_COUNTS[t])
    n_abs = {t: 0 for t in TYPE_COUNTS}
    for i in range(abs_total):
        n_abs[abs_types[i % len(abs_types)] if i >= len(abs_types) or i == 0 else abs_types[i]] += 1
    plan = []
    for qtype, count in counts.items():
        plan += [(qtype, i < min(count, n_abs[qtype])) for i in range(count)]
    rng.shuffle(plan)
    return plan


def _hex(rng: random.Random, n: int = 8) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _filler_pool(rng: random.Random, size: int) -> list[str]:
    ids, alnum = [], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    while len(ids) < size:
        kind = rng.random()
        if kind < 0.45:
            ids.append(f"sharegpt_{''.join(rng.choice(alnum) for _ in range(7))}_{rng.randint(0, 9)}")
        elif kind < 0.8:
            ids.append(f"ultrachat_{rng.randint(100000, 999999)}")
        else:
            ids.append(f"{_hex(rng)}_{rng.randint(1, 4)}")
    return list(dict.fromkeys(ids))


# -- text -------------------------------------------------------------------
def _sentence(rng: random.Random, topic: str) -> str:
    words = T.FILLER_TOPICS[topic].split()
    form = rng.choice(T.SENTENCE_FORMS)
    return form.format(a=" and ".join(rng.sample(words, rng.randint(1, 2))), b=rng.choice(words))


def _user_text(rng: random.Random, topic: str) -> str:
    parts = [rng.choice(T.USER_OPENERS).format(topic=topic)]
    parts += [_sentence(rng, topic) for _ in range(rng.randint(1, 3))]
    return " ".join(parts)


def _assistant_text(rng: random.Random, topic: str) -> str:
    parts = [rng.choice(T.ASSISTANT_OPENERS).format(topic=topic)]
    for point in range(1, rng.randint(3, 7) + 1):
        parts.append(f"\n\n{point}. " + " ".join(_sentence(rng, topic) for _ in range(rng.randint(3, 5))))
    return "".join(parts)


def _conversation(rng: random.Random, turns: int, topic: str) -> list[dict]:
    return [
        {"role": role, "content": (_user_text if role == "user" else _assistant_text)(rng, topic)}
        for role in ("user", "assistant") * (turns // 2)
    ]


def _fact_text(fact: dict, form: str, value) -> str:
    return fact[form].format(value=value)


def _evidence_text(rng: random.Random, fact: dict, value) -> str:
    """The fact as the user states it: in other words than the question, or sharing a keyword with it."""
    return _fact_text(fact, "lexical" if rng.random() < 0.5 else "evidence", value)


def _filler_session(seed: int, session_id: str, quirk: str | None = None) -> list[dict]:
    """Content depends on the id alone: a shared session is identical everywhere."""
    rng = random.Random(int(hashlib.sha256(f"{seed}:{session_id}".encode()).hexdigest()[:16], 16))
    topic = rng.choice(sorted(T.FILLER_TOPICS))
    turns = _conversation(rng, max(2, 2 * round(rng.gauss(TURNS_PER_SESSION, 3) / 2)), topic)
    if rng.random() < DISTRACTOR_SHARE:
        fact = rng.choice(T.FACTS)
        slot = 2 * rng.randrange(len(turns) // 2)
        turns[slot]["content"] = _fact_text(fact, "distractor", rng.choice(fact["values"])) + " " + _sentence(rng, topic)
    if rng.random() < HEARSAY_SHARE:
        fact = rng.choice(T.FACTS)
        slot = 2 * rng.randrange(len(turns) // 2)
        form = rng.choice(["evidence", "lexical"])
        turns[slot]["content"] = f"{rng.choice(T.HEARSAY)} \"{_fact_text(fact, form, rng.choice(fact['values']))}\""
    if rng.random() < NON_ALTERNATING_SHARE:
        if rng.random() < 0.5:
            turns = turns[1:]  # starts with the assistant
        else:
            turns.insert(1, {"role": "user", "content": "Also, " + _sentence(rng, topic)})
    if quirk == "empty_turn":
        turns[min(3, len(turns) - 1)]["content"] = ""
    elif quirk == "huge_turn":
        block = "\n".join(_sentence(rng, topic) for _ in range(HUGE_TURN_BYTES // 60))
        turns[1 if len(turns) > 1 else 0]["content"] = "Here is the full log you asked for:\n" + block
    return turns


def _evidence_session(rng: random.Random, evidence_text: str, on_assistant: bool) -> list[dict]:
    topic = rng.choice(sorted(T.FILLER_TOPICS))
    turns = _conversation(rng, 2 * rng.randint(3, 6), topic)
    slot = 2 * rng.randrange(len(turns) // 2) + (1 if on_assistant else 0)
    turns[slot] = {"role": turns[slot]["role"], "content": evidence_text, "has_answer": True}
    if not on_assistant and rng.random() < 0.06 and slot + 1 < len(turns):
        turns[slot + 1]["has_answer"] = True  # the assistant repeats the fact now and then
    return turns


# -- one question ---------------------------------------------------------------
def _question(rng, seed, index, qtype, abstention, sessions_per_q, pool, quirks, used_ids) -> dict:
    qid = _hex(rng)
    while qid in used_ids:
        qid = _hex(rng)
    used_ids.add(qid)
    question, answer, evidence = _content(rng, qtype)
    if abstention:
        question = _abstention_question(rng, question)
        answer = "The information provided is not enough to answer this question."
    n_evidence = len(evidence)
    base = f"answer_{_hex(rng)}"
    evidence_ids = [base] if n_evidence == 1 else [f"{base}_{i + 1}" for i in range(n_evidence)]
    if abstention and rng.random() < 0.5:
        evidence_ids = [e + "_abs" for e in evidence_ids]

    n_fillers = max(1, sessions_per_q - n_evidence + rng.randint(-1, 1))
    fillers = rng.sample(pool, min(n_fillers, len(pool)))
    sessions = [(fid, _filler_session(seed, fid)) for fid in fillers]
    for name in ("empty_turn", "huge_turn"):
        if index in quirks[name]:  # a session of its own, so shared ids keep identical content
            fid = f"{_hex(rng)}_{rng.randint(1, 4)}"
            sessions[rng.randrange(len(sessions))] = (fid, _filler_session(seed, fid, name))
    if index in quirks["duplicate_session"]:
        sessions.append(sessions[rng.randrange(len(sessions))])

    question_date = dt.datetime(2023, 1, 1) + dt.timedelta(days=rng.randint(150, 330), minutes=rng.randint(0, 1439))
    dates = sorted(question_date - dt.timedelta(days=rng.uniform(1, 150)) for _ in sessions)
    if index in quirks["late_session"]:
        dates[-1] = question_date + dt.timedelta(days=rng.uniform(1, 20))
    evidence_dates = sorted(question_date - dt.timedelta(days=rng.uniform(1, 120)) for _ in evidence_ids)
    placed = list(zip(dates, [s[0] for s in sessions], [s[1] for s in sessions]))
    placed += [(d, sid, turns) for d, sid, turns in zip(evidence_dates, evidence_ids, evidence)]
    placed.sort(key=lambda p: p[0])
    record = {
        "question_id": qid + ("_abs" if abstention else ""),
        "question_type": qtype,
        "question": question,
        "answer": answer,
        "question_date": question_date.strftime(DATE_FORMAT),
        "haystack_dates": [d.strftime(DATE_FORMAT) for d, _, _ in placed],
        "haystack_session_ids": [sid for _, sid, _ in placed],
        "haystack_sessions": [turns for _, _, turns in placed],
        "answer_session_ids": evidence_ids,
        # the mark a generated file carries and the published one never does: its results say "generated"
        "memfarm_generated": f"memfarm synth longmemeval, seed {seed}",
    }
    return record


def _content(rng: random.Random, qtype: str):
    """(question, answer, evidence sessions) for one question type."""
    if qtype == "single-session-preference":
        question, statement, answer = rng.choice(T.PREFERENCES)
        return question, answer, [_evidence_session(rng, statement, on_assistant=False)]
    fact = rng.choice(T.FACTS)
    value = rng.choice(fact["values"])
    if qtype == "single-session-assistant":
        question = "Remind me what you told me earlier: " + fact["question"][0].lower() + fact["question"][1:]
        return question, value, [_evidence_session(rng, _fact_text(fact, "assistant", value), on_assistant=True)]
    if qtype == "knowledge-update":
        old = rng.choice([v for v in fact["values"] if v != value])
        sessions = [
            _evidence_session(rng, _evidence_text(rng, fact, old), on_assistant=False),
            _evidence_session(rng, "Update on what I told you before. " + _evidence_text(rng, fact, value),
                              on_assistant=False),
        ]
        return fact["question"], value, sessions
    if qtype == "temporal-reasoning":
        sessions = [_evidence_session(rng, _evidence_text(rng, fact, value), on_assistant=False)]
        return fact["question"].rstrip("?") + ", and roughly when did that happen?", value, sessions
    if qtype == "multi-session":
        k = rng.choices([2, 3, 4, 5, 6], weights=[60, 22, 10, 5, 3])[0]
        counting = [f for f in T.FACTS if isinstance(f["values"][0], int)]
        if rng.random() < 0.4:
            fact = rng.choice(counting)
            values = [rng.choice(fact["values"]) for _ in range(k)]
            sessions = [_evidence_session(rng, _evidence_text(rng, fact, v), on_assistant=False) for v in values]
            return "Adding up everything I told you across our chats: " + fact["question"], sum(values), sessions
        facts = rng.sample(T.FACTS, k)
        values = [rng.choice(f["values"]) for f in facts]
        sessions = [_evidence_session(rng, _evidence_text(rng, f, v), on_assistant=False) for f, v in zip(facts, values)]
        question = " Also, ".join(f["question"] for f in facts)
        return question, "; ".join(str(v) for v in values), sessions
    return fact["question"], value, [_evidence_session(rng, _evidence_text(rng, fact, value), on_assistant=False)]


def _abstention_question(rng: random.Random, question: str) -> str:
    swaps = [("dog", "cat"), ("sister", "brother"), ("car", "motorbike"), ("books", "magazines"), ("city", "village")]
    for old, new in swaps:
        if old in question:
            return question.replace(old, new)
    return "What did my grandmother say about this? " + question
