"""`memfarm bench realmem-cost`: what a RealMem persona costs next to a LoCoMo conversation of the same number of
turns, cold, side by side in one run.

A persona is cut to its first sessions until it holds at least as many turns as the LoCoMo file's first
conversation; each is then run cold (no cache, a fresh `memfarm run` child) with the same system and mode,
alternating, `reps` times. A persona is asked its questions between sessions (memory grows one session at a time),
so what it costs beyond the conversation is the price of that protocol: the ratio of the medians is the figure, with
each side's turns, questions and peak RSS beside it.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from coordinator.benches.common import fresh_workdir, measure_memfarm, write_bench

#: The most a persona may cost, as a multiple of a LoCoMo conversation of as many turns.
TARGET_RATIO = 1.3


def _turns_of_conversation(conversation: dict) -> int:
    talk = conversation["conversation"]
    return sum(len(v) for k, v in talk.items() if k.startswith("session_") and isinstance(v, list))


def _persona_cut_to(persona: dict, turns: int) -> tuple[dict, int]:
    """The persona's first sessions, as few as hold at least `turns` turns, and how many turns they hold."""
    held, kept = 0, []
    for session in persona["dialogues"]:
        kept.append(session)
        held += len(session["dialogue_turns"])
        if held >= turns:
            break
    return {**persona, "dialogues": kept}, held


def run_realmem_cost_bench(locomo: str | Path, realmem: str | Path, *, mode: str = "full", reps: int = 2,
                           workdir: str | Path = "cache/bench_realmem_cost",
                           output: str | Path = "results/bench/realmem_cost.json") -> str:
    workdir = fresh_workdir(workdir)
    conversation = json.loads(Path(locomo).read_text())[0]
    turns = _turns_of_conversation(conversation)
    persona, persona_turns = _persona_cut_to(json.loads(Path(realmem).read_text()), turns)
    inputs = {"locomo": workdir / "conversation.json", "realmem": workdir / "persona.json"}
    inputs["locomo"].write_text(json.dumps([conversation]))
    inputs["realmem"].write_text(json.dumps(persona))
    runs = {name: [] for name in inputs}
    for rep in range(reps):  # alternating, so that a change in the machine's load falls on both sides
        for name, path in inputs.items():
            out = workdir / f"{name}_{rep}.json"
            seconds, rss = measure_memfarm(["run", name, "--dataset", str(path), "--system", "memoria",
                                            "--retrieval-mode", mode, "--output", str(out)])
            results = json.loads(out.read_text())
            runs[name].append({"wall_s": round(seconds, 2), "peak_rss_mib": round(rss / 2**20, 1),
                               "questions": results["metrics"]["all"]["evaluable"]["session"],
                               "complete": results.get("complete")})
    sides = {}
    for name, rows in runs.items():
        wall = statistics.median(r["wall_s"] for r in rows)
        sides[name] = {"turns": turns if name == "locomo" else persona_turns, "questions": rows[0]["questions"],
                       "wall_s_median": round(wall, 2), "peak_rss_mib_max": max(r["peak_rss_mib"] for r in rows),
                       "runs": rows}
    per_turn = {name: side["wall_s_median"] / side["turns"] for name, side in sides.items()}
    ratio = per_turn["realmem"] / per_turn["locomo"]
    data = {"locomo": str(locomo), "realmem": str(realmem), "mode": mode, "reps": reps,
            "sessions_kept": len(persona["dialogues"]), "sides": sides,
            "ratio_per_turn": round(ratio, 3), "target_ratio": TARGET_RATIO, "within_target": ratio <= TARGET_RATIO}
    path = write_bench("realmem_cost", data, output)
    lines = [f"memoria {mode}, cold, median of {reps} alternating runs each",
             f"{'side':<8}{'turns':>7}{'questions':>10}{'wall s':>9}{'ms/turn':>9}{'peak RSS MiB':>14}"]
    lines += [f"{name:<8}{side['turns']:>7}{side['questions']:>10}{side['wall_s_median']:>9.1f}"
              f"{1000 * per_turn[name]:>9.1f}{side['peak_rss_mib_max']:>14.1f}" for name, side in sides.items()]
    lines += [f"persona / conversation, per turn: {ratio:.2f}x (target at most {TARGET_RATIO}x)", f"wrote {path}"]
    return "\n".join(lines)
