"""The results file and its manifest: one shape each, one writer and one reader.

The reducer writes them (`Results`, `Manifest`: every field once, `to_dict` in the order the files have
always had, the optional blocks only when a run has them); a value the files hold twice is held there once
and written twice: a results file's `corpus` is its `scoring_profile`, a manifest's `vector_store`,
`retrieval` and `ranking` come from its `system`, and its candidate limit is its `fairness.top_k`.

Every command that reads one (run, analyze, compare, board, score, optimize, bench) reads it through
`ResultsFile.read` or `ManifestFile.read`: plain JSON on disk, a dict-backed object in code (as ranx's `Run`
is), checked once when read, each scoring profile under its current name, each record a `QuestionRecord`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from adapters.errors import ResultsError
from adapters.files import read_json, write_json
from adapters.profiles import profile_name
from adapters.records import QuestionRecord
from coordinator.results.checks import check_results

RESULTS_FORMAT = "memoria-farm/results/1"
MANIFEST_FORMAT = RESULTS_FORMAT + "/manifest"
#: Results fields absent from the file when empty (a local run has no `farm`, a one-file dataset no file checksums).
_RESULTS_OPTIONAL = ("measures", "farm", "dataset_file_checksums")
#: Manifest fields absent when empty (a local run has no `farm`, a run's own rankings no `rankings`).
_MANIFEST_OPTIONAL = ("measures", "farm", "rankings")


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

    def to_dict(self) -> dict:
        data = {"format": RESULTS_FORMAT}
        for spec in fields(self):
            if spec.name in _RESULTS_OPTIONAL and getattr(self, spec.name) is None:
                continue
            data[spec.name] = getattr(self, spec.name)
            if spec.name == "scoring_profile":
                data["corpus"] = self.scoring_profile
        return data


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
            **{name: getattr(self, name) for name in _MANIFEST_OPTIONAL if getattr(self, name) is not None},
        }


#: What every results file this version reads holds; a file without one of them is not a results file.
REQUIRED_KEYS = ("benchmark", "records", "metrics", "question_count", "retrieval_evaluable")


def current_profile_names(data: dict) -> dict:
    """`data` (a record, a results file or a manifest) with every scoring profile under its current name.

    A file may name a profile by an alias (`PROFILE_ALIASES`: `memoria` for `expected-text`) as the chosen
    profile, the corpus and the keys of `metrics_by_profile`; read through this, it lines up with the others.
    """
    renamed = dict(data)
    for key in ("scoring_profile", "corpus"):
        if isinstance(renamed.get(key), str):
            renamed[key] = profile_name(renamed[key])
    if isinstance(renamed.get("metrics_by_profile"), dict):
        renamed["metrics_by_profile"] = {profile_name(name): current_profile_names(block) if isinstance(block, dict)
                                         else block for name, block in renamed["metrics_by_profile"].items()}
    if isinstance(renamed.get("profiles_computed"), list):
        renamed["profiles_computed"] = [profile_name(name) for name in renamed["profiles_computed"]]
    if isinstance(renamed.get("evaluation"), dict):  # a manifest's
        renamed["evaluation"] = current_profile_names(renamed["evaluation"])
    if isinstance(renamed.get("records"), list):
        renamed["records"] = [current_profile_names(r) if isinstance(r, dict) else r for r in renamed["records"]]
    return renamed


class ResultsFile(dict):
    """A results file as read: its plain JSON object, checked once (`checks.check_results`: its header against
    its records, its metrics against its rankings), each scoring profile under its current name and each record
    a `QuestionRecord`. `_path` names the file it was read from, for messages; `to_dict` and `write` leave it
    out."""

    @classmethod
    def read(cls, path: str | Path) -> "ResultsFile":
        """The results file at `path`; a `ResultsError` naming the file and what is wrong with it."""
        return cls.from_dict(read_json(Path(path), "results file", ResultsError, top=dict), str(path))

    @classmethod
    def from_dict(cls, data: dict, where: str = "results file") -> "ResultsFile":
        """`data` (a results file's JSON) checked as `read` checks a file; `where` names it in messages."""
        missing = [key for key in REQUIRED_KEYS if key not in data]
        if missing:
            raise ResultsError(f"{where}: not a memoria-farm results file (missing {', '.join(missing)})")
        if data.get("format") != RESULTS_FORMAT:
            raise ResultsError(f"{where}: results format {data.get('format')!r}, this version reads {RESULTS_FORMAT!r}")
        results = cls(current_profile_names(data))
        results["_path"] = where
        check_results(results)
        results["records"] = [QuestionRecord(r) for r in results["records"]]
        return results

    @property
    def path(self) -> str:
        return self["_path"]

    @property
    def records(self) -> list[QuestionRecord]:
        return self["records"]

    def to_dict(self) -> dict:
        """The file's JSON object, as written."""
        return {key: value for key, value in self.items() if key != "_path"}

    def write(self, path: str | Path) -> None:
        write_json(Path(path), self.to_dict())


class ManifestFile(dict):
    """A manifest as read: its plain JSON object, its format and fields checked once (those `Manifest` writes),
    each scoring profile under its current name."""

    @classmethod
    def read(cls, path: str | Path) -> "ManifestFile":
        """The manifest at `path`; a `ResultsError` naming the file and what is wrong with it."""
        return cls.from_dict(read_json(Path(path), "manifest", ResultsError, top=dict), str(path))

    @classmethod
    def from_dict(cls, data: dict, where: str = "manifest") -> "ManifestFile":
        if data.get("format") != MANIFEST_FORMAT:
            raise ResultsError(f"{where}: format {data.get('format')!r}, this version reads {MANIFEST_FORMAT!r}")
        written = set(Manifest.__dataclass_fields__) - {"dataset_path", "dataset_sha256", "top_k", "rendering"}
        missing = sorted(name for name in written | {"dataset", "fairness"}
                         if name not in data and name not in _MANIFEST_OPTIONAL)
        if missing:
            raise ResultsError(f"{where}: lacks {', '.join(missing)}")
        manifest = cls(current_profile_names(data))
        manifest["_path"] = where
        return manifest

    @property
    def path(self) -> str:
        return self["_path"]

    def to_dict(self) -> dict:
        return {key: value for key, value in self.items() if key != "_path"}

    def write(self, path: str | Path) -> None:
        write_json(Path(path), self.to_dict())
