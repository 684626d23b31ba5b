"""How a farm run's progress reaches a person: redrawn in place on a terminal, one line per change otherwise.

The state comes from `coordinator.running.farm_run.progress` (counts, per-worker rates,
the slowest running items, an ETA from recent throughput). Warnings go
through the same object, so each is printed once however often it recurs.
Ids and worker names come from datasets and from Redis: they are printed with
their control characters escaped (`printable`).
"""

from __future__ import annotations

import sys
import time

from adapters.terminal import printable

BAR_WIDTH = 30


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def summary_line(state: dict) -> str:
    """One line: counts, throughput and ETA."""
    rate = state.get("throughput_per_minute")
    return (f"{state['finished']}/{state['total']} finished: done {state['done']}  running {state['running']}  "
            f"queued {state['queued']}  failed {state['failed']} ({state['final_failures']} final)"
            + (f"  {rate:.1f} items/min" if rate else "") + f"  ETA {duration(state.get('eta_seconds'))}")


def board(state: dict) -> list[str]:
    """The terminal view: a bar, one line per worker, the slowest running items."""
    filled = int(BAR_WIDTH * state["finished"] / state["total"]) if state["total"] else 0
    lines = [f"run {printable(state['run_id'])} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {summary_line(state)}"]
    for name, rate in (state.get("worker_rates") or {}).items():
        per_minute = f"{rate['per_minute']:.1f}/min" if rate.get("per_minute") else "-"
        lines.append(f"  {printable(name):<32} {rate['done']:>5} done  {per_minute:>9}")
    slowest = state.get("slowest") or []
    if slowest:
        lines.append("  slowest running: " + ", ".join(
            f"{printable(s['item_id'])} on {printable(s['worker'])} for {duration(s['age_seconds'])}"
            for s in slowest))
    return lines


class FarmProgress:
    """Shows each new state of a run; `live` (default: the stream is a terminal) redraws in place."""

    def __init__(self, stream=None, live: bool | None = None):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self._drawn = 0
        self._last_key = None
        self._warned: set[str] = set()

    def update(self, state: dict) -> None:
        if self.live:
            lines = board(state)
            if self._drawn:
                self.stream.write(f"\x1b[{self._drawn}F\x1b[J")  # back to the first line of the board, clear below
            self.stream.write("\n".join(lines) + "\n")
            self._drawn = len(lines)
        else:
            key = (state["total"], state["done"], state["running"], state["queued"], state["failed"],
                   state["final_failures"])
            if key == self._last_key:
                return
            self._last_key = key
            self.stream.write(f"run {printable(state['run_id'])}: {summary_line(state)}\n")
        self.stream.flush()

    def warn(self, message: str) -> None:
        """Print `message` once (control characters escaped); a repeat is dropped."""
        if message in self._warned:
            return
        self._warned.add(message)
        self._drawn = 0  # a warning moves the board down: draw it afresh below
        self.stream.write(f"warning: {printable(message)}\n")
        self.stream.flush()


class QuestionProgress:
    """Progress inside an item: a LoCoMo conversation or a RealMem persona is one item of many questions, asked
    for minutes. `line(item_id, done, total)` says how many are asked, at what rate and when the item ends;
    `due(done, total)` whether a line is worth printing where the output is no terminal (every `every` seconds,
    and the item's last question). `done` 0 is an item preparing before its first question (a persona's turns
    encoded ahead, minutes on a long one): said as such, and its time is not counted in the questions' rate."""

    def __init__(self, every: float = 30.0, clock=time.monotonic):
        self.every, self.clock = every, clock
        self.item, self.started, self.printed = None, 0.0, None

    def line(self, item_id: str, done: int, total: int) -> str:
        if done == 0:
            self.item, self.printed = None, None  # said at once; the questions' clock starts at the first one asked
            return f"{printable(item_id)}: encoding its history ahead, then {total} questions"
        now = self.clock()
        if item_id != self.item:
            self.item, self.started, self.printed = item_id, now, None
        elapsed = now - self.started
        rate = done / elapsed if elapsed > 0 else None
        eta = (total - done) / rate if rate else None
        return (f"{printable(item_id)}: {done}/{total} questions" + (f", {rate:.1f}/s" if rate else "")
                + f", ETA {duration(eta)}")

    def due(self, done: int, total: int) -> bool:
        now = self.clock()
        if done >= total or self.printed is None or now - self.printed >= self.every:
            self.printed = now
            return True
        return False


class ItemProgress:
    """Progress over a run's items where the output is no terminal (a log, a pipe): `line(done, total)` says how many
    items are finished, at what rate and when the run ends, and `due(done, total)` whether a line is worth printing
    (every `every` seconds, and the last item). A terminal has the bar instead."""

    def __init__(self, every: float = 30.0, clock=time.monotonic):
        self.every, self.clock = every, clock
        self.started, self.printed = clock(), None

    def line(self, done: int, total: int) -> str:
        elapsed = self.clock() - self.started
        rate = done / elapsed if elapsed > 0 and done else None
        eta = (total - done) / rate if rate else None
        return (f"items: {done}/{total} finished" + (f", {rate * 60:.1f}/min" if rate else "")
                + f", ETA {duration(eta)}")

    def due(self, done: int, total: int) -> bool:
        now = self.clock()
        if done >= total or (self.printed is None and now - self.started >= self.every) or (
                self.printed is not None and now - self.printed >= self.every):
            self.printed = now
            return True
        return False

