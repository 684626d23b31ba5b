"""`memfarm bench beam-scale`: a 1M BEAM chat cold on a farm of one real worker, its peak memory against the
farm's per-worker bound and its time per message against a RealMem persona's time per turn.

No 1M chat is in the development data, so the chat is a stand-in: two 500K development chats joined into one
(`adapters.generators.beam_joined`), about as many messages and bytes as BEAM's 1M chats. The bench starts its own
redis-server on a free port and one `memfarm worker` with a fresh cache, then runs `memfarm run beam` on the
stand-in and `memfarm run realmem` on one persona through it, each cold (`--rebuild-cache`), one after the other.
Every figure comes from the runs' manifests: the item's own peak RSS in the worker's pool process
(`items[].stats.peak_rss_bytes`, counted afresh for each item), the item's own time in the worker
(`items[].timings.total_ms`: model load and process start are not in it) and its doc count. The bound is the pool
process's memory cap (`MEMFARM_MAX_MEMORY_PER_CHILD`, the worker's environment; `workers.farm.app`), past which a
worker replaces its pool process.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from coordinator.benches.common import fresh_workdir, measure_memfarm, start_workers, stop_workers, write_bench

#: The most a chat's time per message may be, as a multiple of a RealMem persona's time per turn (the issue's).
TARGET_RATIO = 1.5
#: The two 500K development chats joined: their 1,764 messages (4.4 MB) are the nearest pair to BEAM's 1M chats'
#: about 1,800 messages.
DEFAULT_PARTS = ("500K/2", "500K/5")
MIB = 2**20


def worker_memory_bound() -> int:
    """The farm's per-worker memory bound in bytes: the pool process's cap as the worker started here reads it."""
    from workers.farm.app import DEFAULT_MAX_MEMORY_PER_CHILD_KIB

    return int(os.environ.get("MEMFARM_MAX_MEMORY_PER_CHILD", DEFAULT_MAX_MEMORY_PER_CHILD_KIB)) * 1024


def smallest_persona(realmem: str | Path) -> Path:
    """`realmem` itself where it is a file, else the smallest persona file of the folder."""
    realmem = Path(realmem)
    if realmem.is_file():
        return realmem
    files = sorted(realmem.glob("*_dialogues_256k.json"), key=lambda f: (f.stat().st_size, f.name))
    if not files:
        raise FileNotFoundError(f"{realmem}: holds no RealMem persona (*_dialogues_256k.json)")
    return files[0]


def _persona_cut(persona: Path, sessions: int | None, workdir: Path) -> Path:
    """The persona's first `sessions` sessions as a file of its own (None: the persona as it is)."""
    if not sessions:
        return persona
    data = json.loads(persona.read_text(encoding="utf-8"))
    cut = workdir / persona.name
    cut.write_text(json.dumps({**data, "dialogues": data["dialogues"][:sessions]}), encoding="utf-8")
    return cut


def side_of(manifest: dict, wall_s: float, coordinator_rss: int) -> dict:
    """One run's row from its manifest: its one item's docs, questions, time in the worker, peak RSS, worker."""
    farm = manifest.get("farm")
    if not farm:
        raise ValueError("the run's manifest has no farm block: it did not run on the farm")
    if farm.get("failures"):
        failure = farm["failures"][0]
        raise ValueError(f"item {failure['item_id']} failed on the farm: {failure['error']}")
    items = manifest["items"]
    if len(items) != 1:
        raise ValueError(f"the run's manifest holds {len(items)} items; the bench runs one")
    item = items[0]
    stats, timings = item.get("stats") or {}, item.get("timings") or {}
    peak = stats.get("peak_rss_bytes")
    if peak is None:
        raise ValueError(f"item {item['item_id']}: its stats hold no peak_rss_bytes")
    docs = stats["docs"]
    item_ms = timings["total_ms"]
    timing = next((t for t in farm["items"] if t["item_id"] == item["item_id"]), {})
    return {"item_id": item["item_id"], "docs": docs, "questions": manifest["evaluation"]["question_count"],
            "failed": manifest["evaluation"]["failed"], "worker": timing.get("worker") or item.get("worker"),
            "attempts": timing.get("attempts"), "item_s": round(item_ms / 1000, 2),
            "ms_per_doc": round(item_ms / docs, 2), "worker_peak_rss_bytes": peak,
            "worker_peak_rss_mib": round(peak / MIB, 1), "wall_s": round(wall_s, 2),
            "coordinator_peak_rss_mib": round(coordinator_rss / MIB, 1)}


def run_beam_scale_bench(beam: str | Path, realmem: str | Path, *, parts: tuple[str, ...] = DEFAULT_PARTS,
                         realmem_sessions: int | None = None, mode: str = "full", threads: int = 2,
                         workdir: str | Path = "cache/bench_beam_scale",
                         output: str | Path = "results/bench/beam_scale.json") -> str:
    """Build the stand-in from `parts` (chat ids under `beam`'s `chats/`), run it and the persona on the farm."""
    from adapters.generators.beam_joined import join_chats
    from coordinator.operations.processes import free_port, start_redis

    workdir = fresh_workdir(workdir)
    beam = Path(beam)
    root = beam / "chats" if (beam / "chats").is_dir() else beam
    chat = join_chats([root / part for part in parts], workdir / "beam", size="1M")
    persona = smallest_persona(realmem)
    persona_file = _persona_cut(persona, realmem_sessions, workdir)
    port, password = free_port(), secrets.token_urlsafe(12)
    redis_proc = start_redis(workdir / "redis", port, password, workdir / "redis.log")
    broker = f"redis://:{password}@127.0.0.1:{port}/0"
    running: list = []
    sides = {}
    try:  # the persona first (minutes), then the chat; each on a worker of its own, started just before its run,
        # so that worker and run read the same code (a worker refuses a run whose code version is not its own)
        for name, dataset in (("realmem", persona_file), ("beam", chat)):
            running = start_workers(broker, workdir, f"{name}-", 1, threads)
            out = workdir / f"{name}.json"
            seconds, rss = measure_memfarm(["run", name, "--dataset", str(dataset), "--system", "memoria",
                                            "--retrieval-mode", mode, "--rebuild-cache", "--max-attempts", "1",
                                            "--output", str(out)], broker, written=out)
            stop_workers(running)
            manifest = json.loads(out.with_name(f"{name}.manifest.json").read_text(encoding="utf-8"))
            sides[name] = side_of(manifest, seconds, rss)
    finally:
        stop_workers(running)
        redis_proc.stop()
    sides = {"beam": sides["beam"], "realmem": sides["realmem"]}
    data = {"mode": mode, "threads": threads, "workers": 1,
            "stand_in": {"parts": [str(root / part) for part in parts], "joined_as": "chats/1M/1",
                         "bytes": (chat / "chat.json").stat().st_size, "messages": sides["beam"]["docs"]},
            "realmem": {"persona": str(persona), "sessions": realmem_sessions or "all"},
            **summary(sides, worker_memory_bound())}
    path = write_bench("beam_scale", data, output)
    return "\n".join(table(data) + [f"wrote {path}"])


def summary(sides: dict, bound: int) -> dict:
    """The figures of the two sides: ms per message over ms per persona turn, and the worker's peak against `bound`."""
    ratio = sides["beam"]["ms_per_doc"] / sides["realmem"]["ms_per_doc"]
    peak = max(side["worker_peak_rss_bytes"] for side in sides.values())
    return {"sides": sides, "beam_ms_per_message": sides["beam"]["ms_per_doc"],
            "realmem_ms_per_turn": sides["realmem"]["ms_per_doc"], "per_message_ratio": round(ratio, 3),
            "target_ratio": TARGET_RATIO, "within_target": ratio <= TARGET_RATIO,
            "worker_peak_rss_mib": round(peak / MIB, 1), "worker_bound_mib": round(bound / MIB, 1),
            "bound_source": "MEMFARM_MAX_MEMORY_PER_CHILD (workers.farm.app), the pool process's cap",
            "within_bound": peak <= bound, "all_done": all(side["failed"] == 0 for side in sides.values())}


def table(data: dict) -> list[str]:
    """The bench's printed table: one row a side, then the ratio and the bound."""
    lines = [f"memoria {data['mode']}, cold, farm of {data['workers']} worker ({data['threads']} threads); "
             f"BEAM 1M stand-in = {' + '.join(data['stand_in']['parts'])}",
             f"{'side':<9}{'item':<26}{'docs':>6}{'questions':>10}{'item s':>9}{'ms/doc':>9}{'worker peak MiB':>17}"]
    for name, side in data["sides"].items():
        lines.append(f"{name:<9}{str(side['item_id'])[:25]:<26}{side['docs']:>6}{side['questions']:>10}"
                     f"{side['item_s']:>9.1f}{side['ms_per_doc']:>9.1f}{side['worker_peak_rss_mib']:>17.1f}")
    lines += [f"ms per message / ms per persona turn: {data['per_message_ratio']:.2f}x "
              f"(target at most {data['target_ratio']}x: {'holds' if data['within_target'] else 'missed'})",
              f"worker peak RSS {data['worker_peak_rss_mib']:.1f} MiB, bound {data['worker_bound_mib']:.1f} MiB: "
              f"{'within' if data['within_bound'] else 'OVER'}"]
    return lines
