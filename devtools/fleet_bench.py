"""`python -m devtools fleet`: the fault campaign on simulated machines, a faulty run next to a clean one.

Needs root (network namespaces, cgroups) and a checkout; it is a developer's tool, not part of the
installed package.
"""

from __future__ import annotations

import shutil
import statistics
import time
from dataclasses import replace
from pathlib import Path

from coordinator.benches.common import write_bench


def _wrapped(adapter, edits: dict):
    """The adapter with some items changed as they are staged (the fault campaign's data faults)."""

    class Edited:
        benchmark = adapter.benchmark

        def scan(self):
            return adapter.scan()

        def iter_items(self, limit=None):
            for item in adapter.iter_items(limit=limit):
                yield edits[item["item_id"]](item) if item["item_id"] in edits else item

    return Edited()


def _poison(item: dict) -> dict:
    item = dict(item, turns=[dict(t) for t in item["turns"]])
    item["turns"][0]["text"] = 12345  # the engine refuses a text that is not a string, every time
    return item


def _too_slow(copies: int):
    def inflate(item: dict) -> dict:
        # each copy's texts carry its number: no store or shared vector can collapse the copies into one encoding
        turns = [dict(t, turn_id=f"{t['turn_id']}~{n}", text=f"{t['text']} ({n})" if n else t["text"])
                 for n in range(copies) for t in item["turns"]]
        return dict(item, turns=turns)
    return inflate


def run_fleet_bench(questions: int, scale: float, workdir: str | Path, output, workers: int = 3,
                    time_limit: int = 40, lease_seconds: int = 8) -> str:
    """A fault-free and a faulty run of one generated file on a fleet of simulated machines, side by side."""
    import os

    from adapters.benchmarks.longmemeval.reader import extract_questions
    from adapters.generators.longmemeval_s import write
    from coordinator.running import farm_run as farm
    from devtools.fleet import Campaign, Fleet, recovery, run_in_background, unavailable_reason
    from coordinator.running.run_ledger import RunLedger, connect
    from coordinator.running.local_executor import run_local
    from coordinator.running.reducer import write_results
    from coordinator.running.spec import RunSpec
    from adapters.errors import MemfarmError
    from workers.farm.app import make_app

    reason = unavailable_reason()
    if reason:
        raise MemfarmError(f"the fleet bench cannot run here: it {reason}")
    workdir = Path(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    data, companion = workdir / "fleet.json", workdir / "fleet_q.json"
    write(data, questions, seed=43, scale=scale)
    extract_questions(data, companion)
    visibility = time_limit + 5
    limits = {"MEMFARM_TASK_TIME_LIMIT": str(time_limit), "MEMFARM_VISIBILITY_TIMEOUT": str(visibility),
              "MEMFARM_LEASE_SECONDS": str(lease_seconds)}
    saved = {k: os.environ.get(k) for k in (*limits, "MEMFARM_TLS_CA", "MEMFARM_TLS_CERT", "MEMFARM_TLS_KEY")}
    os.environ.update(limits)
    try:
        # no embedding store: each item encodes its own texts in one call, locally and on every machine, so
        # that the farm's records can be compared with the local ones exactly
        spec = RunSpec("longmemeval", dataset=str(data), questions=str(companion), rebuild_cache=True,
                       embedding_store=False)
        t0 = time.perf_counter()
        local, _ = run_local(spec)
        local_s = time.perf_counter() - t0
        expected = {r["question_id"]: r for r in local["records"]}
        with Fleet(workdir / "fleet", workers=workers, env=limits) as fleet:
            os.environ.update(fleet.tls_env)  # the coordinator's client certificate, as `cluster up` prints it
            fleet.wait_ready()
            ledger = RunLedger(connect(fleet.broker), lease_seconds=lease_seconds)
            redis_setup = {"tls": fleet.broker.startswith("rediss://"), "coordinator_user": _whoami(ledger.r),
                           "worker_user": "worker", "maxmemory": ledger.r.info("memory")["maxmemory"]}
            app = make_app(fleet.broker)

            t0 = time.perf_counter()
            clean_id, _ = farm.submit(ledger, app, replace(spec, run_id="fault-free"), fleet.broker)
            farm.watch(ledger, app, clean_id, timeout=900)
            clean_s = time.perf_counter() - t0
            clean, _ = farm.reduce_farm_run(ledger, clean_id)
            per_item = statistics.median([r["runtime_ms"] or 0 for r in clean["records"]]) / 1000

            ids = spec.open_dataset().scan()
            poison_id, slow_id = ids[1], ids[2]
            adapter = _wrapped(spec.open_dataset(), {poison_id: _poison, slow_id: _too_slow(200)})
            faulty = replace(spec, run_id="faulty")
            system = faulty.make_system()
            meta = replace(farm.run_meta(faulty, system, broker=fleet.broker), item_count=len(ids),
                           staging_done=False)
            t0 = time.perf_counter()
            ledger.create_run("faulty", meta.to_dict())
            farm.stage_run(ledger, app, "faulty", adapter, None)
            watcher, box = run_in_background(farm.watch, ledger, app, "faulty", None, 1.0, 1800)
            campaign = Campaign(fleet, ledger, "faulty", meta.created, down_seconds=visibility + 5)
            campaign.data_fault("poison item (the engine refuses it every time)", poison_id)
            campaign.data_fault(f"item over the hard time limit ({time_limit}s)", slow_id)
            # the faults that need an ordinary item running come first, while the run still has many
            campaign.kill_pool_child()
            campaign.kill_worker()
            campaign.kill_redis()
            campaign.oom_pool_child()
            campaign.cut_network()
            watcher.join()
            if "error" in box:
                raise box["error"]
            faulty_s = time.perf_counter() - t0
            time.sleep(lease_seconds)  # let a late finish from the machine that was cut off try its luck
            results, manifest = farm.reduce_farm_run(ledger, "faulty")
            write_results(results, manifest, workdir / "faulty.json")
            rows = [{**vars(f), **recovery(ledger, "faulty", f, per_item)} for f in campaign.faults]
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    records = results["records"]
    qids = [r["question_id"] for r in records]
    failed = {r["question_id"] for r in records if r["status"] != "ok"}
    unexpected = sorted(failed - {poison_id, slow_id})
    named = {f["item_id"] for f in manifest["failures"]}
    same = all(_same_record(r, expected[r["question_id"]]) for r in records if r["status"] == "ok")
    survived = [row for row in rows if row["injected"] and (row["fault"].startswith(("poison", "item over"))
                                                            or "done" in row["recovered"])]
    data_out = {
        "questions": questions, "scale": scale, "workers": workers, "redis": redis_setup, "time_limit_s": time_limit,
        "visibility_timeout_s": visibility, "lease_s": lease_seconds, "memory_limit_bytes": fleet.memory_limit,
        "faults_injected": sum(1 for row in rows if row["injected"]),
        "faults_survived": len(survived),
        "records_lost": len(set(expected) - set(qids)),
        "duplicates": len(qids) - len(set(qids)),
        "records_equal_local": same,
        "failed_items": sorted(failed),
        "unexpected_failures": unexpected,
        "failures_named_in_manifest": failed <= named,
        "expected_failures": sorted({poison_id, slow_id}),
        "faults": rows,
        "wall_seconds": {"local": round(local_s, 1), "fault_free": round(clean_s, 1), "faulty": round(faulty_s, 1)},
    }
    path = write_bench("fleet", data_out, output)
    lines = [f"fleet of {workers} simulated machines, {questions} questions at scale {scale}; hard limit {time_limit}s, "
             f"visibility {visibility}s, lease {lease_seconds}s; Redis over TLS as users "
             f"{redis_setup['coordinator_user']} and {redis_setup['worker_user']}",
             f"{'fault':<52}{'at s':>6}  {'machine':<8}{'recovered':<60}{'s lost':>7}"]
    for row in rows:
        lines.append(f"{row['fault'][:51]:<52}{row['at_seconds'] if row['at_seconds'] is not None else '-':>6}  "
                     f"{(row['machine'] or '-'):<8}{row['recovered'][:59]:<60}{row['seconds_lost']:>7}")
    lines += [f"faults injected {data_out['faults_injected']}, survived {data_out['faults_survived']}; records lost "
              f"{data_out['records_lost']}, duplicates {data_out['duplicates']}; records equal local: {same}; "
              f"failures named in the manifest: {data_out['failures_named_in_manifest']}",
              f"wall seconds: fault-free {clean_s:.0f}, faulty {faulty_s:.0f} (local, one process: {local_s:.0f})",
              f"wrote {path}"]
    return "\n".join(lines)


def _whoami(client) -> str:
    name = client.execute_command("ACL", "WHOAMI")
    return name.decode() if isinstance(name, bytes) else name


def _same_record(farm_record: dict, local_record: dict) -> bool:
    return (farm_record["metrics"] == local_record["metrics"]
            and [c["id"] for c in farm_record["candidates"]] == [c["id"] for c in local_record["candidates"]])
