"""The contract of a system under test, declared once: what every system must do, and what it may.

Every system has a str `name`, `reset()`, `ingest(docs)` and `retrieve(label, query, top_k)`
(`SystemUnderTest`). Anything more is an optional capability, each its own protocol below; the runner
and the workers ask for a capability through its helper (`snapshots_of(system)` and the like), which
answers None (or an empty value) for a system that does not have it, and never ask a system's name or
probe its attributes elsewhere.

A built-in system declares its capabilities by subclassing their protocols. A user's class may do the
same, or simply have every member of a capability (a protocol is structural): a class that declares
nothing optional still runs, with the runner's defaults. A capability's members are looked up on the
class and instance without running them (`inspect.getattr_static`), so asking is free even where a
member is a property that works (a model's files hashed, a server asked).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from adapters.errors import MemfarmError

#: The methods every system has (besides its str `name`).
REQUIRED_METHODS = ("reset", "ingest", "retrieve")


@runtime_checkable
class SystemUnderTest(Protocol):
    """The required interface: the runner mints the ids and labels, the system only stores and ranks."""

    name: str

    def reset(self) -> None: ...

    def ingest(self, docs: list[dict]) -> None: ...

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]: ...


@runtime_checkable
class Describes(Protocol):
    """What the manifest discloses about the system (`adapters.systems.describe`)."""

    config: dict


@runtime_checkable
class Versioned(Protocol):
    """The system's own version, reported by the conformance check."""

    version: str


@runtime_checkable
class Embeds(Protocol):
    """The signature of the vectors the system makes: a run's vectors must all share one."""

    embedding_signature: dict


@runtime_checkable
class HasBuildIdentity(Protocol):
    """What a built state depends on beyond docs and signature (the engine's code, the model's files)."""

    build_identity: dict


@runtime_checkable
class Snapshots(Protocol):
    """A system whose state can be saved and read back gets the per-item cache."""

    def snapshot(self, directory: Path) -> list[Path]: ...

    def restore(self, directory: Path) -> None: ...


@runtime_checkable
class AddsOnIngest(Protocol):
    """A system whose `ingest` adds to what it holds (a second call keeps the first one's docs). A benchmark whose
    memory grows in steps (RealMem) gives such a system each step's docs only; any other system is reset and
    given every doc so far at each step, which gives the same state for any system that follows the contract,
    at a cost that grows with the steps."""

    adds_on_ingest: bool


@runtime_checkable
class EncodesAhead(Protocol):
    """A system that can make, in one batch, the vectors of docs it will be given later in steps, holding them
    by text only: nothing encoded ahead is stored or searchable before its doc is ingested, and a vector is the
    one the doc would have had anyway, so no ranking changes (`memoria.ahead`). `encode_ahead([])` forgets."""

    def encode_ahead(self, docs: list[dict]) -> None: ...


@runtime_checkable
class AsksAhead(Protocol):
    """A system that can be handed, together, the questions about to be asked of what it now holds, before the first
    of them is asked, and the depth each will be asked for (`top_k`): to encode them in one batch rather than each in
    a batch of its own. It must not store them or let them change what it holds or how it ranks; each question is
    still asked, and answered, on its own."""

    def questions_ahead(self, queries: list[str], top_k: int) -> None: ...


@runtime_checkable
class GrowsWhileAsked(Protocol):
    """A state that questions add to (sentence vectors), so that a cache entry is stored again after them."""

    unsaved_state: bool


@runtime_checkable
class CountsWork(Protocol):
    """Counters and timings of what the system did: texts encoded and served, and its ingest phases."""

    embedding_counts: dict | None
    encoded_by_kind: dict
    ingest_timings: dict


@runtime_checkable
class Diagnoses(Protocol):
    """The system's own account of its last retrieve, kept in each question's record."""

    last_diagnostics: dict


@runtime_checkable
class PacksContext(Protocol):
    """A system that packs a prompt block (AdaMem): the block is measured against the gold answer."""

    def context(self, label: str, query: str, top_k: int) -> str: ...


@runtime_checkable
class CountsWrites(Protocol):
    """What the system stored for the events it observed (write amplification)."""

    def write_stats(self) -> dict: ...


@runtime_checkable
class Remote(Protocol):
    """A system behind a server: whether it is still the one a run was staged against."""

    def changed_since(self, staged: dict | None) -> str | None: ...


@runtime_checkable
class SharesVectors(Protocol):
    """A system whose embedding store can share vectors through the farm's Redis (where it has a store)."""

    stores_vectors: bool

    def share_vectors(self, shared, verify_share: float) -> None: ...


@runtime_checkable
class Closes(Protocol):
    """A system that holds what outlives an item (file handles, a scratch folder): the runner closes it once,
    at the end of a local run or of a worker's pool process, so nothing of it outlives its use."""

    def close(self) -> None: ...


@runtime_checkable
class FreshMemory(Protocol):
    """A system that observes episodes (AdaMem's benchmark): each episode is judged on an empty memory of its own,
    which the system makes (`Kind.EPISODES`)."""

    def fresh_memory(self): ...


@dataclass(frozen=True)
class SystemInfo:
    """A built-in system as data, declared beside its class: what it takes and what is its own."""

    name: str
    #: Its class, built with the run's settings (those in `settings`, given ones only).
    factory: type
    #: How the system is named in a sentence.
    title: str
    #: Settings the factory takes (anything else given on the command line is refused).
    settings: tuple[str, ...]
    #: Its retrieval modes, its natural one first; empty: `--retrieval-mode` means nothing to it.
    modes: tuple[str, ...] = ()
    #: Its ablations (AdaMem): `--ablation all` runs each.
    ablations: tuple[str, ...] = ()
    #: The pip extra an optional system needs (None: always installed), and the module it imports.
    extra: str | None = None
    vendor_module: str | None = None
    #: The parts a mode asks once some are left out: `plan(mode, without, weights)`, raising ValueError for
    #: what the system does not have (None: nothing to plan).
    plan: Callable | None = None
    #: The system's own check of a run's settings before anything is built (what only it reads):
    #: `check(mode=, without=, given=, weights_file=, weights=, embedder=)` -> warnings about settings given but
    #: unused; raises ValueError naming the option for a setting it refuses (None: nothing to check).
    check: Callable | None = None
    #: A control arm (`adapters.systems.arms`): it shows a benchmark's floor, and every table marks it.
    arm: bool = False
    #: The modes (or ablations) `memfarm bench systems` runs, in its table's order (None: every one).
    compared: tuple[str, ...] | None = None

    @property
    def optional(self) -> bool:
        return self.extra is not None

    @property
    def install(self) -> str | None:
        """The line that installs an optional system, from the checkout."""
        return f"pip install -e '.[{self.extra}]'" if self.extra else None

    @property
    def variants(self) -> tuple[tuple[str, str | None, str | None], ...]:
        """(label, option, value) of each configuration a table of every system shows: one per compared mode or
        ablation, else the system alone (a control arm's label says so)."""
        option, values = (("--ablation", self.ablations) if self.ablations else
                          ("--retrieval-mode", self.modes) if self.modes else (None, ()))
        if option is None:
            return ((f"{self.name} arm" if self.arm else self.name, None, None),)
        return tuple((f"{self.name} {value}", option, value)
                     for value in (values if self.compared is None else self.compared))

    @property
    def snapshots(self) -> bool:
        """Whether its state can be cached per item."""
        return Snapshots in self.factory.__mro__


def declares(system, capability: type) -> bool:
    """Whether `system` has `capability`: declared by subclassing it, or every member of it present."""
    if isinstance(system, type):
        return False
    subclassed = capability in type(system).__mro__
    missing = object()
    for member in _members(capability):
        found = inspect.getattr_static(system, member, missing)
        if found is None and callable(getattr(capability, member, None)):
            return False  # a method set to None withdraws the capability, even one declared by subclassing
        if found is missing and not subclassed:
            return False
    return True


def _members(capability: type) -> tuple[str, ...]:
    names = set(getattr(capability, "__annotations__", {}))
    names |= {name for name, value in vars(capability).items() if inspect.isfunction(value)}
    return tuple(sorted(name for name in names if not name.startswith("_")))


def check_contract(system, spec: str):
    """`system` itself, or MemfarmError naming what `spec`'s class lacks of the required interface."""
    missing = [m for m in REQUIRED_METHODS if not callable(getattr(system, m, None))]
    if missing or not isinstance(getattr(system, "name", None), str):
        raise MemfarmError(f"system {spec!r} does not implement the contract: needs a str `name` and "
                           f"{', '.join(REQUIRED_METHODS)} (missing {', '.join(missing) or 'name'})")
    return system


def name_of(system) -> str | None:
    """The system's `name` where it is a str (the conformance check's first question), else None."""
    name = getattr(system, "name", None)
    return name if isinstance(name, str) else None


def config_of(system) -> dict | None:
    return system.config if declares(system, Describes) else None


def version_of(system) -> str:
    return str(system.version) if declares(system, Versioned) else ""


def signature_of(system) -> dict | None:
    return system.embedding_signature if declares(system, Embeds) else None


def build_identity_of(system) -> dict | None:
    return system.build_identity if declares(system, HasBuildIdentity) else None


def model_files_of(system) -> str | None:
    """The hash of the model files the system embeds with, where its build identity says."""
    return (build_identity_of(system) or {}).get("model_files")


def snapshots_of(system) -> Snapshots | None:
    return system if declares(system, Snapshots) else None


def adds_on_ingest(system) -> bool:
    return bool(system.adds_on_ingest) if declares(system, AddsOnIngest) else False


def encoder_ahead_of(system) -> EncodesAhead | None:
    return system if declares(system, EncodesAhead) else None


def questions_ahead_of(system) -> AsksAhead | None:
    return system if declares(system, AsksAhead) else None


def grows_while_asked(system) -> bool:
    return bool(system.unsaved_state) if declares(system, GrowsWhileAsked) else False


def counters_of(system) -> CountsWork | None:
    return system if declares(system, CountsWork) else None


def diagnostics_of(system) -> dict:
    return (system.last_diagnostics or {}) if declares(system, Diagnoses) else {}


def context_packer_of(system) -> PacksContext | None:
    return system if declares(system, PacksContext) else None


def write_stats_of(system) -> dict | None:
    return system.write_stats() if declares(system, CountsWrites) else None


def remote_of(system) -> Remote | None:
    return system if declares(system, Remote) else None


def close_system(system) -> None:
    """Close `system` where it declares `Closes`; a system that does not has nothing to release."""
    if declares(system, Closes):
        system.close()


def fresh_memory_of(system) -> FreshMemory | None:
    """The system as one that makes an empty memory per episode, where it declares so."""
    return system if declares(system, FreshMemory) else None


def vector_sharing_of(system) -> SharesVectors | None:
    """The system as one that can share vectors, where it declares so and has a store to share from."""
    return system if declares(system, SharesVectors) and system.stores_vectors else None
