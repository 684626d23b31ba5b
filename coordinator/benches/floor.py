"""`memfarm bench floor`: how far a cold run's encoding is from the encoder's floor, for one item of each benchmark
the farm runs and each Memoria mode (and the control arms).

On a two-core CPU machine a run's time is the embedding model's. The floor of a run is what encoding each DISTINCT
text it had to embed costs when done once, sorted by length, in the encoder's own batches (every batch
`batch_rows(width)` rows of one padded width: other batches would change the vectors' last bits, see
`memoria.canonical_batches`). Each run is made cold in this process (no cache, no embedding store) with a counter
installed on the encoder (`memoria.encoder_watch`), then its distinct texts are encoded again, all in one call,
in the same process: `floor_ratio` is the run's seconds inside the encoder over that floor's, and
`padding_ratio` the token positions the model ran (each batch's width times its rows) over the texts' own tokens.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from adapters.errors import MemfarmError
from coordinator.benches.common import fresh_workdir, write_bench
from coordinator.running.reducer import git_commit

#: Memoria's modes measured, in the order of the table; `bm25` must make no model call.
MODES = ("bm25", "dense", "raw", "fusion", "full")
#: The control arms: systems that rank without any model, so they too must make no call.
ARMS = ("random", "recency")
#: The benchmarks measured, one item each, in the order of the table.
BENCHMARKS = ("locomo", "longmemeval", "realmem", "beam")
#: The generated LongMemEval-S question measured (`memfarm synth longmemeval --questions 1 --scale 1.0 --seed 7`).
LONGMEMEVAL_SEED, LONGMEMEVAL_SCALE = 7, 1.0
#: The BEAM chat measured, under the development folder (a 128K chat).
BEAM_CHAT = Path("chats") / "100K" / "1"


@dataclass
class EncoderCount:
    """What the encoder ran while installed (`memoria.encoder_watch`): calls, batches, rows, tokens, seconds,
    and how many times each text was given to it."""

    calls: int = 0
    batches: int = 0
    rows_run: int = 0
    text_tokens: int = 0
    padded_tokens: int = 0
    seconds: float = 0.0
    texts: Counter = field(default_factory=Counter)

    def called(self, call) -> None:
        self.calls += 1
        self.batches += len(call.batches)
        self.rows_run += sum(rows for _, _, rows in call.batches)
        self.text_tokens += sum(call.lengths)
        self.padded_tokens += sum(width * rows for width, _, rows in call.batches)
        self.seconds += call.seconds
        self.texts.update(call.texts)

    @property
    def rows(self) -> int:
        """Texts the model was given (each row that held a text, repeats counted)."""
        return sum(self.texts.values())

    def summary(self) -> dict:
        return {"model_calls": self.calls, "batches": self.batches, "rows": self.rows, "rows_run": self.rows_run,
                "distinct_texts": len(self.texts), "texts_encoded_again": self.rows - len(self.texts),
                "text_tokens": self.text_tokens, "padded_tokens": self.padded_tokens,
                "encoder_s": round(self.seconds, 3)}


def counted_run(spec) -> tuple[EncoderCount, float, dict]:
    """Run `spec` here with a counter on the encoder: the counter, the run's wall seconds and its results."""
    from coordinator.running.local_executor import run_local
    from memoria.encoder_watch import watching

    count = EncoderCount()
    with watching(count):
        started = time.perf_counter()
        results, _ = run_local(spec)
        wall = time.perf_counter() - started
    return count, wall, results


def measure_floor(texts, embedder=None) -> EncoderCount:
    """Encode `texts` once each, sorted by length, in one call to the encoder: the floor of a run that had
    to embed them."""
    from memoria.embedder import Embedder
    from memoria.encoder_watch import watching

    embedder = embedder or Embedder.shared()
    distinct = sorted(dict.fromkeys(texts), key=lambda t: (len(t), t))
    count = EncoderCount()
    if distinct:
        with watching(count):
            embedder.encode(distinct)
    return count


def _ratio(top: float, bottom: float) -> float | None:
    return round(top / bottom, 3) if bottom else None


def run_row(benchmark: str, system: str, mode: str | None, spec, floors: dict) -> dict:
    """One cold run of `spec`, counted, beside the floor of its distinct texts (measured once per set of texts)."""
    count, wall, results = counted_run(spec)
    if results.get("complete") is False:
        raise MemfarmError(f"bench floor: {benchmark} with {system} {mode or ''}: the run did not complete "
                           f"(failures: {results.get('failures')})")
    key = frozenset(count.texts)
    if key and key not in floors:
        floors[key] = measure_floor(count.texts)
    floor = floors.get(key, EncoderCount())
    return {"benchmark": benchmark, "system": system, "mode": mode or "-",
            "questions": results.get("question_count"), "wall_s": round(wall, 3), **count.summary(),
            "outside_encoder_s": round(wall - count.seconds, 3),
            "floor_s": round(floor.seconds, 3), "floor_batches": floor.batches,
            "floor_padded_tokens": floor.padded_tokens,
            "floor_ratio": _ratio(count.seconds, floor.seconds),
            "padding_ratio": _ratio(count.padded_tokens, count.text_tokens),
            "floor_padding_ratio": _ratio(floor.padded_tokens, floor.text_tokens)}


def _persona_cut(path: Path, sessions: int | None) -> tuple[dict, int]:
    persona = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(persona, dict) or not isinstance(persona.get("dialogues"), list):
        raise MemfarmError(f"{path}: a RealMem persona file holds a 'dialogues' list")
    if sessions:
        persona = {**persona, "dialogues": persona["dialogues"][:sessions]}
    return persona, sum(len(s.get("dialogue_turns", [])) for s in persona["dialogues"])


def prepare_items(workdir: Path, locomo: Path, realmem: Path, beam: Path, realmem_sessions: int | None) -> dict:
    """The one item of each benchmark, as (dataset, companion questions file or None) and what was chosen."""
    from adapters.benchmarks.longmemeval.reader import extract_questions
    from adapters.generators.longmemeval_s import write

    conversations = json.loads(Path(locomo).read_text(encoding="utf-8"))
    if not isinstance(conversations, list) or not conversations:
        raise MemfarmError(f"{locomo}: a LoCoMo file holds a non-empty list of conversations")
    (workdir / "locomo.json").write_text(json.dumps(conversations[:1]), encoding="utf-8")
    lme, lme_q = workdir / "longmemeval.json", workdir / "longmemeval_q.json"
    write(lme, 1, seed=LONGMEMEVAL_SEED, scale=LONGMEMEVAL_SCALE)
    extract_questions(lme, lme_q)
    personas = sorted(Path(realmem).glob("*_dialogues_256k.json"), key=lambda p: (p.stat().st_size, p.name))
    if not personas:
        raise MemfarmError(f"{realmem}: no RealMem persona file (*_dialogues_256k.json) in it")
    persona, persona_turns = _persona_cut(personas[0], realmem_sessions)
    (workdir / "realmem.json").write_text(json.dumps(persona), encoding="utf-8")
    chat = Path(beam) / BEAM_CHAT
    if not (chat / "chat.json").is_file():
        raise MemfarmError(f"{chat}: no chat.json (the BEAM development folder holds {BEAM_CHAT}/chat.json)")
    return {"datasets": {"locomo": (workdir / "locomo.json", None), "longmemeval": (lme, lme_q),
                         "realmem": (workdir / "realmem.json", None), "beam": (chat, None)},
            "chosen": {"locomo": f"{locomo}, conversation 1 ({conversations[0].get('sample_id')})",
                       "longmemeval": f"memfarm synth longmemeval --questions 1 --scale {LONGMEMEVAL_SCALE} "
                                      f"--seed {LONGMEMEVAL_SEED}",
                       "realmem": f"{personas[0].name} (the smallest persona), "
                                  + (f"its first {realmem_sessions} sessions" if realmem_sessions else "whole")
                                  + f": {len(persona['dialogues'])} sessions, {persona_turns} turns",
                       "beam": str(chat)}}


def run_floor_bench(locomo: str | Path, realmem: str | Path, beam: str | Path, *, realmem_sessions: int | None = 50,
                    modes=MODES, arms=ARMS, benchmarks=BENCHMARKS, threads: int = 1,
                    workdir: str | Path = "cache/bench_floor", output: str | Path = "results/bench/floor.json",
                    progress=None) -> str:
    """Each benchmark's item, cold, under each mode and arm, counted, beside its floor; writes `output`.
    `threads`: torch's threads (on a machine whose cores others use too, one thread spares each of the model's
    many small parallel steps a wait for a second core). `progress(line)` hears each run as it ends."""
    import torch

    from coordinator.running.spec import RunSpec
    from memoria.embedder import Embedder

    started_at = git_commit()  # the tree may move while the bench runs
    workdir = fresh_workdir(workdir)
    items = prepare_items(workdir, Path(locomo), Path(realmem), Path(beam), realmem_sessions)
    torch.set_num_threads(threads)
    Embedder.shared()  # the model loads before the first run, so that no run's time holds its loading
    rows = []
    for name in benchmarks:
        dataset, companion = items["datasets"][name]
        floors: dict = {}
        for mode in modes:
            spec = RunSpec(name, dataset=str(dataset), questions=str(companion) if companion else None,
                           retrieval_mode=mode)
            rows.append(run_row(name, "memoria", mode, spec, floors))
            if progress:
                progress(table(rows[-1:]).splitlines()[-1])
        for arm in arms:
            spec = RunSpec(name, dataset=str(dataset), questions=str(companion) if companion else None, system=arm)
            rows.append(run_row(name, arm, None, spec, floors))
    data = {"items": items["chosen"], "benchmarks": list(benchmarks), "torch_threads": threads, "modes": list(modes), "arms": list(arms), "runs": rows,
            "floor": "each run's distinct texts encoded once more, in this process right after it, sorted by token "
                     "length in one call to the encoder (its batches of batch_rows(width) rows of one padded "
                     "width); measured once per set of texts, so runs that encode the same texts share one floor",
            "ratios": "floor_ratio: seconds inside the encoder during the run over the floor's; padding_ratio: "
                      "token positions the model ran (batch width x rows run, filled rows included) over the texts' "
                      "own tokens (truncated to the window); floor_padding_ratio: the same of the floor"}
    path = write_bench("floor", data, output, started_at)
    return table(rows) + f"\nwrote {path}"


def table(rows: list[dict]) -> str:
    """The runs side by side, one line each."""
    lines = [f"{'benchmark':<12}{'system':<8}{'mode':<7}{'calls':>6}{'rows':>7}{'distinct':>9}{'text tok':>10}"
             f"{'padded tok':>11}{'enc s':>8}{'out s':>7}{'floor s':>8}{'x floor':>8}{'x pad':>7}{'x pad fl':>9}"]
    for r in rows:
        lines.append(f"{r['benchmark']:<12}{r['system']:<8}{r['mode']:<7}{r['model_calls']:>6}{r['rows']:>7}"
                     f"{r['distinct_texts']:>9}{r['text_tokens']:>10}{r['padded_tokens']:>11}{r['encoder_s']:>8.2f}"
                     f"{r['outside_encoder_s']:>7.2f}{r['floor_s']:>8.2f}"
                     + "".join("{:>{w}}".format("-" if r[k] is None else f"{r[k]:.2f}", w=w)
                               for k, w in (("floor_ratio", 8), ("padding_ratio", 7), ("floor_padding_ratio", 9))))
    return "\n".join(lines)
