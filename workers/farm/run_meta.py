"""A farm run's metadata: what a worker needs to rebuild the run's system and judge its items.

The coordinator writes it once when it creates the run (`coordinator.running.farm.run_meta`); the
ledger adds what staging and reducing learn (`update_meta`). The facts of the run itself (its
dataset, K values, scoring profile, top_k, embedding signature, arguments) are in its `context`
and only there. Redis is not trusted: the ledger checks the fields it reads (`check_meta`), and
`RunMeta.from_dict` checks the context too, naming the field it refuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from workers.farm.ledger import DEFAULT_LOST_GRACE_SECONDS
from workers.ledger_values import META_FIELDS, META_REQUIRED, LedgerValueError, check_fields
from workers.item.run_context import RunContext


def _later(**more):
    """Metadata of a field the ledger writes as the run goes: absent from the JSON until it is known."""
    return {"later": True, **more}


@dataclass(frozen=True, kw_only=True)
class RunMeta:
    """A run's metadata, its fields in the order the JSON holds them; those marked `later` are the ledger's,
    written as the run goes."""

    created: float
    #: The broker's URL, its password redacted.
    broker: str | None = None
    code_version: str | None = None
    max_attempts: int
    #: Whether a worker keeps an embedding store in its own cache dir, and shares vectors through Redis.
    embedding_store: bool = field(default=False, metadata={"read": bool})
    shared_embeddings: bool = field(default=False, metadata={"read": bool})
    task_time_limit: float
    lost_grace_seconds: float = DEFAULT_LOST_GRACE_SECONDS
    #: The system's name as the worker builds it: built in, a user's `file.py:Class`, or a server's URL.
    system: str | None = None
    #: Its settings as given: a worker checks them (`workers.run_settings`), never trusts them.
    system_settings: dict = field(default_factory=dict)
    #: The sha256 of the model files the run was staged with, when the system names them.
    model_files: str | None = None
    context: RunContext | None = field(default=None, metadata={"write": RunContext.to_dict})
    item_count: int | None = field(default=None, metadata=_later())
    staging_done: bool = field(default=True, metadata=_later())
    staged_at: float | None = field(default=None, metadata=_later())
    staging: dict | None = field(default=None, metadata=_later())
    reduced_at: float | None = field(default=None, metadata=_later())
    expires_in: int | None = field(default=None, metadata=_later())

    @classmethod
    def from_dict(cls, data, where: str = "run metadata") -> "RunMeta":
        """The metadata `to_dict` wrote, as `Ledger.meta` returns it; a `LedgerValueError` names a field
        that is not what the farm writes. Fields an older version wrote twice are read from the context."""
        if not isinstance(data, dict):
            raise LedgerValueError(f"{where} is not a JSON object but {type(data).__name__}")
        check_fields(data, META_FIELDS, META_REQUIRED, where)
        values = {spec.name: spec.metadata.get("read", _same)(data[spec.name])
                  for spec in fields(cls) if data.get(spec.name) is not None}
        if "context" in values:
            values["context"] = RunContext.from_dict(values["context"], f"{where} field 'context'")
        return cls(**values)

    def to_dict(self) -> dict:
        """Plain JSON for Redis; the ledger's later fields only once they are known."""
        data = {}
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.metadata.get("later") and value is None:
                continue
            data[spec.name] = None if value is None else spec.metadata.get("write", _same)(value)
        return data

    def run_context(self) -> RunContext:
        """The run's context (every run the coordinator makes holds one); a named error when it lacks one."""
        if self.context is None:
            raise LedgerValueError("the run's metadata holds no context (what the run evaluates and how)")
        return self.context


def _same(value):
    return value
