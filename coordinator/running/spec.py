"""RunSpec: what one run evaluates and how, built once from the command line.

`run`, `submit`, `score`, the benches and the farm all read the same spec;
it refuses settings that the chosen system or benchmark would not use, so
no option is ever silently ignored, and it builds the run context (what the
reducer writes into the results file and manifest) in one place.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from adapters.defaults import DEFAULT_MAX_ATTEMPTS, DEFAULT_TOP_K, EMBEDDING_STORE_FILE, K_VALUES
from adapters.errors import MemfarmError
from adapters.files import content_hash, dataset_checksums
from adapters.benchmarks import Benchmark, benchmark, default_profile
from adapters.benchmarks.contract import companion_of, files_of, warns, without_companion
from adapters.systems import SYSTEMS, describe, make_system
from adapters.systems.contract import signature_of
from adapters.systems.settings import BY_NAME, SETTINGS, Kind, Setting, default
from memoria import defaults as engine
from memoria.settings import MemoriaSettings
from workers.item.run_context import RunContext

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSpec:
    benchmark: str
    dataset: str | None = None
    questions: str | None = None
    retrieval_mode: str = default("retrieval_mode")
    #: None: the benchmark's natural system (adamem for AdaMem episodes, memoria otherwise).
    system: str | None = None
    limit: int | None = None
    cache_dir: str | None = None
    rebuild_cache: bool = False
    output: str | None = None
    #: None: the benchmark's default (`longmemeval-official` for LongMemEval-S, `expected-text` otherwise).
    scoring_profile: str | None = None
    batch_size: int = default("batch_size")
    extraction_threads: int = default("extraction_threads")
    top_k: int = DEFAULT_TOP_K
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    run_id: str | None = None
    weights_file: str | None = None
    #: Memoria: sources left out and ranking or query parts switched off (`--without`, repeatable).
    without: tuple[str, ...] = ()
    #: Memoria: engine settings given, by `MemoriaSettings` field name (the others: the engine's defaults).
    #: A run records them flat, beside the other arguments (`arguments`, `from_arguments`).
    memoria_settings: dict = field(default_factory=dict)
    ablation: str | None = None
    #: The embedder's window in tokens (None: the model's own); it changes the embedding signature.
    max_seq_length: int | None = None
    #: Keep each distinct text's vector in `<cache dir>/embeddings.sqlite` (a farm worker: its own cache dir).
    embedding_store: bool = default("embedding_store")
    #: Farm: workers also share vectors through the run's Redis (workers.farm.shared_vectors), float32, bounded.
    shared_embeddings: bool = False
    #: How MiniLM runs: torch, onnx or onnx-int8 (part of the embedding signature).
    embedder_backend: str = default("embedder_backend")
    #: Which model embeds: minilm, mpnet or a local folder's path (part of the embedding signature).
    embedder: str = default("embedder")
    command: str = ""
    #: Option names the user gave explicitly (the others are defaults).
    explicit: frozenset = frozenset()
    #: Extra system settings that have no option (benches: sources left out, MMR off).
    extra_settings: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.scoring_profile is None:
            object.__setattr__(self, "scoring_profile", default_profile(self.benchmark))
        info = SYSTEMS.get(self.system or "")
        if (info and info.modes and "retrieval_mode" not in self.explicit
                and self.retrieval_mode == default("retrieval_mode")):  # a system with modes: its natural one
            object.__setattr__(self, "retrieval_mode", info.modes[0])

    @property
    def info(self) -> Benchmark:
        return benchmark(self.benchmark)

    @property
    def system_name(self) -> str:
        return self.system or self.info.system

    # -- checks ---------------------------------------------------------------
    def check(self, farm: bool) -> list[str]:
        """Refuse settings that would be ignored; returns warnings worth printing."""
        info, system = self.info, SYSTEMS.get(self.system_name)
        given = self.explicit

        def refuse(option: str, why: str) -> None:
            if option in given:
                raise MemfarmError(f"--{option.replace('_', '-')} {why}")

        if info.needs_dataset and not self.dataset:
            raise MemfarmError(f"--dataset is required for {self.benchmark}")
        if not info.needs_dataset:
            refuse("dataset", f"is not used: {self.benchmark} is built in")
        if companion_of(info.reader) is None:
            refuse("questions", f"is a companion file of a benchmark that reads one; {self.benchmark} reads none")
        if info.ranked and self.scoring_profile not in info.profiles:
            raise MemfarmError(f"--scoring-profile {self.scoring_profile} does not apply to {self.benchmark}; "
                               f"its profiles: {', '.join(info.profiles)}")
        if not info.ranked:
            if self.system_name != info.system:
                raise MemfarmError(f"{self.benchmark} episodes are observed by {SYSTEMS[info.system].title}; "
                                   f"--system must be {info.system}")
            for option in ("top_k", "scoring_profile"):
                refuse(option, f"does not apply to {self.benchmark}: each query carries its own top_k and is judged "
                               "by substrings")
        self._check_taken(system, refuse)
        for option, value in {"without": self.without, **self._memoria_given()}.items():  # judged by value
            if value not in (None, ()) and (system is None or option not in system.settings):
                raise MemfarmError(f"{_flag(option)} is not a setting of {self.system_name}")
        if self.weights_file and (system is None or system.check is None):
            raise MemfarmError(f"--weights is not a setting of {self.system_name}")
        warnings = []
        if system is not None and system.check:  # what only the system reads, checked by its own declaration
            try:
                warnings += system.check(mode=self.retrieval_mode, without=self.without, given=self._memoria_given(),
                                         weights_file=self.weights_file, weights=self._weights(),
                                         embedder=self.embedder)
            except ValueError as exc:
                raise MemfarmError(str(exc)) from None
        if not farm:
            for option in ("max_attempts", "run_id", "shared_embeddings"):
                refuse(option, "is a farm setting: give --broker (or MEMFARM_BROKER) to run on the farm")
            if not self.cache_dir:
                refuse("rebuild_cache", "needs --cache-dir (or MEMFARM_CACHE_DIR): there is no cache to rebuild")
        from memoria.model_files import PACKAGED_EMBEDDERS

        if self.embedder not in PACKAGED_EMBEDDERS and not Path(self.embedder).is_dir():
            raise MemfarmError(f"--embedder {self.embedder}: neither {' nor '.join(PACKAGED_EMBEDDERS)} nor a folder")
        if self.shared_embeddings and not self.embedding_store:
            raise MemfarmError("--shared-embeddings shares what each worker's embedding store holds: "
                               "drop --no-embedding-store")
        taken = self.weights_path()
        if taken and not self.weights_file:
            warnings.insert(0, f"full takes {info.title}'s own weights, tuned on its development data only "
                               f"({taken}); --weights FILE for others")
        if farm and "cache_dir" in given:
            warnings.append("--cache-dir is not used by a farm run: each worker caches in its own --cache-dir")
        elif self.cache_dir and not farm and system is not None and not system.snapshots:
            warnings.append(f"--cache-dir is not used: {self.system_name} cannot snapshot its state")
        elif self.cache_dir and not farm and info.stepped:
            warnings.append(f"--cache-dir keeps only the embedding store here: {info.title}'s memory grows in steps, "
                            "so no item has one state to cache")
        missing = without_companion(info.reader, self.scoring_profile) if self.questions is None else None
        if missing:
            warnings.append(missing)
        if self.dataset and warns(info.reader):  # a file the reader does not know (RealMem's, by checksum) runs, named
            warnings += self.open_dataset().warnings()
        return warnings

    def _check_taken(self, system, refuse) -> None:
        """Refuse a described setting given for a system that does not take it, and a mode it does not have.

        `without` is judged with the engine's settings, by its value. A user's system is built with no
        arguments, so each setting given for it is refused, except a per-machine one (a machine's own)."""
        described = [setting for setting in SETTINGS if setting.name != "without"]
        if system is None:
            for setting in described:
                if not setting.per_machine:
                    refuse(setting.option, f"is not passed to {self.system_name} (a user system is built "
                                           "with no arguments)")
            return
        mode = BY_NAME["mode"]
        if not mode.allowed(system):
            refuse(mode.option, f"means nothing to {system.name}; it has no retrieval modes"
                   + (" (use --ablation)" if "ablation" in system.settings else ""))
        elif self.retrieval_mode not in mode.allowed(system):
            raise MemfarmError(f"{mode.flag} {self.retrieval_mode} is not a mode of {system.name}; "
                               f"its modes: {', '.join(mode.allowed(system))}")
        for setting in described:
            if setting.name not in system.settings and setting is not mode:
                refuse(setting.option, f"is not a setting of {system.name}")

    def _memoria_given(self) -> dict:
        return {name: value for name, value in self.memoria_settings.items() if value is not None}

    def weights_path(self) -> str | None:
        """The weights file of the run: --weights, else the benchmark's own for Memoria `full` with MiniLM (RealMem's,
        tuned on its development personas: adapters/weights), else None (the engine's defaults)."""
        if self.weights_file:
            return self.weights_file
        own = self.info.memoria_weights_file()
        if (own and self.system_name == "memoria" and self.retrieval_mode in engine.RANKED_MODES
                and self.embedder == engine.DEFAULT_EMBEDDER):
            return str(own)
        return None

    def _weights(self) -> dict[str, float] | None:
        path = self.weights_path()
        if not path:
            return None
        from coordinator.results.optimize import load_weights

        return load_weights(path)

    # -- what the spec builds -------------------------------------------------
    def ablations(self) -> list["RunSpec"]:
        """One spec per AdaMem ablation when `--ablation all` (the default for AdaMem episodes), else itself."""
        system = SYSTEMS.get(self.system_name)
        wants_all = self.ablation == "all" or (self.ablation is None and not self.info.ranked)
        if system is None or not system.ablations or not wants_all:
            return [self]

        def output(name):  # one results file per ablation, never one overwriting another
            if not self.output:
                return None
            path = Path(self.output)
            return str(path.with_name(f"{path.stem}.{name}{path.suffix or '.json'}"))

        return [replace(self, ablation=name, output=output(name),
                        run_id=f"{self.run_id}.{name}" if self.run_id else None) for name in system.ablations]

    def system_settings(self) -> dict:
        """The settings the system is built with (also what a farm worker rebuilds it from)."""
        described = {setting.name: self._system_value(setting) for setting in SETTINGS}
        settings = {**{k: v for k, v in described.items() if v is not None}, **self.memoria_settings,
                    **self.extra_settings}
        info = SYSTEMS.get(self.system_name)
        wanted = info.settings if info else ()
        return {k: v for k, v in settings.items() if k in wanted and v is not None}

    def _system_value(self, setting: Setting):
        """What the system is given for `setting` (None: nothing); a per-machine one where the run chose."""
        value = getattr(self, setting.option)
        if setting.kind is Kind.STORE:  # kept in the cache dir: this machine's (a farm worker keeps its own)
            if not (value and self.cache_dir):
                return None
            return str(Path(self.cache_dir).resolve() / EMBEDDING_STORE_FILE)
        if setting.per_machine and value == setting.default:
            return None
        if setting.kind is Kind.PARTS:
            return tuple(value) or None
        if setting.kind is Kind.WEIGHTS:
            return self._weights()
        return value

    def make_system(self):
        return make_system(self.system_name, **self.system_settings())

    def open_dataset(self):
        return self.info.open(self.dataset, self.questions, self.scoring_profile)

    def title(self) -> str:
        """The benchmark's title for this run's results: "(generated)" where the file is a generated stand-in."""
        if not (self.info.description and self.dataset):
            return self.info.title
        try:  # a reader that says its file is generated (a `generated()` answering true) takes `description`
            generated = getattr(self.open_dataset(), "generated", None)
            return self.info.description if callable(generated) and generated() else self.info.title
        except (MemfarmError, OSError, ValueError):  # an unreadable file: the run itself says why
            return self.info.title

    def dataset_sha256(self) -> str:
        return self.dataset_checksums()[0]

    def dataset_checksums(self, items: int | None = None) -> tuple[str, list[str]]:
        """The dataset's checksum and, where --dataset is a folder, each JSON file's (`adapters.files`): those of
        the first `items` items (all: None), where the benchmark lists each item's files (BEAM's chats), else
        the first `items` top-level files, one an item."""
        if not self.dataset:
            return content_hash(self.open_dataset().episodes()), []
        groups = files_of(self.info.reader, self.dataset)
        if groups is None:
            checksum, files = dataset_checksums(self.dataset)
            return checksum, files[:items]
        checksum, files = dataset_checksums(self.dataset, [file for group in groups for file in group])
        return checksum, files[:sum(len(group) for group in groups[:items])]

    def arguments(self) -> dict:
        """The spec as plain data, what a results file, a manifest and a run's metadata record.

        The Memoria settings sit flat among the other fields: each command-line one by name (None
        when not given), then any other one given; `from_arguments` reads this back.
        """
        values = {}
        for name, value in asdict(self).items():
            if name == "memoria_settings":
                values.update({spec.name: None for spec in fields(MemoriaSettings) if spec.metadata["option"]})
                values.update(value)
            elif name != "explicit":
                values[name] = value
        values["system"] = self.system_name
        return values

    @classmethod
    def from_arguments(cls, arguments: dict) -> "RunSpec":
        """The spec that `arguments()` recorded (those of any results file or run metadata written before too)."""
        names = {spec.name for spec in fields(MemoriaSettings)}
        memoria = {k: v for k, v in arguments.items() if k in names and v is not None}
        rest = {k: v for k, v in arguments.items() if k not in names and k != "explicit"}
        return cls(**rest, memoria_settings=memoria, explicit=frozenset())

    def context(self, *, system_config: dict, embedding_signature: dict | None,
                cache_dir: str | None = None) -> RunContext:
        """The run context the reducer writes into the results file and manifest."""
        info = self.info
        checksum, file_checksums = self.dataset_checksums(self.limit)  # the files of the items run
        return RunContext(
            benchmark=info.name,
            benchmark_title=self.title(),
            group_key=info.group_key,
            dataset_path=str(Path(self.dataset).resolve()) if self.dataset else info.source,
            dataset_sha256=checksum,
            # a folder's files, each: weights tuned on this run mark a run on any one of them as tuned on its data
            dataset_file_checksums=file_checksums or None,
            system_config=system_config,
            embedding_signature=embedding_signature,
            scoring_profile=self.scoring_profile if info.ranked else None,
            top_k=self.top_k if info.ranked else None,
            k_values=K_VALUES,
            rendering=info.rendering,
            cache_dir=str(Path(cache_dir).resolve()) if cache_dir else None,
            rebuild_cache=self.rebuild_cache,
            arguments=self.arguments(),
            command=self.command,
            tuning=self._tuning(checksum, file_checksums),
        )

    def _tuning(self, checksum: str, file_checksums: list[str]) -> dict | None:
        path = self.weights_path()
        if not path:
            return None
        from coordinator.results.optimize import tuning_record

        return tuning_record(path, checksum, file_checksums, self._item_ids, self.info.name)

    def _item_ids(self) -> list[str]:
        """The ids of the items this run takes (the first --limit), or none where the dataset cannot be read (the
        run itself then says why)."""
        try:
            return list(self.open_dataset().scan())[:self.limit]
        except (MemfarmError, OSError):
            return []

    def system_context(self, system, cache_used: bool) -> RunContext:
        """The context of a run of `system` (memoria, adamem, a user's own)."""
        return self.context(system_config=describe(system),
                            embedding_signature=signature_of(system),
                            cache_dir=self.cache_dir if cache_used else None)


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def resolved_system(name: str) -> str:
    """A user's `file.py:Class` with the file's absolute path (the same file wherever the name is read:
    farm workers, their allow-lists, resume); a server's URL in its one spelling; any other name as it is."""
    from adapters.systems.http_client import canonical_url, is_http_system

    if is_http_system(name):
        return canonical_url(name)
    if ".py:" not in name:
        return name
    path, _, class_name = name.rpartition(":")
    return f"{Path(path).resolve()}:{class_name}"


def from_options(benchmark_name: str, params: dict, *, command: str, explicit) -> RunSpec:
    """A spec from click's parameters (names as the options spell them; Memoria's as its settings' fields)."""
    names = set(RunSpec.__dataclass_fields__) - {"benchmark", "command", "explicit", "extra_settings",
                                                 "memoria_settings"}
    values = {k: v for k, v in params.items() if k in names}
    if values.get("system"):
        values["system"] = resolved_system(values["system"])
    if values.get("embedder"):  # a folder by its absolute path: the same folder wherever the run is read
        from memoria.model_files import embedder_key

        values["embedder"] = embedder_key(values["embedder"])
    settings = {spec.name for spec in fields(MemoriaSettings)}
    memoria = {k: v for k, v in params.items() if k in settings and v is not None}
    return RunSpec(benchmark=benchmark_name, command=command, explicit=frozenset(explicit), memoria_settings=memoria,
                   **values)
