"""`memfarm check-system`: does a system keep the contract a benchmark relies on? Checked on a small built-in set.

A vendor runs it on their own system before publishing a number. Each check passes or fails with its
reason: every external id comes back exactly as given; nothing of one label is returned for another
(also with two labels in flight at once, on a server); a reset forgets its label (and on a server, only
its label); no more hits than top_k; no unknown or repeated ids; the same ranking for the same question;
finite scores. Latency p50 / p95 per call is reported beside them.

The set is two groups of docs on the same topics in other words, under two labels of one item (sharing
their prefix, as a retry's labels do), so that a system whose labels leak finds the other group's docs for
every question; after a reset the first group comes back with the same
texts under new ids, so that a system whose reset forgets nothing returns the old ids.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
import time
from collections.abc import Callable

from adapters.errors import MemfarmError
from adapters.percentile import percentile
from adapters.systems.http_client import finite_number
from adapters.terminal import printable

logger = logging.getLogger(__name__)

_FIRST = (
    "Caroline went hiking in the mountains with her sister last weekend.",
    "Melanie painted a lake at sunrise and hung it in the kitchen.",
    "The pottery class on Tuesday evenings taught us to throw a bowl.",
    "My grandmother's recipe for plum cake needs a pinch of cardamom.",
    "We adopted a grey rescue cat called Pepper in March.",
    "The violin recital at the community hall sold out in a day.",
    "Jon started a bakery after losing his job at the bank.",
    "Our camping trip to the coast was cut short by a storm.",
    "She volunteers at the shelter every Saturday morning.",
    "The marathon training plan asks for a long run on Sundays.",
)
_SECOND = (
    "Last weekend Caroline and her sister walked mountain trails.",
    "At sunrise Melanie painted the lake; the canvas hangs by the kitchen window.",
    "On Tuesday evenings a pottery class showed how to throw a bowl on the wheel.",
    "A pinch of cardamom is the secret of the plum cake my grandmother made.",
    "In March we took home Pepper, a grey cat from the rescue.",
    "Tickets for the violin recital in the community hall went in a day.",
    "After the bank let him go, Jon opened a small bakery.",
    "A storm ended our camping trip on the coast early.",
    "Every Saturday morning she helps out at the animal shelter.",
    "Sunday is the long run in the marathon training plan.",
)

#: The checks, in the order they are reported.
CHECKS = ("info", "calls answered", "ids round-trip", "labels isolated", "labels isolated in flight",
          "reset isolates", "top_k respected", "no unknown or repeated ids", "same ranking twice", "finite scores")


def _run_like_labels() -> tuple[str, str, str]:
    """Two labels and what ids start with, shaped as a run's on the wire, `item-<12 hex>.<12 hex>` and
    `item-<12 hex>`: a server must not be able to tell the check from a run and behave only for the check. The
    two share their `item-<12 hex>` part, as two attempts of one item do (a retry, a second run at once): a
    server must keep whole labels apart, not what they start with."""
    base = f"item-{secrets.token_hex(6)}"
    return f"{base}.{secrets.token_hex(6)}", f"{base}.{secrets.token_hex(6)}", base


def _docs(id_base: str, texts, start: int = 0) -> list[dict]:
    return [{"external_id": f"{id_base}-{start + n:06d}", "text": text, "props": {"speaker": "A" if n % 2 else "B",
                                                                               "turn_index": n}}
            for n, text in enumerate(texts)]


class WireDriver:
    """The checks' calls on a server, straight on the wire (labels as given)."""

    concurrent = True

    def __init__(self, client):
        self.client = client
        self.latencies = client.latencies

    def info(self) -> dict:
        return self.client.info()

    def reset(self, label: str) -> None:
        self.client.reset(label)

    def ingest(self, label: str, docs: list[dict]) -> None:
        """As a run ingests: a failure that may pass (no answer, 5xx, 429) resets the label and ingests again, so
        that a server a run would get through does not fail the check on one busy answer. The check ingests a
        label only right after its reset: reset, then these docs, is the label's whole content."""
        from adapters.systems.http_client import HttpSystemError

        client = self.client
        half = (len(docs) + 1) // 2  # two calls, as a run sends a long conversation: the second adds to the first
        for attempt in range(client.retries + 1):
            try:
                if attempt:
                    client.reset(label)
                for start in range(0, len(docs), max(half, 1)):
                    client.ingest(label, docs[start:start + half])
                return
            except HttpSystemError as exc:
                if not exc.retryable or attempt == client.retries:
                    raise exc.after(attempt + 1) from None
                client.pause(attempt, "ingest (the label again: reset, then its docs)", exc)

    def retrieve(self, label: str, query: str, top_k: int) -> list:
        return self.client.retrieve(label, query, top_k)


class PythonDriver:
    """The checks' calls on an in-process system: its `reset()` forgets every label, so both labels are ingested
    after one reset, and nothing runs at once (a Python system is called by one thread)."""

    concurrent = False

    def __init__(self, system):
        self.system = system
        self.latencies: dict[str, list[float]] = {}

    def _timed(self, call: str, function: Callable, *args):
        started = time.perf_counter()
        try:
            return function(*args)
        finally:
            self.latencies.setdefault(call, []).append((time.perf_counter() - started) * 1000)

    def info(self) -> dict:
        from adapters.systems import describe
        from adapters.systems.contract import name_of, version_of

        name = name_of(self.system)
        if not name:
            raise MemfarmError("the system has no str `name`")
        return {"name": name, "version": version_of(self.system), "config": describe(self.system)}

    def reset(self, label: str) -> None:
        self._timed("reset", self.system.reset)

    def ingest(self, label: str, docs: list[dict]) -> None:
        self._timed("ingest", self.system.ingest, [{**doc, "label": label} for doc in docs])

    def retrieve(self, label: str, query: str, top_k: int) -> list:
        hits = self._timed("retrieve", self.system.retrieve, label, query, top_k)
        return list(hits) if isinstance(hits, (list, tuple)) else hits


class _Calls:
    """Every retrieve of a check run, with the ids its label may return."""

    def __init__(self):
        self.lock = threading.Lock()
        self.answers: list[tuple[str, str, int, list]] = []

    def ask(self, driver, label: str, query: str, top_k: int) -> list:
        hits = driver.retrieve(label, query, top_k)
        with self.lock:
            self.answers.append((label, query, top_k, hits))
        return hits


def _reason(exc: Exception) -> str:
    """What a failed call says: the harness's own errors as they are, anything else with its type."""
    text = str(exc) if isinstance(exc, MemfarmError) else f"{type(exc).__name__}: {exc}"
    return printable(text)[:400]


def _ids(hits) -> list:
    return [hit.get("external_id") if isinstance(hit, dict) else None for hit in hits or []]


def run_checks(driver) -> dict:
    """Run every check against `driver`; {"passed", "info", "checks": [{check, passed, detail}],
    "latency_ms": [{call, calls, p50_ms, p95_ms}]}."""
    first, second, base = _run_like_labels()
    # ids apart: the first label's, then its ids after the reset (the same texts), then the second label's
    docs = {first: _docs(base, _FIRST), second: _docs(base, _SECOND, start=2 * len(_FIRST))}
    again = _docs(base, _FIRST, start=len(_FIRST))
    results: dict[str, tuple[bool | None, str]] = {name: (None, "not run: an earlier call failed") for name in CHECKS}
    calls = _Calls()
    info = None
    try:
        info = driver.info()
    except Exception as exc:  # nothing else is asked of a system that cannot say what it is
        results["info"] = (False, _reason(exc))
        results["calls answered"] = (False, "not run: info failed")
        return _report(results, info, driver)
    results["info"] = (True, f"{printable(info['name'])} {printable(info['version'])}".strip())
    try:
        _load_and_ask(driver, docs, calls)
        repeat = [calls.ask(driver, first, text, len(_FIRST)) for text in _FIRST[:3]]
        for k in (1, 2, 3):  # fewer than the texts it shares words with: a system must cut its list
            calls.ask(driver, second, _SECOND[0] + " " + _SECOND[1], k)
        reset = _reset_and_ask(driver, docs, again, calls)
    except Exception as exc:  # a call that failed: the checks that need its answer are not run
        results["calls answered"] = (False, _reason(exc))
        return _report(results, info, driver)
    results["calls answered"] = (True, f"{sum(len(v) for v in driver.latencies.values())} calls")
    known = {doc["external_id"] for group in (*docs.values(), again) for doc in group}
    results.update(_judge(calls, docs, known, repeat, reset, driver.concurrent))
    for label in docs:  # leave nothing behind on a server (an in-process system goes with this process)
        if driver.concurrent:
            try:
                driver.reset(label)
            except Exception as exc:  # the verdicts stand; say why the labels stay
                logger.warning("could not reset %s after the checks: %s", label, exc)
    return _report(results, info, driver)


def _load_and_ask(driver, docs: dict, calls: _Calls) -> None:
    """Reset and ingest both labels, then ask each label its own texts and the other's; on a server each label
    in a thread of its own, at once."""
    labels = list(docs)
    if not driver.concurrent:
        driver.reset(labels[0])
        for label in labels:
            driver.ingest(label, docs[label])
        for label in labels:
            _ask_all(driver, label, docs, calls)
        return
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(labels))

    def one(label):
        try:
            driver.reset(label)
            barrier.wait(timeout=60)  # both labels reset before either is filled: both in flight from here
            driver.ingest(label, docs[label])
            _ask_all(driver, label, docs, calls)
        except BaseException as exc:  # noqa: BLE001  (handed to the caller below)
            barrier.abort()
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(label,)) for label in labels]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if errors:
        raise (real or errors)[0]


def _ask_all(driver, label: str, docs: dict, calls: _Calls) -> None:
    size = len(docs[label])
    for group in docs.values():
        for doc in group:
            calls.ask(driver, label, doc["text"], size)


def _reset_and_ask(driver, docs: dict, again: list[dict], calls: _Calls) -> dict:
    """Reset the first label, ask it at once, fill it again with the same texts under new ids, ask again."""
    first, second = list(docs)
    driver.reset(first)
    emptied = [calls.ask(driver, first, doc["text"], len(again)) for doc in docs[first]]
    driver.ingest(first, again)
    refilled = [calls.ask(driver, first, doc["text"], len(again)) for doc in again]
    kept = [calls.ask(driver, second, doc["text"], len(docs[second])) for doc in docs[second]] \
        if driver.concurrent else None
    return {"emptied": emptied, "refilled": refilled, "kept": kept}


def _judge(calls, docs, known, repeat, reset, concurrent) -> dict:
    first, second = list(docs)
    old = {doc["external_id"] for doc in docs[first]}
    owner = {doc["external_id"]: label for label, group in docs.items() for doc in group}
    verdicts = {}
    loaded = calls.answers[:sum(len(g) for g in docs.values()) * len(docs)]

    found = {eid for label, _, _, hits in loaded for eid in _ids(hits) if owner.get(eid) == label}
    missing = sorted(set(owner) - found)
    verdicts["ids round-trip"] = (not missing, f"{len(owner)} ids, each asked for by its own text" if not missing
                                  else f"{len(missing)} of {len(owner)} ids never came back, e.g. {missing[:3]}")

    everyone = {**owner, **{eid: first for eid in known - set(owner)}}  # the ids after the reset: the first label's
    foreign = _foreign(loaded, everyone)
    detail = (f"{len(loaded)} questions, each label asked the other's texts too" if not foreign else
              f"{len(foreign)} hits of another label, e.g. {foreign[0][1]!r} returned for label {foreign[0][0]!r}")
    if concurrent:
        later = _foreign(calls.answers[len(loaded):], everyone)
        verdicts["labels isolated"] = (not later, f"{len(calls.answers) - len(loaded)} questions one at a time" if not
                                       later else f"{len(later)} hits of another label, e.g. {later[0][1]!r}")
        verdicts["labels isolated in flight"] = (not foreign, detail)
    else:
        verdicts["labels isolated"] = (not foreign, detail)
        verdicts["labels isolated in flight"] = (None, "not applicable: an in-process system is called by one thread")

    stale = [eid for hits in reset["emptied"] + reset["refilled"] for eid in _ids(hits) if eid in old]
    reset_problems = [f"{len(stale)} hits of ids ingested before the reset, e.g. {stale[0]!r}"] if stale else []
    if not any(_ids(hits) for hits in reset["refilled"]):
        reset_problems.append("nothing ingested after the reset came back")
    if reset["kept"] is not None:
        lost = {doc["external_id"] for doc in docs[second]} - {eid for hits in reset["kept"] for eid in _ids(hits)}
        if lost:
            reset_problems.append(f"resetting one label lost {len(lost)} ids of another, e.g. {sorted(lost)[0]!r}")
    verdicts["reset isolates"] = (not reset_problems, "; ".join(reset_problems) or
                                  "nothing from before a reset came back; the label filled again"
                                  + ("; the other label kept" if reset["kept"] is not None else ""))

    over = [(k, len(hits)) for _, _, k, hits in calls.answers if isinstance(hits, list) and len(hits) > k]
    not_lists = sum(1 for *_, hits in calls.answers if not isinstance(hits, list))
    verdicts["top_k respected"] = (not over and not not_lists,
                                   f"{len(calls.answers)} answers, top_k 1 to {len(_FIRST)}" if not over else
                                   f"{len(over)} answers over top_k, e.g. {over[0][1]} hits for top_k={over[0][0]}")
    if not_lists:
        verdicts["top_k respected"] = (False, f"{not_lists} answers were not lists of hits")

    unknown, repeated = [], []
    for _, _, _, hits in calls.answers:
        ids = _ids(hits)
        unknown += [eid for eid in ids if eid not in known]
        repeated += [eid for eid in set(i for i in ids if i in known) if ids.count(eid) > 1]
    problems = ([f"{len(unknown)} unknown ids, e.g. {unknown[0]!r}"] if unknown else []) + \
               ([f"{len(repeated)} ids repeated within one answer, e.g. {repeated[0]!r}"] if repeated else [])
    verdicts["no unknown or repeated ids"] = (not problems, "; ".join(problems) or "every id was one given, once")

    firsts = {query: hits for label, query, k, hits in loaded if label == first}
    changed = [n for n, (text, hits) in enumerate(zip(_FIRST, repeat)) if not _same_ranking(hits, firsts.get(text))]
    verdicts["same ranking twice"] = (not changed, f"{len(repeat)} questions asked twice" if not changed else
                                      f"{len(changed)} of {len(repeat)} questions ranked otherwise the second time")

    bad = [hit.get("score") if isinstance(hit, dict) else hit for *_, hits in calls.answers for hit in hits or []
           if not (isinstance(hit, dict) and finite_number(hit.get("score")))]
    verdicts["finite scores"] = (not bad, "every score a finite number" if not bad else
                                 f"{len(bad)} scores are not finite numbers, e.g. {printable(repr(bad[0]))[:40]}")
    return verdicts


def _foreign(answers, owner: dict) -> list[tuple[str, str]]:
    """(label, id) of every hit whose id belongs to another label."""
    return [(label, eid) for label, _, _, hits in answers for eid in _ids(hits) if eid in owner and owner[eid] != label]


def _same_ranking(one, other) -> bool:
    """The same ids in the same order, each score equal up to float rounding: a server summing in another order
    (threads, a BLAS, float32) ranks the same, and a run scores the order, not the scores' last bits."""
    if _ranking(one) == _ranking(other):
        return True
    if _ids(one) != _ids(other):
        return False
    scores = [[hit.get("score") if isinstance(hit, dict) else None for hit in hits or []] for hits in (one, other)]
    return all(finite_number(a) and finite_number(b) and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
               for a, b in zip(*scores))


def _ranking(hits) -> list:
    """Ids and scores in order; a score by its repr, so that a NaN equals itself (the finite check judges it)."""
    return [(hit.get("external_id"), repr(hit.get("score"))) if isinstance(hit, dict) else hit for hit in hits or []]


_RESULT = {True: "pass", False: "FAIL", None: "-"}


def _report(results: dict, info, driver) -> dict:
    checks = [{"check": name, "passed": passed, "result": _RESULT[passed], "detail": detail}
              for name, (passed, detail) in results.items()]
    latency = [{"call": call, "calls": len(values), "p50_ms": round(percentile(values, 0.5), 3),
                "p95_ms": round(percentile(values, 0.95), 3)}
               for call, values in sorted(driver.latencies.items()) if values]
    return {"passed": all(c["passed"] is not False for c in checks) and results["calls answered"][0] is True,
            "info": info, "checks": checks, "latency_ms": latency}


def check_system(spec: str, *, timeout: float | None = None) -> dict:
    """The conformance report of the system `spec` names (a server's URL, a built-in name or `module:Class`)."""
    from adapters.systems import make_system
    from adapters.systems.http_client import HttpClient, canonical_url, is_http_system

    if is_http_system(spec):
        client = HttpClient(spec, timeout=timeout)
        report = run_checks(WireDriver(client))
        report["system"] = canonical_url(spec)
    else:
        report = run_checks(PythonDriver(make_system(spec)))
        report["system"] = spec
    return report


def report_table(report: dict) -> str:
    """The report as a table: each check, pass / FAIL / n/a, and why; then each call's latency."""
    lines = [f"system {report['system']}", f"{'check':<28}{'result':<8}detail"]
    for check in report["checks"]:
        lines.append(f"{check['check']:<28}{check['result']:<8}{check['detail']}")
    for numbers in report["latency_ms"]:
        lines.append(f"{'latency ' + numbers['call']:<28}{'':<8}p50 {numbers['p50_ms']:.2f} ms  "
                     f"p95 {numbers['p95_ms']:.2f} ms  ({numbers['calls']} calls)")
    failed = sum(1 for c in report["checks"] if c["passed"] is False)
    lines.append("conforms" if report["passed"] else f"does not conform: {failed} check(s) failed")
    return "\n".join(lines)
