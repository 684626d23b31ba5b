"""The run context: what a run is, as every item's evaluation and the reducer read it.

A run builds it once (`RunSpec.context`); a local run hands it to the reducer, a farm run stages it in
the run's metadata, where workers read it back from Redis, which anyone holding a worker's password can
write. So the one reader, `RunContext.from_dict`, checks every field against the check declared beside
it, and names the field it refuses. On the wire it stays plain JSON (`to_dict`), in the order of the
fields below, which is the order it has always had.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from workers.ledger_values import LedgerValueError, check_fields


def _text(value) -> bool:
    return isinstance(value, str)


def _optional(kind):
    return lambda value: value is None or isinstance(value, kind)


def _whole_at_least_one(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _checked(check, wanted: str, *, required: bool = False, **more):
    """A field's metadata: the check untrusted input must pass, what it wants in words, and whether a context
    without it is refused (`required`: the reducer reads it)."""
    return {"check": check, "wanted": wanted, "required": required, **more}


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """One run's facts, each stored once: benchmark and dataset, the system as described, how it is scored.

    Each field declares the check untrusted input must pass; a `required` one is read by the reducer and a
    context lacking it is refused, the others are optional (a context written before them lacks them)."""

    benchmark: str = field(metadata=_checked(_text, "text", required=True))
    benchmark_title: str = field(metadata=_checked(_text, "text", required=True))
    #: The record field a summary groups by (a question type, a category), None for none.
    group_key: str | None = field(default=None, metadata=_checked(_optional(str), "text or null"))
    #: The dataset file's absolute path, or the built-in benchmark's source (null for a generated suite).
    dataset_path: str | None = field(metadata=_checked(_optional(str), "text or null", required=True))
    dataset_sha256: str | None = field(metadata=_checked(_optional(str), "text or null", required=True))
    #: The system as `adapters.systems.describe` says it (name, retrieval mode, sources, ranking, ...).
    system_config: dict = field(metadata=_checked(lambda v: isinstance(v, dict), "an object", required=True))
    embedding_signature: dict | None = field(default=None, metadata=_checked(_optional(dict), "an object or null"))
    #: The chosen profile; None for benchmarks judged by substrings (no profile, and no `top_k`).
    scoring_profile: str | None = field(metadata=_checked(_optional(str), "text or null", required=True))
    #: Null for episode benchmarks, where each query carries its own top_k.
    top_k: int | None = field(metadata=_checked(
        lambda v: v is None or _whole_at_least_one(v), "a whole number of at least 1, or null", required=True))
    #: A tuple here, a list on the wire.
    k_values: tuple[int, ...] = field(metadata=_checked(
        lambda v: isinstance(v, (list, tuple)) and all(_whole_at_least_one(k) for k in v),
        "a list of whole numbers of at least 1", required=True, read=tuple, write=list))
    rendering: str | None = field(default=None, metadata=_checked(_optional(str), "text or null"))
    #: The cache dir the run used (a local run whose system can snapshot), else None.
    cache_dir: str | None = field(default=None, metadata=_checked(_optional(str), "text or null"))
    rebuild_cache: bool = field(default=False, metadata=_checked(lambda v: isinstance(v, bool), "true or false"))
    #: The run's spec as plain data (`RunSpec.arguments`): what `resume` and a results file read back.
    arguments: dict = field(default_factory=dict, metadata=_checked(lambda v: isinstance(v, dict), "an object",
                                                                    required=True))
    command: str = field(default="", metadata=_checked(_text, "text", required=True))
    #: Where tuned weights came from, when the run used any (`coordinator.results.optimize.tuning_record`).
    tuning: dict | None = field(default=None, metadata=_checked(_optional(dict), "an object or null"))
    #: Each JSON file's checksum where the dataset is a folder of them (RealMem's personas), else None.
    dataset_file_checksums: list | None = field(default=None, metadata=_checked(
        lambda v: v is None or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
        "a list of text or null"))

    @classmethod
    def check(cls, data, where: str = "run context", *, whole: bool = True) -> dict:
        """`data` if every field it holds passes its check (and, `whole`, it holds every required one); a
        `LedgerValueError` naming `where` and the field otherwise."""
        if not isinstance(data, dict):
            raise LedgerValueError(f"{where} is not a JSON object but {type(data).__name__}")
        checks = {spec.name: (spec.metadata["check"], spec.metadata["wanted"]) for spec in fields(cls)}
        return check_fields(data, checks, REQUIRED_FIELDS if whole else (), where)

    @classmethod
    def from_dict(cls, data, where: str = "run context") -> "RunContext":
        """The context `to_dict` wrote; a `LedgerValueError` naming `where` and the field when it is not one."""
        cls.check(data, where)
        return cls(**{spec.name: spec.metadata.get("read", _same)(data[spec.name])
                      for spec in fields(cls) if spec.name in data})

    def to_dict(self) -> dict:
        """Plain JSON, in the order a run's metadata has always held it."""
        return {spec.name: spec.metadata.get("write", _same)(getattr(self, spec.name)) for spec in fields(self)}


def _same(value):
    return value


#: The fields a context must hold: every one the reducer reads.
REQUIRED_FIELDS = tuple(spec.name for spec in fields(RunContext) if spec.metadata["required"])
