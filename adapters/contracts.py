"""The plain-dict shapes that cross every boundary, named once.

Everything here is JSON-able: the same dicts travel through Redis, caches
and result files.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Turn(TypedDict, total=False):
    """A turn as a dataset adapter yields it: native ids stay with the runner."""

    session_id: str
    turn_id: str
    text: str  # empty only where a corpus counts a turn that no system is given (the official profile)
    props: dict[str, Any]
    step: int  # a stepped item's (RealMem's): the ingest step that adds the turn, its session's position


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
    gold_by_profile: dict[str, Any]  # gold under a profile with rules of its own (LongMemEval's, RealMem's)
    step: int  # a stepped item's: asked when memory holds the turns of every earlier step, none of its own


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
    steps: int  # set where memory grows in steps and questions are asked between them (RealMem)


#: The only fields of a task (what a system is asked, `workers.item.evaluate.make_task`): no ground truth fits
#: in them.
TASK_FIELDS = ("task_id", "label", "question", "question_date", "top_k")
#: The only props a doc (what a system ingests: an id minted by the runner, the item's isolation label, the
#: rendered text, these props; `workers.item.evaluate.make_docs`) may carry: never native ids or gold flags.
DOC_PROPS = ("role", "speaker", "date", "turn_index", "session_index", "caption")
