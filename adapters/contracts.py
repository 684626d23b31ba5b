"""The plain-dict shapes that cross every boundary, named once.

Everything here is JSON-able: the same dicts travel through Redis, caches
and result files.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Doc(TypedDict):
    """What a system ingests: opaque id, isolation label, rendered text, safe props."""

    external_id: str  # minted by the runner; never a native session or turn id
    label: str  # isolation scope (one item)
    text: str
    props: dict[str, Any]  # role, speaker, date, turn_index; never native ids or gold flags


class Task(TypedDict, total=False):
    """What a system is asked; built from a whitelist, so no ground truth fits in it."""

    task_id: str
    label: str
    question: str
    question_date: str
    top_k: int


class Hit(TypedDict, total=False):
    """One retrieved doc, best first."""

    external_id: str
    score: float
    diagnostics: dict[str, Any]


class Turn(TypedDict):
    """A turn as a dataset adapter yields it: native ids stay with the runner."""

    session_id: str
    turn_id: str
    text: str  # empty only where a corpus counts a turn that no system is given (the official profile)
    props: dict[str, Any]


class Question(TypedDict, total=False):
    """A question with its ground truth; only the runner ever reads the gold fields."""

    question_id: str
    question: str
    question_date: str
    question_type: str
    expected: str
    answer: str  # the gold answer text: answer support of a context block, never a retrieval score
    expected_ids: list[str]
    gold_sessions: list[str]
    gold_turns: list[str]
    abstention: bool
    abstention_reason: str
    excluded: str  # why a question cannot be scored at all (e.g. no resolvable evidence)
    details: dict[str, Any]


class Item(TypedDict, total=False):
    """One unit of work: a LongMemEval question or a LoCoMo conversation."""

    item_id: str
    benchmark: str
    turns: list[Turn]
    questions: list[Question]
    stats: dict[str, Any]
    error: str  # set instead of turns/questions when the item is malformed
    field: str
    sessions: list[dict[str, Any]]  # every session occurrence in haystack order (LongMemEval), for scoring


#: The only Task fields a system may see.
TASK_FIELDS = ("task_id", "label", "question", "question_date", "top_k")
#: The only Doc props a system may see.
DOC_PROPS = ("role", "speaker", "date", "turn_index", "session_index", "caption")
