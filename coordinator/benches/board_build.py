"""`memfarm bench board`: how long `memfarm board` takes, and how big its folder grows, for many runs of many
questions (500 questions x 10 runs by default, LongMemEval-S's size).

The runs are generated (the benchmark's shape, no model): each question has
sessions of turns with a few gold turns, each run ranks them with its own
skill plus noise, and the records and results files come from the harness's
own `question_record` and reducer, so the board reads exactly what a run
writes. The build is timed as a `memfarm board` child process, as a user runs it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import os
import subprocess
import sys
import time

from coordinator.benches.common import fresh_workdir, write_bench

#: Sessions per question and turns per session of a generated question (LongMemEval-S: ~48 sessions).
SESSIONS, TURNS = 48, 10
#: Characters of a generated turn, low and high (LongMemEval-S's turns run from a line to a page).
TEXT_RANGE = (120, 1200)
TYPES = ("single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
         "knowledge-update", "temporal-reasoning")
WORDS = ("the", "a", "trip", "garden", "meeting", "on", "Tuesday", "my", "sister", "recipe", "booked", "car",
         "project", "deadline", "coffee", "moved", "to", "Lisbon", "in", "March", "and", "we", "talked", "about")


def _text(rng: np.random.Generator) -> str:
    length = int(rng.integers(*TEXT_RANGE))
    words = rng.choice(WORDS, size=length // 5 + 1)
    return " ".join(words)[:length]


def generated_questions(questions: int, seed: int) -> list[dict]:
    """Questions in LongMemEval-S's shape: gold sessions (1-3) and one gold turn in each."""
    rng = np.random.default_rng(seed)
    out = []
    for index in range(questions):
        gold_sessions = sorted({int(s) for s in rng.choice(SESSIONS, size=int(rng.integers(1, 4)), replace=False)})
        out.append({"question_id": f"q{index:04d}", "question": f"What did I say about {_text(rng)[:60]}?",
                    "expected": "in March", "question_type": TYPES[index % len(TYPES)],
                    "gold_sessions": [f"s{index}_{s}" for s in gold_sessions],
                    "gold_turns": [f"s{index}_{s}:{int(rng.integers(TURNS))}" for s in gold_sessions]})
    return out


def generated_runs(questions: int, runs: int, seed: int = 0, top_k: int = 50) -> list[tuple[dict, dict]]:
    """(results, manifest) of `runs` generated runs of the same `questions`, run i a little better than i+1."""
    from adapters.defaults import EXPECTED_TEXT_PROFILE, K_VALUES
    from adapters.records import candidate, outcome, question_record
    from coordinator.running.reducer import reduce_run
    from workers.item.run_context import RunContext

    asked = generated_questions(questions, seed)
    texts_rng = np.random.default_rng(seed + 1)
    texts = [_text(texts_rng) for _ in range(200)]  # a pool: generating 240k distinct texts would time the generator
    made = []
    for number in range(runs):
        rng = np.random.default_rng(seed * 1000 + number)
        skill = 2.5 - 1.8 * number / max(1, runs - 1)
        outcomes = []
        for q in asked:
            index = int(q["question_id"][1:])
            ids = [(f"s{index}_{s}", f"s{index}_{s}:{t}") for s in range(SESSIONS) for t in range(TURNS)]
            scores = rng.normal(size=len(ids))
            gold = set(q["gold_turns"])
            scores += np.array([skill * rng.random() * 2 if turn in gold else 0.0 for _, turn in ids])
            order = np.argsort(-scores, kind="stable")[:top_k]
            candidates = [candidate(rank, f"d{int(i)}", session_id=ids[int(i)][0], turn_id=ids[int(i)][1],
                                    text=texts[(int(i) + index) % len(texts)], score=float(scores[int(i)]),
                                    final_score=float(scores[int(i)]))
                          for rank, i in enumerate(order, start=1)]
            record = question_record(q, q["question_id"], candidates, level="turn", k_values=K_VALUES,
                                     profile=EXPECTED_TEXT_PROFILE, runtime_ms=float(rng.uniform(5, 40)),
                                     worker="bench", attempt=1)
            outcomes.append(outcome(q["question_id"], [record]))
        context = RunContext(
            benchmark="longmemeval", benchmark_title="LongMemEval-S (generated)", group_key="question_type",
            dataset_path="generated", dataset_sha256=f"{seed:064x}",
            system_config={"name": f"system{number}", "retrieval_mode": "generated", "skill": skill},
            embedding_signature={"model_id": "generated", "dimension": 0},
            scoring_profile=EXPECTED_TEXT_PROFILE, top_k=top_k, k_values=K_VALUES,
            command="memfarm bench board")
        made.append(reduce_run(outcomes, context, commit="generated",
                               elapsed_seconds=questions * (0.5 + number * 0.3)))
    return made


def write_generated_runs(directory: Path, questions: int, runs: int, seed: int = 0) -> list[Path]:
    from coordinator.running.reducer import write_results

    paths = []
    for number, (results, manifest) in enumerate(generated_runs(questions, runs, seed)):
        path, _ = write_results(results, manifest, directory / f"run{number:02d}.json")
        paths.append(path)
    return paths


def timed_memfarm(args: list[str]) -> dict:
    """Wall seconds, CPU seconds (user + system) and peak RSS of one `memfarm ARGS` child.

    CPU time is reported beside wall time because this machine's cores are
    shared: wall time grows with other people's load, CPU time much less.
    """
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "coordinator.cli", *args], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    error = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if child.returncode != 0:
        raise RuntimeError(f"memfarm {' '.join(args[:2])} ... failed (exit {child.returncode}): {error[-500:]}")
    return {"wall_seconds": wall, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_bytes": usage.ru_maxrss * 1024}


def run_board_bench(questions: int, runs: int, workdir: str | Path, output) -> str:
    """Time `memfarm board` over generated runs; write the bench file and return its table (with the load
    average before and after: the build's wall time is only as good as the machine was quiet)."""
    workdir = fresh_workdir(workdir)
    paths = write_generated_runs(workdir / "runs", questions, runs)
    board = workdir / "board"
    load_before = os.getloadavg()[0]
    timing = timed_memfarm(["board", *[str(p) for p in paths], "--output", str(board)])
    files = [p for p in board.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    pages = len(list(board.glob("g*/q/*.html")))
    input_bytes = sum(p.stat().st_size for p in paths)
    row = {"questions": questions, "runs": runs, "build_seconds": round(timing["wall_seconds"], 2),
           "cpu_seconds": round(timing["cpu_seconds"], 2), "load_before": round(load_before, 2),
           "peak_rss_mib": round(timing["peak_rss_bytes"] / 2 ** 20, 1), "folder_mib": round(size / 2 ** 20, 2), "files": len(files),
           "question_pages": pages, "largest_page_kib": round(max(p.stat().st_size for p in files) / 1024, 1),
           "results_files_mib": round(input_bytes / 2 ** 20, 1)}
    path = write_bench("board", {"target_seconds": 60, "rows": [row]}, output)
    lines = [f"{'questions':>9}{'runs':>6}{'build s':>9}{'CPU s':>7}{'peak MiB':>10}{'folder MiB':>11}{'files':>7}"
             f"{'largest KiB':>12}{'input MiB':>10}",
             f"{questions:>9}{runs:>6}{row['build_seconds']:>9.1f}{row['cpu_seconds']:>7.1f}{row['peak_rss_mib']:>10.0f}"
             f"{row['folder_mib']:>11.1f}{len(files):>7}{row['largest_page_kib']:>12.1f}"
             f"{row['results_files_mib']:>10.1f}", f"wrote {path}"]
    return "\n".join(lines)
