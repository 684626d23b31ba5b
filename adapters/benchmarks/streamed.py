"""What the two streamed benchmark adapters share: id scanning, item iteration, item-level errors."""

from __future__ import annotations

import time

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from adapters.contracts import Item
from adapters.defaults import MAX_SESSIONS_PER_ITEM, MAX_TEXT_CHARS, MAX_TURNS_PER_ITEM
from adapters.errors import DatasetError
from adapters.jsonstream import iter_array
from adapters.benchmarks import declaration_of
from adapters.benchmarks.contract import Benchmark
from adapters.defaults import DEFAULT_SCORING_PROFILE


class BadField(Exception):
    """One item is malformed: it becomes a recorded failure, the others run."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def check_text(value, where: str, field: str, *, optional: bool = False) -> str:
    """`value` if it is a string that UTF-8 can encode; a BadField naming item and field otherwise."""
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise BadField(f"{where}: field {field!r} is {type(value).__name__}, not a string", field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadField(f"{where}: field {field!r} holds text that is not valid Unicode ({exc.reason} at "
                       f"position {exc.start})", field) from None
    return value


def check_list(value, where: str, field: str, item_type: type | None = None) -> list:
    """`value` if it is a list (of `item_type`); a BadField naming item and field otherwise."""
    if not isinstance(value, list):
        raise BadField(f"{where}: field {field!r} is {type(value).__name__}, not a list", field)
    wrong = [v for v in value if item_type is not None and not isinstance(v, item_type)]
    if wrong:
        raise BadField(f"{where}: field {field!r} holds a {type(wrong[0]).__name__}, not only "
                       f"{item_type.__name__}s", field)
    return value


def check_size(where: str, sessions: int, turns: int, field: str) -> None:
    """A BadField naming the count when an item holds more sessions or turns than the harness takes
    (`MAX_SESSIONS_PER_ITEM`, `MAX_TURNS_PER_ITEM`): checked before anything is built from the item, so what
    staging and a worker hold for one item stays bounded whatever the file."""
    if sessions > MAX_SESSIONS_PER_ITEM:
        raise BadField(f"{where}: holds {sessions} sessions, more than the {MAX_SESSIONS_PER_ITEM} an item may hold",
                       field)
    if turns > MAX_TURNS_PER_ITEM:
        raise BadField(f"{where}: holds {turns} turns, more than the {MAX_TURNS_PER_ITEM} an item may hold", field)


def capped(text: str, stats: dict) -> str:
    """The text cut at MAX_TEXT_CHARS (counted in `stats["truncated_texts"]`)."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    stats["truncated_texts"] = stats.get("truncated_texts", 0) + 1
    return text[:MAX_TEXT_CHARS]


@contextmanager
def reading(where: str, field: str):
    """Any unexpected error while reading `field` becomes a BadField naming the item and the field."""
    try:
        yield
    except BadField:
        raise
    except Exception as exc:
        raise BadField(f"{where}: field {field!r} is malformed ({type(exc).__name__}: {exc})", field) from exc


class StreamedDataset:
    """A JSON array of items read as a stream; subclasses say how to name and build an item."""

    id_field = "id"

    def __init__(self, path: str | Path, profile: str = DEFAULT_SCORING_PROFILE, *, benchmark: Benchmark | None = None):
        self.path = Path(path)
        self.benchmark = benchmark or declaration_of(type(self))
        self.profile = profile

    def item_id(self, raw, index: int) -> str:
        raise NotImplementedError

    def build(self, raw, item_id: str) -> Item:
        raise NotImplementedError

    def scan(self) -> list[str]:
        """Read the file once for its item ids; refuse duplicates, naming both positions."""
        seen: dict[str, int] = {}
        for index, raw in enumerate(iter_array(self.path)):
            item_id = self.item_id(raw, index)
            if item_id in seen:
                raise DatasetError(f"{self.path}: duplicate {self.id_field} {item_id!r} at positions "
                                   f"{seen[item_id]} and {index}")
            seen[item_id] = index
        if not seen:
            raise DatasetError(f"{self.path}: the array holds no {self.benchmark.item_unit}s")
        return list(seen)

    def iter_items(self, limit: int | None = None) -> Iterator[Item]:
        elements = enumerate(iter_array(self.path))
        while True:
            started = time.perf_counter()  # reading the element from the file and building the item: parsing
            try:
                index, raw = next(elements)
            except StopIteration:
                return
            if limit is not None and index >= limit:
                return
            item_id = self.item_id(raw, index)
            try:
                item = self.build(raw, item_id)
                item.setdefault("stats", {})["parse_ms"] = round((time.perf_counter() - started) * 1000, 3)
            except BadField as bad:
                item = {"item_id": item_id, "benchmark": self.benchmark.name, "error": str(bad), "field": bad.field}
            except Exception as exc:  # one malformed item never sinks a run: it becomes a recorded failure
                item = {"item_id": item_id, "benchmark": self.benchmark.name, "field": None,
                        "error": f"{self.benchmark.item_unit} {item_id}: cannot be read ({type(exc).__name__}: {exc})"}
            yield item
