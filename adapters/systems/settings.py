"""The settings a built-in system takes from a run, described once.

Each `Setting` says what the command line, the run's check and a farm worker's check would
otherwise each say again: its name, its kind, its bounds or allowed values, its default and its
help, and whether a machine holds its own value. `memfarm run` builds its options from these
(`coordinator.cli.run`), `RunSpec` refuses one its system does not take and turns the given ones
into the system's arguments (`coordinator.running.spec`), and a worker checks a run's settings read
from Redis by them (`workers.farm.run_settings`), so adding a setting is one entry here. The
engine's own settings (`memoria.settings.MemoriaSettings`) are described by their fields and join
these where a system takes them. Which settings a system takes is its `SystemInfo.settings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from adapters.defaults import EMBEDDER_HELP
from memoria import defaults as engine
from memoria.model_files import PACKAGED_EMBEDDERS


class Kind(Enum):
    """What a setting's value is, which decides how each reader spells and checks it."""

    #: A whole number of at least `minimum`.
    COUNT = "count"
    #: One of `choices`, or of the system's own (`system_choices`: its modes, its ablations).
    CHOICE = "choice"
    #: Part names, the option repeated (a list in a run).
    PARTS = "parts"
    #: A JSON file of ranking weights on the command line; in a run, the weights (the engine checks them).
    WEIGHTS = "weights"
    #: A packaged model's name or a model folder; a worker takes a folder only where it was started with it.
    MODEL = "model"
    #: On or off on the command line; in a run, the store's path, which must lie in the worker's cache dir.
    STORE = "store"


@dataclass(frozen=True)
class Setting:
    #: As the system takes it (its keyword, `SystemInfo.settings`, a run's `system_settings`).
    name: str
    #: The RunSpec field and command-line parameter that give it.
    option: str
    kind: Kind
    help: str | None = None
    #: The run's value where none is given (None: the system's own).
    default: object = None
    minimum: int | None = None
    choices: tuple[str, ...] = ()
    #: The `SystemInfo` attribute that lists a system's own allowed values ("modes", "ablations").
    system_choices: str | None = None
    #: A value beside the choices that the spec reads as "each of them in turn" (`--ablation all`):
    #: the command line then takes any text and leaves the refusal to the system.
    each: str | None = None
    #: A per-machine setting: a worker may hold its own value (its --embedder, its cache dir), which wins
    #: over the run's; a run sends it only where it differs from the default (the store: its path where
    #: the run keeps one), and a user's system is not refused it.
    per_machine: bool = False
    #: How the value is written in the option's help, and the variable the command line also reads it from.
    metavar: str | None = None
    envvar: str | None = None
    #: The option's flag where it is not the parameter's name with dashes.
    spelled: str | None = None
    #: For a setting whose values are each system's own: the system whose values `help` itself describes; the
    #: help then lists every other system's, from its declaration (`help_for`).
    help_describes: str | None = None

    @property
    def flag(self) -> str:
        return self.spelled or f"--{self.option.replace('_', '-')}"

    def allowed(self, info) -> tuple[str, ...]:
        """The values the system that `info` (a `SystemInfo`) describes takes: the fixed choices, or its own."""
        return tuple(getattr(info, self.system_choices)) if self.system_choices else self.choices

    def help_for(self, systems) -> str | None:
        """The option's help: `help`, and where it lists systems, each one of `systems` (`SystemInfo`s) that has
        values of its own but the one `help` describes, with its values, its default first."""
        if self.help_describes is None:
            return self.help
        listed = [f"{info.name}: {_spoken(self.allowed(info))}" for info in systems
                  if info.name != self.help_describes and self.allowed(info)]
        return f"{self.help} ({'; '.join(listed)})." if listed else f"{self.help}."

    def offered(self, systems) -> tuple[str, ...]:
        """Every value some system of `systems` takes, sorted (what the command line offers)."""
        if not self.system_choices:
            return self.choices
        return tuple(sorted({value for info in systems for value in self.allowed(info)}))


#: In the order a reader meets them; the command line places each where its help reads best.
SETTINGS: tuple[Setting, ...] = (
    Setting("mode", "retrieval_mode", Kind.CHOICE, system_choices="modes", default=engine.DEFAULT_MODE,
            help="Memoria's sources, or the modes of a system that has its own", help_describes="memoria"),
    Setting("batch_size", "batch_size", Kind.COUNT, minimum=1, default=engine.DEFAULT_BATCH_SIZE,
            help="Texts per call to the embedding model."),
    Setting("max_workers", "extraction_threads", Kind.COUNT, minimum=1, default=engine.DEFAULT_MAX_WORKERS,
            help="Threads that extract entities and attributes at insert time."),
    Setting("weights", "weights_file", Kind.WEIGHTS, spelled="--weights",
            help="Ranking weights (JSON) for --retrieval-mode full."),
    Setting("without", "without", Kind.PARTS, default=(), metavar="PART",
            help="Memoria: leave out a source of the mode or, in full, switch off a ranking or query part "
                 f"({', '.join(engine.SWITCHES)}); repeatable."),
    Setting("ablation", "ablation", Kind.CHOICE, system_choices="ablations", each="all",
            help="AdaMem configuration (system adamem; 'all' runs each, the default for adamem-*)."),
    Setting("max_seq_length", "max_seq_length", Kind.COUNT, minimum=8, per_machine=True,
            envvar="MEMFARM_MAX_SEQ_LENGTH",
            help="Shorten the embedder's window (tokens); it changes the embedding signature."),
    Setting("embedder_backend", "embedder_backend", Kind.CHOICE, choices=engine.EMBEDDER_BACKENDS,
            default=engine.DEFAULT_EMBEDDER_BACKEND, per_machine=True,
            help="How the embedder runs: torch, onnx (the same vectors, faster) or onnx-int8 (faster still, "
                 "a small quality cost); part of the signature."),
    Setting("embedder", "embedder", Kind.MODEL, default=engine.DEFAULT_EMBEDDER, per_machine=True,
            metavar="|".join(PACKAGED_EMBEDDERS) + "|PATH", help=EMBEDDER_HELP),
    Setting("embedding_store", "embedding_store", Kind.STORE, default=True, per_machine=True,
            help="Encode each distinct text once per machine, in <cache dir>/embeddings.sqlite (needs "
                 "--cache-dir locally; a farm worker uses its own)."),
)

def _spoken(values: tuple[str, ...]) -> str:
    """Values in a sentence, the first (a system's default) named so: "a, its default, b or c"."""
    if len(values) == 1:
        return values[0]
    rest = values[1:]
    return f"{values[0]}, its default, " + (f"or {rest[0]}" if len(rest) == 1 else
                                            f"{', '.join(rest[:-1])} or {rest[-1]}")


BY_NAME: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}
BY_OPTION: dict[str, Setting] = {setting.option: setting for setting in SETTINGS}


def default(option: str):
    """The default of the setting given by `option` (what a RunSpec field starts as)."""
    return BY_OPTION[option].default
