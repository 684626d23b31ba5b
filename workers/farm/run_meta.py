"""A farm run's metadata: what a worker needs to rebuild the run's system and judge its items.

The coordinator writes it once when it creates the run (`coordinator.running.farm.run_meta`); the
ledger adds what staging and reducing learn (`update_meta`). The facts of the run itself (its
dataset, K values, scoring profile, top_k, embedding signature, arguments) are in its `context`
and only there. Redis is not trusted: the ledger checks the fields it reads (`check_meta`), and
`RunMeta.from_dict` checks the context too, naming the field it refuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workers.farm.ledger import DEFAULT_LOST_GRACE_SECONDS
from workers.ledger_values import META_FIELDS, META_REQUIRED, LedgerValueError, check_fields
from workers.item.run_context import RunContext


@dataclass(frozen=True)
class RunMeta:
    """A run's metadata; the fields after `context` are the ledger's, written as the run goes."""

    created: float
    max_attempts: int
    task_time_limit: float
    lost_grace_seconds: float = DEFAULT_LOST_GRACE_SECONDS
    #: The broker's URL, its password redacted.
    broker: str | None = None
    code_version: str | None = None
    #: The system's name as the worker builds it: built in, a user's `file.py:Class`, or a server's URL.
    system: str | None = None
    #: Its settings as given: a worker checks them (`workers.run_settings`), never trusts them.
    system_settings: dict = field(default_factory=dict)
    #: Whether a worker keeps an embedding store in its own cache dir, and shares vectors through Redis.
    embedding_store: bool = False
    shared_embeddings: bool = False
    #: The sha256 of the model files the run was staged with, when the system names them.
    model_files: str | None = None
    context: RunContext | None = None
    item_count: int | None = None
    staging_done: bool = True
    staged_at: float | None = None
    staging: dict | None = None
    reduced_at: float | None = None
    expires_in: int | None = None

    @classmethod
    def from_dict(cls, data, where: str = "run metadata") -> "RunMeta":
        """The metadata `to_dict` wrote, as `Ledger.meta` returns it; a `LedgerValueError` names a field
        that is not what the farm writes. Fields an older version wrote twice are read from the context."""
        if not isinstance(data, dict):
            raise LedgerValueError(f"{where} is not a JSON object but {type(data).__name__}")
        check_fields(data, META_FIELDS, META_REQUIRED, where)
        context = data.get("context")
        return cls(
            created=data["created"], max_attempts=data["max_attempts"],
            task_time_limit=data["task_time_limit"],
            lost_grace_seconds=data.get("lost_grace_seconds", DEFAULT_LOST_GRACE_SECONDS),
            broker=data.get("broker"), code_version=data.get("code_version"), system=data.get("system"),
            system_settings=data.get("system_settings"), embedding_store=bool(data.get("embedding_store")),
            shared_embeddings=bool(data.get("shared_embeddings")), model_files=data.get("model_files"),
            context=None if context is None else RunContext.from_dict(context, f"{where} field 'context'"),
            item_count=data.get("item_count"), staging_done=data.get("staging_done", True),
            staged_at=data.get("staged_at"), staging=data.get("staging"), reduced_at=data.get("reduced_at"),
            expires_in=data.get("expires_in"))

    def to_dict(self) -> dict:
        """Plain JSON for Redis; the ledger's later fields only once they are known."""
        data = {"created": self.created, "broker": self.broker, "code_version": self.code_version,
                "max_attempts": self.max_attempts, "embedding_store": self.embedding_store,
                "shared_embeddings": self.shared_embeddings, "task_time_limit": self.task_time_limit,
                "lost_grace_seconds": self.lost_grace_seconds, "system": self.system,
                "system_settings": self.system_settings, "model_files": self.model_files,
                "context": self.context.to_dict() if self.context else None}
        later = {"item_count": self.item_count, "staging_done": self.staging_done,
                 "staged_at": self.staged_at,
                 "staging": self.staging, "reduced_at": self.reduced_at, "expires_in": self.expires_in}
        return {**data, **{name: value for name, value in later.items() if value is not None}}

    def run_context(self) -> RunContext:
        """The run's context (every run the coordinator makes holds one); a named error when it lacks one."""
        if self.context is None:
            raise LedgerValueError("the run's metadata holds no context (what the run evaluates and how)")
        return self.context
