"""Generate LongMemEval-M-shaped files: S's schema and sessions, M's size and repeats.

The published `longmemeval_m_cleaned.json` (2.7 GB) cannot be fetched everywhere. Its measured facts, from
a 28-question sample: about 476 session occurrences a question and about 10.3 turns a session (as in S);
in 449 of the 500 histories a `haystack_session_id` appears more than once, with the same content on
different dates; evidence sessions lie anywhere in the history. This generator reproduces those facts:

- filler sessions come from one pool shared by every question, so sessions repeat across questions;
  `distinct_share` (the share of session occurrences that are distinct, S's 0.804 by default) sizes it;
- a filler's content depends on its id alone, so every occurrence of an id is the same session;
- in about 449/500 of the histories one to three fillers occur again on another date;
- evidence dates are drawn over the whole span of the history, like the fillers'.

Questions are made one at a time and `write` streams them to disk, so a full 500-question file (about
240,000 sessions) is made in the memory of one question. Deterministic for a seed.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

from adapters.generators import longmemeval_s as S

SESSIONS_PER_QUESTION = 476
#: Histories (of 500) in which a session id occurs more than once, with the same content on different dates.
REPEATED_ID_HISTORIES = 449 / 500
#: How many fillers of a history with repeats occur again (the sample gives no count; a few).
REPEATS_PER_HISTORY = (1, 3)
#: Days before the question date that a history spans.
HISTORY_DAYS = 150
QUIRK_RATES = {"late_session": S.QUIRK_RATES["late_session"], "empty_turn": S.QUIRK_RATES["empty_turn"],
               "huge_turn": S.QUIRK_RATES["huge_turn"]}


def write(path: str | Path, questions: int, seed: int = 0, sessions: int = SESSIONS_PER_QUESTION,
          distinct_share: float = S.DISTINCT_SESSION_SHARE) -> int:
    """Write a JSON array one question at a time; returns the question count."""
    S.check_size(questions, sessions)
    return S.write_array(path, iter_questions(questions, seed, sessions, distinct_share))


def generate(questions: int, seed: int = 0, sessions: int = SESSIONS_PER_QUESTION,
             distinct_share: float = S.DISTINCT_SESSION_SHARE) -> list[dict]:
    """The whole file in memory (tests with few questions and sessions); `write` streams it instead."""
    return list(iter_questions(questions, seed, sessions, distinct_share))


def pool_size(questions: int, sessions: int, distinct_share: float) -> int:
    """Fillers in the shared pool: drawing `questions * sessions` from it leaves about `distinct_share` distinct."""
    return max(sessions + 4, round(questions * sessions / S._draws_per_session(distinct_share)))


def iter_questions(questions: int, seed: int = 0, sessions: int = SESSIONS_PER_QUESTION,
                   distinct_share: float = S.DISTINCT_SESSION_SHARE):
    """The questions of an M-shaped file, one at a time."""
    if questions < 1:
        raise ValueError("questions must be at least 1")
    if sessions < 8:
        raise ValueError("sessions must be at least 8 a question")
    S.check_size(questions, sessions)
    rng = random.Random(seed)
    plan = S._plan_types(questions, rng)
    pool = S._filler_pool(rng, pool_size(questions, sessions, distinct_share))
    quirks = {name: set(rng.sample(range(questions), S._quirk_count(rate, questions)))
              for name, rate in QUIRK_RATES.items()}
    repeated = set(rng.sample(range(questions), round(REPEATED_ID_HISTORIES * questions)))
    used_ids: set[str] = set()
    for index, (qtype, abstention) in enumerate(plan):
        yield _question(rng, seed, index, qtype, abstention, sessions, pool, quirks, index in repeated, used_ids)


def _question(rng, seed, index, qtype, abstention, sessions_per_q, pool, quirks, repeats, used_ids) -> dict:
    qid = S._hex(rng)
    while qid in used_ids:
        qid = S._hex(rng)
    used_ids.add(qid)
    question, answer, evidence = S._content(rng, qtype)
    if abstention:
        question = S._abstention_question(rng, question)
        answer = "The information provided is not enough to answer this question."
    base = f"answer_{S._hex(rng)}"
    evidence_ids = [base] if len(evidence) == 1 else [f"{base}_{i + 1}" for i in range(len(evidence))]
    if abstention and rng.random() < 0.5:
        evidence_ids = [e + "_abs" for e in evidence_ids]

    n_fillers = max(1, sessions_per_q - len(evidence) + rng.randint(-4, 4))
    fillers = [(fid, S._filler_session(seed, fid)) for fid in rng.sample(pool, min(n_fillers, len(pool)))]
    for name in ("empty_turn", "huge_turn"):
        if index in quirks[name]:  # a session of its own, so shared ids keep identical content
            fid = f"{S._hex(rng)}_{rng.randint(1, 4)}"
            fillers[rng.randrange(len(fillers))] = (fid, S._filler_session(seed, fid, name))
    if repeats:  # the same id and content again, on its own date
        fillers += rng.sample(fillers, rng.randint(*REPEATS_PER_HISTORY))

    question_date = dt.datetime(2023, 1, 1) + dt.timedelta(days=rng.randint(HISTORY_DAYS, 330),
                                                           minutes=rng.randint(0, 1439))
    placed = [(_date_before(rng, question_date), sid, turns) for sid, turns in fillers]
    if index in quirks["late_session"]:
        placed[-1] = (question_date + dt.timedelta(days=rng.uniform(1, 20)), *placed[-1][1:])
    placed += [(_date_before(rng, question_date), sid, turns) for sid, turns in zip(evidence_ids, evidence)]
    placed.sort(key=lambda p: p[0])
    return {
        "question_id": qid + ("_abs" if abstention else ""),
        "question_type": qtype,
        "question": question,
        "answer": answer,
        "question_date": question_date.strftime(S.DATE_FORMAT),
        "haystack_dates": [d.strftime(S.DATE_FORMAT) for d, _, _ in placed],
        "haystack_session_ids": [sid for _, sid, _ in placed],
        "haystack_sessions": [turns for _, _, turns in placed],
        "answer_session_ids": evidence_ids,
    }


def _date_before(rng: random.Random, question_date: dt.datetime) -> dt.datetime:
    """A moment in the history's span, to the minute (two occurrences of one session fall on different dates)."""
    return question_date - dt.timedelta(minutes=rng.randint(60, HISTORY_DAYS * 24 * 60))
