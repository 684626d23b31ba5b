"""The results file and its manifest as typed objects: one shape each, one reader and one writer.

The files stay plain JSON with the fields they have always had (`to_dict` writes them in that order,
the optional blocks only when a run has them); a value the files hold twice is held here once and
written twice: a results file's `corpus` is its `scoring_profile`, a manifest's `vector_store`,
`retrieval` and `ranking` come from its `system`, and its candidate limit is its `fairness.top_k`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from adapters.errors import ResultsError
from adapters.files import read_json

RESULTS_FORMAT = "memoria-farm/results/1"
MANIFEST_FORMAT = RESULTS_FORMAT + "/manifest"
#: Results fields absent from the file when empty (a local run has no `farm`, a one-file dataset no file checksums).
_RESULTS_OPTIONAL = ("measures", "farm", "dataset_file_checksums")


@dataclass(frozen=True)
class Results:
    """What a run measured, and what made it (code, dataset, embedder, settings)."""

    #: False when any item failed: the averages are then over the rest.
    complete: bool
    failures: dict
    tuning: dict | None
    benchmark: str
    benchmark_key: str
    system: str | None
    question_count: int
    retrieval_evaluable: int
    scored_without_gold: int
    abstentions_excluded: int
    excluded: int
    failed: int
    metrics: dict
    metrics_by_profile: dict
    short_rankings: int
    phases_ms: dict
    embedding_store: dict
    records: list
    dataset_checksum: str | None
    embedder: str | None
    embedding_dimension: int | None
    commit: str
    retrieval_mode: str | None
    #: The chosen profile, which is also the corpus the run gave its system (`corpus` in the file).
    scoring_profile: str | None
    settings: dict
    settings_system: dict
    command: str
    elapsed_seconds: float
    peak_rss_bytes: int | None
    #: AdaMem's six measures, for a system that packs a context block; absent otherwise.
    measures: dict | None = None
    #: A farm run's workers, attempts and timings; absent for a local run.
    farm: dict | None = None
    #: Each JSON file's checksum where the dataset was a folder of them; absent otherwise. Weights tuned on this
    #: run (`memfarm optimize`) record them, so that a later run on one of the files is known as tuned on.
    dataset_file_checksums: list | None = None

    @classmethod
    def from_dict(cls, data, where: str = "results") -> "Results":
        """A results file as `to_dict` writes it; a `ResultsError` names a missing field or another format."""
        _check(data, RESULTS_FORMAT, cls, _RESULTS_OPTIONAL, where)
        if data.get("corpus", data["scoring_profile"]) != data["scoring_profile"]:
            raise ResultsError(f"{where}: corpus {data['corpus']!r} is not its scoring profile "
                               f"{data['scoring_profile']!r}; a run gives its system the chosen corpus")
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})

    def to_dict(self) -> dict:
        data = {"format": RESULTS_FORMAT}
        for spec in fields(self):
            if spec.name in _RESULTS_OPTIONAL and getattr(self, spec.name) is None:
                continue
            data[spec.name] = getattr(self, spec.name)
            if spec.name == "scoring_profile":
                data["corpus"] = self.scoring_profile
        return data

    @classmethod
    def read(cls, path: str | Path) -> "Results":
        return cls.from_dict(read_json(Path(path), "results file", ResultsError, top=dict), str(path))


@dataclass(frozen=True)
class Manifest:
    """How a run was made, enough to make it again: dataset, arguments, code, machine, cache, evaluation."""

    dataset_path: str
    dataset_sha256: str | None
    arguments: dict
    command: str
    commit: str
    python: str
    platform: str
    #: The system as described (`adapters.systems.describe`): its vector store, mode, sources and ranking.
    system: dict
    top_k: int | None
    rendering: str | None
    cache: dict
    evaluation: dict
    phases_ms: dict
    embedding_store: dict
    failures: list
    items: list
    settings: dict
    elapsed_seconds: float
    created: str
    measures: dict | None = None
    farm: dict | None = None
    #: What `memfarm score` read of a rankings file (its problems, dropped ids, missing questions).
    rankings: dict | None = None

    @classmethod
    def from_dict(cls, data, where: str = "manifest") -> "Manifest":
        """A manifest as `to_dict` writes it; a `ResultsError` names a missing field or another format."""
        blocks = isinstance(data, dict) and isinstance(data.get("dataset"), dict)
        if blocks and isinstance(data.get("fairness"), dict):
            dataset, fairness = data["dataset"], data["fairness"]
            data = {**data, "dataset_path": dataset.get("path"), "dataset_sha256": dataset.get("sha256"),
                    "top_k": fairness.get("top_k"), "rendering": fairness.get("rendering")}
        _check(data, MANIFEST_FORMAT, cls, ("measures", "farm", "rankings"), where)
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})

    def to_dict(self) -> dict:
        return {
            "format": MANIFEST_FORMAT,
            "dataset": {"path": self.dataset_path, "sha256": self.dataset_sha256},
            "arguments": self.arguments, "command": self.command, "commit": self.commit,
            "python": self.python,
            "platform": self.platform, "system": self.system, "vector_store": self.system.get("vector_store"),
            "retrieval": {"mode": self.system.get("retrieval_mode"), "sources": self.system.get("sources"),
                          "candidate_limit": self.top_k},
            "ranking": self.system.get("ranking", {"enabled": False, "mmr": False}),
            "fairness": {"top_k": self.top_k, "rendering": self.rendering},
            "cache": self.cache, "evaluation": self.evaluation, "phases_ms": self.phases_ms,
            "embedding_store": self.embedding_store, "failures": self.failures, "items": self.items,
            "settings": self.settings, "elapsed_seconds": self.elapsed_seconds, "created": self.created,
            **{name: getattr(self, name) for name in ("measures", "farm", "rankings")
               if getattr(self, name) is not None},
        }

    @classmethod
    def read(cls, path: str | Path) -> "Manifest":
        return cls.from_dict(read_json(Path(path), "manifest", ResultsError, top=dict), str(path))


def _check(data, wanted_format: str, kind, optional, where: str) -> None:
    if not isinstance(data, dict):
        raise ResultsError(f"{where}: not a JSON object but {type(data).__name__}")
    if data.get("format") != wanted_format:
        raise ResultsError(f"{where}: format {data.get('format')!r}, this version reads {wanted_format!r}")
    missing = [f.name for f in fields(kind) if f.name not in data and f.name not in optional]
    if missing:
        raise ResultsError(f"{where}: lacks {', '.join(missing)}")
