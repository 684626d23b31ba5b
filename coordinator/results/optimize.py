"""Weight optimisation for the `full` ranking, from a run's own records.

Coordinate ascent: move one weight at a time by `step`, keep a move only if
the objective (session ndcg_any@10 by default) improves over the evaluated
questions. Candidates are re-scored from the signal values each record
stores, so no model or index is touched; only the candidates a run kept
(its top_k) can move, which makes the objective an estimate on that pool.
"""

from __future__ import annotations

import math
import unicodedata
from pathlib import Path

from adapters.defaults import DEFAULT_OBJECTIVE
from adapters.errors import ResultsError
from adapters.files import read_json
from adapters.metrics import question_metrics
from memoria.ranking import KNOWN_SIGNALS
#: Multiples of the step tried, in order, while the objective stays flat.
PLATEAU_STEPS = (1, 2, 4, 8)


def _prepared(records: list[dict]) -> list[dict]:
    questions = []
    for record in records:
        if not record.get("metrics") or not record.get("candidates"):
            continue
        rows = []
        for candidate in record["candidates"]:
            ranking = candidate.get("diagnostics", {}).get("ranking")
            if not ranking:
                raise ResultsError(f"question {record['question_id']}: candidates carry no ranking signals "
                                   "(optimise runs made with --retrieval-mode full)")
            rows.append((candidate["rank"], candidate["metadata"]["turn_id"], candidate["metadata"]["session_id"],
                         ranking["signals"]))
        questions.append({"rows": rows, "gold_sessions": record["gold"]["sessions"], "gold_turns": record["gold"]["turns"]})
    if not questions:
        raise ResultsError("no evaluated question with candidates to optimise on")
    return questions


def objective(questions: list[dict], weights: dict[str, float], name: str = DEFAULT_OBJECTIVE) -> float:
    level, metric = name.split(":", 1)
    k = int(metric.split("@")[1])
    total = 0.0
    for q in questions:
        scored = sorted(q["rows"], key=lambda r: (-sum(weights.get(s, 0.0) * v for s, v in r[3].items()), r[0]))
        turns = [r[1] for r in scored]
        session_of = {r[1]: r[2] for r in scored}
        metrics = question_metrics(turns, session_of, q["gold_sessions"], q["gold_turns"], k_values=(k,))
        total += (metrics[level] or {}).get(metric, 0.0)
    return total / len(questions)


def run_weights(results: dict) -> dict[str, float]:
    """The ranking weights a run used (`settings_system.ranking.weights`): what tuning starts from. A run that ranks
    by no weights (an arm, an outside system, a Memoria mode other than `full`) has none, said in one line."""
    system = results.get("settings_system") if isinstance(results.get("settings_system"), dict) else {}
    ranking = system.get("ranking") if isinstance(system.get("ranking"), dict) else {}
    weights = ranking.get("weights")
    if not isinstance(weights, dict) or not weights:
        raise ResultsError(f"{results.get('_path') or 'results file'}: system {system.get('name')!r} "
                           f"(mode {system.get('retrieval_mode')!r}) ranks by no weights (no field "
                           "settings_system.ranking.weights); optimize tunes runs of --system memoria "
                           "--retrieval-mode full")
    return weights


def optimise(records: list[dict], weights: dict[str, float], step: float = 0.02, objective_name: str = DEFAULT_OBJECTIVE,
             max_rounds: int = 25) -> dict:
    """Proposed weights, the objective before and after, and every accepted move."""
    if step <= 0:
        raise ValueError("step size must be positive")
    questions = _prepared(records)
    current = {name: float(weights.get(name, 0.0)) for name in KNOWN_SIGNALS}
    best = start = objective(questions, current, objective_name)
    moves = []
    for _ in range(max_rounds):
        improved = False
        for name in KNOWN_SIGNALS:
            moved = False
            for direction in (+1, -1):
                # one step first; on a plateau (no change at all) a few steps further the same way
                for multiple in PLATEAU_STEPS:
                    trial = dict(current)
                    trial[name] = round(max(0.0, trial[name] + direction * multiple * step), 6)
                    if trial[name] == current[name]:
                        break
                    value = objective(questions, trial, objective_name)
                    if value > best + 1e-9:
                        moves.append({"signal": name, "from": current[name], "to": trial[name], "objective": value})
                        current, best, improved, moved = trial, value, True, True
                        break
                    if value < best - 1e-9:
                        break
                if moved:
                    break
        if not improved:
            break
    return {"objective": objective_name, "questions": len(questions), "before": start, "after": best,
            "weights_before": {n: float(weights.get(n, 0.0)) for n in KNOWN_SIGNALS}, "weights": current, "moves": moves,
            "step_size": step}


#: The metrics a held-out check reports, the strict one first.
HELD_OUT_METRICS = ("session:recall_all@5", "session:recall_any@5", "session:ndcg_any@10", "turn:recall_any@10")


def scored_items(records: list[dict]) -> list[str]:
    """The ids, sorted, of the items with a record tuning can read: scored, with its candidates."""
    return sorted({r["item_id"] for r in records
                   if isinstance(r.get("item_id"), str) and r.get("metrics") and r.get("candidates")})


def held_out(records: list[dict], weights: dict[str, float], folds: int = 5, step: float = 0.02,
             objective_name: str = DEFAULT_OBJECTIVE) -> dict:
    """Whether tuning carries to data it was not tuned on: the items (conversations, questions) are dealt into
    `folds` groups by sorted id; each group is scored with the starting weights and with weights tuned on the
    other groups. A gain that shows only in-sample and not here is the development data's, not the ranking's."""
    items = scored_items(records)
    if len(items) < 2:
        raise ResultsError("a held-out check needs evaluated questions from two items at least")
    folds = min(folds, len(items))
    fold_of = {item: i % folds for i, item in enumerate(items)}
    totals = {name: {"before": 0.0, "held_out": 0.0} for name in HELD_OUT_METRICS}
    count = 0
    per_fold = []
    for fold in range(folds):
        train = [r for r in records if fold_of.get(r["item_id"]) not in (fold, None)]
        test = _prepared([r for r in records if fold_of.get(r["item_id"]) == fold])
        tuned = optimise(train, weights, step=step, objective_name=objective_name)["weights"]
        scores = {name: {"before": objective(test, weights, name), "held_out": objective(test, tuned, name)}
                  for name in HELD_OUT_METRICS}
        for name, pair in scores.items():
            for key, value in pair.items():
                totals[name][key] += value * len(test)
        count += len(test)
        per_fold.append({"items": [item for item in items if fold_of[item] == fold], "questions": len(test),
                         "tuned_weights": {name: round(value, 6) for name, value in tuned.items()},
                         "metrics": scores})
    return {"folds": folds, "items": len(items), "questions": count, "objective": objective_name, "step": step,
            "weights": dict(weights), "per_fold": per_fold,
            "metrics": {name: {key: value / count for key, value in pair.items()} for name, pair in totals.items()}}


#: What a results file, its closing table and `compare` say of a run whose weights were tuned on its own dataset.
TUNED_LABEL = "tuned on this data"


#: How many earlier tunings a weights file's `tuned_on` chain is read through.
TUNED_ON_DEPTH = 100


def tuned_on(results: dict, report: dict) -> dict:
    """What a weights file records of the data it was tuned on: a run on the same checksum is not held out.
    Weights the run started from that were themselves tuned are kept as `started_from`: tuned on B from
    weights tuned on A, they were tuned on A too."""
    record = {"dataset_checksum": results.get("dataset_checksum"), "benchmark": results.get("benchmark_key"),
              "scoring_profile": results.get("scoring_profile"), "questions": report["questions"],
              "objective": report["objective"]}
    files = results.get("dataset_file_checksums")
    if isinstance(files, list) and files:  # a folder: each of its files was tuned on too
        record["file_checksums"] = files
    items = scored_items(results.get("records") or [])
    if items:  # a conversation or persona tuned on is known by its id in another file too (cut, or among others)
        record["items"] = items
    earlier = (results.get("tuning") or {}).get("tuned_on")
    if isinstance(earlier, dict):
        record["started_from"] = earlier
    return record


def _tuned_on(origin: dict | None) -> tuple[set, dict]:
    """The checksums (datasets' and files') and the item ids, by benchmark, of a `tuned_on` chain."""
    checksums, items = set(), {}
    for _ in range(TUNED_ON_DEPTH):
        if not isinstance(origin, dict):
            break
        checksums.update(_texts([origin.get("dataset_checksum")]) + _texts(origin.get("file_checksums")))
        benchmark = origin.get("benchmark") if isinstance(origin.get("benchmark"), str) else None
        items.setdefault(benchmark, set()).update(_texts(origin.get("items")))
        origin = origin.get("started_from")
    return checksums, items


def tuned_on_items(path: str | Path) -> dict[str, set[str]]:
    """The item ids, by benchmark, that the weights file at `path` names as tuned on (its `tuned_on` chain); {} where
    it names none."""
    data = read_json(path, "weights file", ResultsError)
    origin = data.get("tuned_on") if isinstance(data, dict) else None
    return {benchmark: ids for benchmark, ids in _tuned_on(origin)[1].items() if benchmark and ids}


def _texts(value) -> list[str]:
    """The strings of a list a hand-edited weights file may hold; anything else is no checksum and no id."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


#: The tuned weights files the harness ships (a benchmark's own, `Benchmark.memoria_weights`).
SHIPPED_WEIGHTS = Path(__file__).resolve().parent.parent.parent / "adapters" / "weights"
#: Largest size a weight may have: the signals are scores near [0, 1], and a weight of 1e308 overflows them.
MAX_WEIGHT = 1000.0


def tuning_record(path: str | Path, dataset_sha256: str, file_checksums=(), item_ids=None,
                  benchmark: str | None = None) -> dict:
    """A run's `tuning` block: its weights file, the data that file was tuned on (None: not said), and whether
    that is this run's data: its dataset's checksum, or (a folder, or a file of one, tuned on) any of its files',
    or, on the same benchmark, any of its items (`item_ids()`, read only where no checksum says so already: a
    development persona cut to fewer sessions, a tuned conversation in a larger file).

    What marks the tuning is the weights' values and the data, not names: weights whose values are a shipped tuned
    file's (a copy with its `tuned_on` left out) were tuned where that file says (`same_weights_as`), and item ids
    are compared as `comparable_id` writes them (a zero-width space or a compatibility form hides no persona)."""
    data = read_json(path, "weights file", ResultsError)
    origin = data.get("tuned_on") if isinstance(data, dict) and isinstance(data.get("tuned_on"), dict) else None
    shipped = None
    if origin is None:
        shipped = _shipped_tuning(data.get("weights", data) if isinstance(data, dict) else None)
        origin = shipped[1] if shipped else None
    checksums, items = _tuned_on(origin)
    same = dataset_sha256 in checksums or bool(checksums & set(file_checksums))
    common = []
    if not same and items.get(benchmark) and item_ids is not None:
        tuned = {comparable_id(i) for i in items[benchmark]}
        common = sorted(i for i in item_ids() if comparable_id(i) in tuned)
        same = bool(common)
    return {"weights_file": str(path), "tuned_on": origin, "tuned_on_this_data": same,
            "label": TUNED_LABEL if same else None, **({"items_tuned_on": common} if common else {}),
            **({"same_weights_as": shipped[0]} if shipped else {})}


def comparable_id(item_id: str) -> str:
    """An item id as tuning compares it: format characters (Unicode category Cf: zero-width spaces and joiners,
    bidirectional marks) removed, NFKC-normalised, case-folded and stripped."""
    kept = "".join(c for c in unicodedata.normalize("NFKC", item_id) if unicodedata.category(c) != "Cf")
    return unicodedata.normalize("NFKC", kept).casefold().strip()


def _shipped_tuning(weights) -> tuple[str, dict] | None:
    """(file name, its `tuned_on`) of the shipped tuned weights file whose values `weights` holds, or None.
    A signal one side leaves out counts as 0 on that side."""
    if not isinstance(weights, dict) or not all(_is_number(v) for v in weights.values()):
        return None
    for file in sorted(SHIPPED_WEIGHTS.glob("*.json")):
        known = read_json(file, "weights file", ResultsError)
        theirs, origin = known.get("weights"), known.get("tuned_on")
        if not isinstance(theirs, dict) or not isinstance(origin, dict):
            continue
        if all(math.isclose(float(weights.get(n, 0.0)), float(theirs.get(n, 0.0)), rel_tol=1e-9, abs_tol=1e-12)
               for n in set(weights) | set(theirs)):
            return file.name, origin
    return None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def load_weights(path: str | Path) -> dict[str, float]:
    """The weights of a weights file ({signal: number} or {"weights": {...}}): known signals, finite numbers of
    size at most `MAX_WEIGHT`; anything else refused in one line naming the file and the signal."""
    data = read_json(path, "weights file", ResultsError)
    weights = data.get("weights", data) if isinstance(data, dict) else None
    if not isinstance(weights, dict) or not all(_is_number(v) for v in weights.values()):
        raise ResultsError(f"{path}: expected {{signal: number}} (or {{'weights': {{...}}}})")
    unknown = set(weights) - set(KNOWN_SIGNALS)
    if unknown:
        raise ResultsError(f"{path}: unknown signals {sorted(unknown)}; known: {sorted(KNOWN_SIGNALS)}")
    for name, value in weights.items():
        if not math.isfinite(value) or abs(value) > MAX_WEIGHT:
            raise ResultsError(f"{path}: signal {name}: weight {value!r} is not a finite number of size at most "
                               f"{MAX_WEIGHT:g}")
    return {k: float(v) for k, v in weights.items()}
