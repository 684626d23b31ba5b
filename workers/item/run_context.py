"""The run context: what a run is, as every item's evaluation and the reducer read it.

A run builds it once (`RunSpec.context`); a local run hands it to the reducer, a farm run stages it in
the run's metadata, where workers read it back from Redis, which anyone holding a worker's password can
write. So the one reader, `RunContext.from_dict`, checks every field the reducer reads
(`workers.ledger_values.CONTEXT_FIELDS`) and the few it holds besides, and names the field it refuses.
On the wire it stays plain JSON (`to_dict`), in the order it has always had.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workers.ledger_values import CONTEXT_FIELDS, LedgerValueError, check_fields


def _optional(kind, wanted: str):
    return (lambda v: v is None or isinstance(v, kind), wanted)


#: The fields `CONTEXT_FIELDS` leaves unchecked, each optional (a context written before them lacks them).
_MORE_FIELDS = {
    "group_key": _optional(str, "text or null"),
    "embedding_signature": _optional(dict, "an object or null"),
    "rendering": _optional(str, "text or null"),
    "cache_dir": _optional(str, "text or null"),
    "rebuild_cache": (lambda v: isinstance(v, bool), "true or false"),
    "tuning": _optional(dict, "an object or null"),
    "dataset_file_checksums": (lambda v: v is None or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
                               "a list of text or null"),
}


@dataclass(frozen=True)
class RunContext:
    """One run's facts, each stored once: benchmark and dataset, the system as described, how it is scored."""

    benchmark: str
    benchmark_title: str
    #: The record field a summary groups by (a question type, a category), None for none.
    group_key: str | None
    #: The dataset file's absolute path, or the built-in benchmark's source.
    dataset_path: str | None
    dataset_sha256: str | None
    #: The system as `adapters.systems.describe` says it (name, retrieval mode, sources, ranking, ...).
    system_config: dict
    embedding_signature: dict | None
    #: The chosen profile; None for benchmarks judged by substrings (no profile, and no `top_k`).
    scoring_profile: str | None
    top_k: int | None
    k_values: tuple[int, ...]
    rendering: str | None = None
    #: The cache dir the run used (a local run whose system can snapshot), else None.
    cache_dir: str | None = None
    rebuild_cache: bool = False
    #: The run's spec as plain data (`RunSpec.arguments`): what `resume` and a results file read back.
    arguments: dict = field(default_factory=dict)
    command: str = ""
    #: Where tuned weights came from, when the run used any (`coordinator.results.optimize.tuning_record`).
    tuning: dict | None = None
    #: Each JSON file's checksum where the dataset is a folder of them (RealMem's personas), else None.
    dataset_file_checksums: list | None = None

    @classmethod
    def from_dict(cls, data, where: str = "run context") -> "RunContext":
        """The context `to_dict` wrote (or `RunSpec.context` built, its K values a tuple); a
        `LedgerValueError` naming `where` and the field when it is not one."""
        if not isinstance(data, dict):
            raise LedgerValueError(f"{where} is not a JSON object but {type(data).__name__}")
        if isinstance(data.get("k_values"), tuple):
            data = {**data, "k_values": list(data["k_values"])}
        check_fields(data, {**CONTEXT_FIELDS, **_MORE_FIELDS}, CONTEXT_FIELDS, where)
        return cls(benchmark=data["benchmark"], benchmark_title=data["benchmark_title"],
                   group_key=data.get("group_key"), dataset_path=data["dataset_path"],
                   dataset_sha256=data["dataset_sha256"], system_config=data["system_config"],
                   embedding_signature=data.get("embedding_signature"),
                   scoring_profile=data["scoring_profile"],
                   top_k=data["top_k"], k_values=tuple(data["k_values"]), rendering=data.get("rendering"),
                   cache_dir=data.get("cache_dir"), rebuild_cache=data.get("rebuild_cache", False),
                   arguments=data["arguments"], command=data["command"], tuning=data.get("tuning"),
                   dataset_file_checksums=data.get("dataset_file_checksums"))

    def to_dict(self) -> dict:
        """Plain JSON, in the order a run's metadata has always held it."""
        return {"benchmark": self.benchmark, "benchmark_title": self.benchmark_title,
                "group_key": self.group_key,
                "dataset_path": self.dataset_path, "dataset_sha256": self.dataset_sha256,
                "system_config": self.system_config, "embedding_signature": self.embedding_signature,
                "scoring_profile": self.scoring_profile, "top_k": self.top_k, "k_values": list(self.k_values),
                "rendering": self.rendering, "cache_dir": self.cache_dir, "rebuild_cache": self.rebuild_cache,
                "arguments": self.arguments, "command": self.command, "tuning": self.tuning,
                "dataset_file_checksums": self.dataset_file_checksums}
