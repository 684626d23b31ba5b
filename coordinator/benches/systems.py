"""`memfarm bench systems`: every system side by side on LoCoMo, a generated LongMemEval-S file and, where given,
RealMem personas, each against Memoria full question by question, with what it costs to ingest and to recall and its peak memory.

Each system runs as its own `memfarm run` child (so its wall time and peak RSS are its own) with the same docs,
the same top_k and the same embedder; the paired statistics are `memfarm compare`'s (`coordinator.results.compare`):
the strict session recall_all@5 first, a 95% paired bootstrap interval of the difference, Holm's adjustment over
a dataset's comparisons of each metric (`verdicts.adjust`, the rule of `memfarm compare` and the board), and under
the table each system's verdict against the reference in one line. A system whose extra is not installed is listed
as skipped, never scored 0.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from adapters.files import dataset_checksums, write_json
from adapters.records import is_ok
from adapters.terminal import printable
from adapters.systems import SYSTEMS as BUILT_IN
from coordinator.results.verdicts import p_text
from coordinator.benches.systems_beam import BEAM_METRICS, add_abilities, beam_table
from coordinator.running.reducer import git_commit
from coordinator.benches.common import (fresh_workdir, generated_longmemeval, measure_memfarm, metric as summary_metric,
                                       write_bench)

#: (label, `memfarm run` options) of each configuration every built-in system declares for this table
#: (`SystemInfo.variants`), in the registry's order; the first is the reference every other row is compared with.
SYSTEMS = tuple((label, ["--system", info.name, *([option, value] if option else [])])
                for info in BUILT_IN.values() for label, option, value in info.variants)
#: The metrics of the table, strict first, as `memfarm compare` spells them, and their column names.
METRICS = (("session:recall_all@5", "session_recall_all_5"), ("session:recall_any@5", "session_recall_any_5"),
           ("session:ndcg_any@10", "session_ndcg_10"), ("turn:recall_any@10", "turn_recall_any_10"))
REFERENCE = SYSTEMS[0][0]


def run_systems_bench(locomo: str | Path | None, output, *, workdir: str | Path = "cache/bench_systems",
                      questions: int = 20, scale: float = 0.1, limit: int | None = None,
                      only: tuple[str, ...] = (), extra: tuple[str, ...] = (), resamples: int = 10_000,
                      realmem: str | Path | None = None, realmem_limit: int | None = None,
                      longmemeval: bool = True, reference: str = REFERENCE, reuse: bool = False,
                      progress=None, beam: str | Path | None = None, beam_limit: int | None = None) -> str:
    """Run the systems (all, or those labelled in `only`; the reference always, first) and every system `extra`
    names (a server's URL, a Python class; a row under its own spelling) on each dataset given (a LoCoMo file,
    a generated LongMemEval-S file unless `longmemeval` is false, RealMem personas, BEAM chats, scored message by
    message and compared per ability: `coordinator.benches.systems_beam`); write one row per dataset
    and system, and return the printed table.

    `reuse`: a run whose command and dataset (by checksum) match one this bench made in `workdir` before, with
    this version of the farm, is read from its results file instead of being run again. `progress(line)` is told
    of each run as it starts and ends, and the runs' own progress lines reach standard error."""
    import importlib.util

    unknown = [name for name in only if name not in dict(SYSTEMS)]
    if unknown:
        raise ValueError(f"unknown system label(s) {', '.join(unknown)}; choose from {', '.join(dict(SYSTEMS))}")
    if reference not in dict(SYSTEMS):
        raise ValueError(f"unknown reference {reference}; choose a row's label: {', '.join(dict(SYSTEMS))}")
    datasets = {}
    if locomo:  # `limit` cuts the LoCoMo file to its first conversations; the generated file is sized by `questions`
        datasets["locomo"] = (Path(locomo), ["--limit", str(limit)] if limit else [])
    if not datasets and not realmem and not beam:
        raise ValueError("no dataset: give --locomo, --realmem, --beam or several")
    code = code_state()
    if reuse and code == "unknown":
        raise ValueError("--reuse needs a git checkout of the farm, to tell this code from the code an earlier run "
                         "was made with; run without --reuse")
    workdir = fresh_workdir(workdir, keep=reuse)
    if longmemeval:
        datasets["longmemeval"] = (generated_longmemeval(workdir, questions, scale, seed=7), [])
    if realmem:  # memory grows a session at a time; each persona is one item
        datasets["realmem"] = (Path(realmem), ["--limit", str(realmem_limit)] if realmem_limit else [])
    if beam:  # each chat is one item, its questions asked after the whole chat
        datasets["beam"] = (Path(beam), ["--limit", str(beam_limit)] if beam_limit else [])
    selected = only or extra
    chosen = [(reference, dict(SYSTEMS)[reference])]
    chosen += [(label, options) for label, options in SYSTEMS
               if label != reference and (not selected or label in only)]
    chosen += [(spec, ["--system", spec]) for spec in extra]
    say = progress or (lambda line: None)
    # every complete run is noted, so that a later bench can reuse it
    ledger = _Ledger(workdir / "runs.json", code)
    rows, skipped, runs, total = [], {}, 0, len(datasets) * len(chosen)
    for benchmark, (path, dataset_args) in datasets.items():
        files, checksum = {}, _checksum(benchmark, path)
        for label, options in chosen:
            runs += 1
            info = BUILT_IN.get(options[options.index("--system") + 1])
            if info and info.optional and importlib.util.find_spec(info.vendor_module) is None:
                if label == reference:  # every row is set against it: without it there is no table to make
                    raise ValueError(f"the reference {label} cannot run: {info.vendor_module} is not installed "
                                     f"({info.install} in the checkout); name another with --reference")
                skipped[label] = f"{info.vendor_module} is not installed ({info.install} in the checkout)"
                say(f"[{runs}/{total}] {benchmark} {label}: skipped, {skipped[label]}")
                continue
            out = workdir / f"{benchmark}_{len(files)}_{re.sub(r'[^A-Za-z0-9_.-]+', '-', label)}.json"
            args = ["run", benchmark, "--dataset", str(path), *options, *dataset_args]
            # a user's class or a server may have changed under the same name: never read back
            kept = ledger.find(args, checksum) if reuse and (label, options) in SYSTEMS else None
            if kept:
                files[label] = (workdir / kept["file"], kept["seconds"], kept["rss"])
                say(f"[{runs}/{total}] {benchmark} {label}: reused {workdir / kept['file']} (ran in "
                    f"{kept['seconds']:.0f} s)")
                continue
            say(f"[{runs}/{total}] {benchmark} {label}: running memfarm {' '.join(args)}")
            for old in (out, out.with_suffix(".manifest.json")):  # a file an earlier bench left is never this run's
                old.unlink(missing_ok=True)
            seconds, rss = measure_memfarm([*args, "--output", str(out)], written=out, show_progress=bool(progress))
            files[label] = (out, seconds, rss)
            ledger.keep(args, checksum, out.name, seconds, rss)
            say(f"[{runs}/{total}] {benchmark} {label}: done in {seconds:.0f} s")
        rows += _dataset_rows(benchmark, files, resamples)
    data = {"datasets": {**({"locomo": str(locomo)} if locomo else {}),
                         **({"longmemeval": f"generated: {questions} questions, scale {scale}"} if longmemeval else {}),
                         **({"realmem": str(realmem)} if realmem else {}),
                         **({"beam": str(beam)} if beam else {})},
            "limit": limit, "reference": reference, "metrics": [m for m, _ in METRICS], "rows": rows,
            **({"beam_metrics": [m for m, _ in BEAM_METRICS], "beam_limit": beam_limit} if beam else {}),
            "skipped": skipped, "reused": bool(reuse)}
    path = write_bench("systems", data, output)
    return "\n".join(_table(rows) + ["* a control arm: it knows nothing of the question (adapters/systems/arms.py)"]
                     + (["† weights tuned on this dataset: not a held-out figure"] if any(r["tuned_on_this_data"]
                                                                                          for r in rows) else [])
                     + _incomplete_lines(rows) + verdict_lines(rows)
                     + [f"skipped {k}: {v}" for k, v in skipped.items()]
                     + [f"wrote {path}"])


def led_by_turns(benchmark: str) -> bool:
    """Whether a benchmark declares a turn-level headline (BEAM's messages): its rows take the turn-led metrics
    and are compared per ability (`coordinator.benches.systems_beam`)."""
    from adapters.benchmarks import BENCHMARKS

    return BENCHMARKS[benchmark].headline_level == "turn"


def _checksum(benchmark: str, path: Path) -> str:
    """A dataset's checksum as its run records it: a folder's over the files its benchmark reads (BEAM's chats lie
    folders deep), a file's its own."""
    from adapters.benchmarks import BENCHMARKS
    from adapters.benchmarks.contract import files_of

    groups = files_of(BENCHMARKS[benchmark].reader, path)
    return dataset_checksums(path, None if groups is None else [file for group in groups for file in group])[0]


#: What a run reads from its environment that changes its numbers or its cost (never a secret: the key is written
#: to the folder): a run under other values is another run.
RUN_ENVIRONMENT = ("MEMFARM_MAX_SEQ_LENGTH", "MEMFARM_CACHE_DIR", "MEMFARM_THREADS", "MEMFARM_TORCH_THREADS",
                   "MEMFARM_ONNX_DIR", "MEMFARM_MODEL_CACHE", "MEMFARM_SYSTEM_TIMEOUT", "MEMFARM_SYSTEM_RETRIES")


def code_state() -> str:
    """The farm's code as a run depends on it: its commit and, where the tree has changes not committed, a
    checksum of them (two different edits of one commit are two codes); `unknown` outside a git checkout."""
    import hashlib
    import subprocess

    commit = git_commit()
    if commit.endswith("-dirty"):
        root = Path(__file__).resolve().parents[2]
        diff = subprocess.run(["git", "diff", "HEAD"], cwd=root, capture_output=True, timeout=60).stdout
        commit += "-" + hashlib.sha256(diff).hexdigest()[:16]
    return commit


class _Ledger:
    """The runs a bench made in its folder (`runs.json`): for each command and dataset checksum, under the farm's
    code (`code_state`) and the environment a run reads (`RUN_ENVIRONMENT`), the results file it wrote and what the
    run cost, so `--reuse` can read it instead of running again. A run with failed items is not kept (it is run
    again); a file named again by another command drops the older entry; an entry whose file is gone or no longer
    reads is not found."""

    def __init__(self, path: Path, code: str):
        self.path, self.code = path, code
        try:
            self.entries = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError):
            self.entries = {}
        if not isinstance(self.entries, dict):
            self.entries = {}

    def _key(self, args: list[str], checksum: str) -> str:
        import os

        return json.dumps([self.code, checksum, *args, {name: os.environ.get(name) for name in RUN_ENVIRONMENT}])

    def find(self, args: list[str], checksum: str) -> dict | None:
        from coordinator.results.run_files import ResultsFile

        entry = self.entries.get(self._key(args, checksum))
        if not isinstance(entry, dict) or not (self.path.parent / str(entry.get("file"))).is_file():
            return None
        try:  # a file that no longer reads as a results file is run again
            ResultsFile.read(self.path.parent / entry["file"])
        except Exception:  # noqa: BLE001 - any reason it does not read is a reason to run it again
            return None
        return entry

    def keep(self, args: list[str], checksum: str, file: str, seconds: float, rss: int) -> None:
        from coordinator.results.failures import failure_summary
        from coordinator.results.run_files import ResultsFile

        self.entries = {k: v for k, v in self.entries.items() if not isinstance(v, dict) or v.get("file") != file}
        results = ResultsFile.read(self.path.parent / file)
        if not failure_summary(results["records"], results.get("benchmark_key"))["item_ids"]:
            self.entries[self._key(args, checksum)] = {"file": file, "seconds": seconds, "rss": rss}
        write_json(self.path, self.entries)


def _dataset_rows(benchmark: str, files: dict, resamples: int) -> list[dict]:
    """One flat row per system: its metrics, and each metric's difference from the reference with the interval
    and the Holm-adjusted p of `memfarm compare` over this dataset's table."""
    from coordinator.results.compare import compare_files
    from coordinator.results.failures import failure_summary
    from coordinator.results.run_files import ManifestFile, ResultsFile
    from coordinator.results.verdicts import verdict

    by_turn = led_by_turns(benchmark)
    metrics = BEAM_METRICS if by_turn else METRICS
    labels = list(files)
    loaded = [ResultsFile.read(files[label][0]) for label in labels]
    failures = [failure_summary(results["records"], results.get("benchmark_key")) for results in loaded]
    # an item that failed before its questions were read (an unreadable persona) has no questions to score as
    # misses: it is left out of every file's comparison alike, and said on each row of the dataset
    unread = sorted({item for failed in failures for item in failed["items_without_question_ids"]})
    by_key = {}
    if len(loaded) > 1:  # the table lists each metric in turn, and under it every other file in order
        compared = [_without_items(results, unread) for results in loaded] if unread else loaded
        table = compare_files(compared, [m for m, _ in metrics], resamples=resamples, count_failed_as_miss=True,
                              checked=bool(unread))
        for position, entry in enumerate(table["comparisons"]):
            by_key[(labels[1 + position % (len(labels) - 1)], entry["metric"])] = entry
    rows = []
    for label, results, failed in zip(labels, loaded, failures):
        out, seconds, rss = files[label]
        manifest = ManifestFile.read(str(out).removesuffix(".json") + ".manifest.json")
        summary = results["metrics"]["all"]
        build_ms = sum(item["timings"].get("build_or_restore_ms", 0.0) for item in manifest["items"])
        docs = sum(item["stats"].get("docs", 0) for item in manifest["items"])
        runtimes = [r["runtime_ms"] for r in results["records"] if is_ok(r)]
        row = {"dataset": benchmark, "system": label, "config": results.get("settings_system", {}).get("retrieval_mode"),
               "n": summary["evaluable"][metrics[0][0].partition(":")[0]],
               "complete": not failed["item_ids"], "failed_items": failed["items"],
               "failed_item_ids": failed["item_ids"], "compared_without_items": unread}
        for metric, column in metrics:
            level, _, rest = metric.partition(":")
            name, _, k = rest.partition("@")
            row[column] = summary_metric(summary, level, f"{name}@{k}")
            entry = by_key.get((label, metric)) or {}  # none for the reference: its comparison fields are None
            low, high = entry.get("ci95") or (None, None)
            row[f"{column}_delta"] = _round(entry.get("delta"))
            row[f"{column}_ci_low"], row[f"{column}_ci_high"] = _round(low), _round(high)
            row[f"{column}_p_holm"] = _significant(entry.get("p_holm"))
            row[f"{column}_holm_family"] = entry.get("holm_family")
            row[f"{column}_verdict"] = verdict({**entry, "baseline": labels[0], "system": label}) if entry else None
        ceilings = summary.get("ceiling") or {}
        row.update(arm=bool((manifest.get("system") or {}).get("control_arm")),
                   tuned_on_this_data=bool((results.get("tuning") or {}).get("tuned_on_this_data")),
                   **({"message_recall_all_10_ceiling": (ceilings.get("turn") or {}).get("recall_all@10")}
                      if by_turn else
                      {"session_recall_all_5_ceiling": (ceilings.get("session") or {}).get("recall_all@5")}))
        row.update(_fairness(manifest, results))
        row.update(ingest_ms_per_turn=round(build_ms / docs, 2) if docs else None,
                   recall_p50_ms=round(statistics.median(runtimes), 2) if runtimes else None,
                   wall_s=round(seconds, 1), peak_rss_mib=round(rss / 2**20, 1))
        rows.append(row)
    if by_turn:
        add_abilities(rows, loaded, labels, resamples)
    return rows


def _without_items(results: dict, items: list[str]) -> dict:
    """A checked results file's view without the records of `items` (compared as the board compares: checked
    once when read, then slimmed)."""
    return {**results, "records": [r for r in results["records"] if r.get("item_id") not in items]}


def _incomplete_lines(rows: list[dict]) -> list[str]:
    """One line per row whose run failed items: which, and what its means and comparison leave out."""
    lines = []
    for row in rows:
        if not row.get("complete", True):
            lines.append(printable(f"! {row['dataset']} {row['system']}: incomplete, {row['failed_items']} failed item(s) "
                         f"({', '.join(row['failed_item_ids'])}); its means leave them out"
                         + (f"; compared without {', '.join(row['compared_without_items'])}, whose questions "
                            "were never read" if row.get("compared_without_items") else
                            "; compared with their questions scored as misses")))
    return lines


def _fairness(manifest: dict, results: dict) -> dict:
    """Like for like, as the run's own files disclose it: the top_k every system was asked for, the embedder it
    used (none: it embeds nothing), how many questions got fewer docs than asked, how many hits the runner dropped
    (ids never ingested, repeats, more than asked), and the system's configuration in one line."""
    system = manifest.get("system") or {}
    ok = [r for r in results["records"] if r.get("status") == "ok"]
    setting = {k: v for k, v in system.items() if k not in ("name", "embedding_signature") and
               isinstance(v, (str, int, float, bool)) and v is not None}
    return {"top_k": manifest.get("fairness", {}).get("top_k"),
            "embedder": str(results.get("embedder") or "none").rsplit("/", 1)[-1],
            "version": system.get("version"),
            "short_rankings": manifest.get("evaluation", {}).get("short_rankings"),
            "rejected_hits": sum(len((r.get("diagnostics") or {}).get("rejected_hits") or []) for r in ok),
            "configuration": "; ".join(f"{k}={v}" for k, v in sorted(setting.items()))[:400]}


def _round(value, digits: int = 4):
    return None if value is None else round(float(value), digits)


def _significant(value, digits: int = 3):
    """A p-value kept to `digits` significant digits: rounded to decimals, a small p would read 0."""
    return None if value is None else float(f"{float(value):.{digits}g}")


def verdict_lines(rows: list[dict]) -> list[str]:
    """Under the table, each system's verdict against the reference on its dataset's headline metric (the strict
    session recall_all@5; BEAM's message recall_any@10), one line each, with the number of comparisons Holm
    adjusted over (a dataset's systems on that metric)."""
    from coordinator.results.verdicts import EXPLAINED

    lines = []
    for name, column in (("session:recall_all@5", "session_recall_all_5"), ("turn:recall_any@10 on BEAM",
                                                                             "message_recall_any_10")):
        said = [r for r in rows if r.get(f"{column}_verdict")]
        if said:
            lines += [f"verdicts on {name} (each system against the reference on its dataset):"]
            lines += [printable(f"  {r['dataset']}: {r[f'{column}_verdict']}") for r in said]
    return lines + [EXPLAINED] if lines else []


def _table(rows: list[dict]) -> list[str]:
    beam = [r for r in rows if led_by_turns(r["dataset"])]
    rows = [r for r in rows if not led_by_turns(r["dataset"])]
    return (_session_table(rows) if rows else []) + ([""] if rows and beam else []) + (beam_table(beam) if beam else [])


def _session_table(rows: list[dict]) -> list[str]:
    lines = [f"{'dataset':<12}{'system':<16}{'n':>5}{'all@5':>7}{'Δ all@5 [95% CI]':>26}{'p_holm':>8}{'any@5':>7}"
             f"{'nDCG10':>7}{'tR@10':>7}{'ms/turn':>9}{'p50 ms':>8}{'RSS MiB':>9}"]
    for position, r in enumerate(rows):
        if position and rows[position - 1]["dataset"] != r["dataset"]:
            lines.append(_ceiling_line(rows[position - 1]))
        delta = (f"{r['session_recall_all_5_delta']:+.3f} [{r['session_recall_all_5_ci_low']:+.3f},"
                 f"{r['session_recall_all_5_ci_high']:+.3f}]" if r["session_recall_all_5_delta"] is not None
                 else "reference")
        p = p_text(r.get("session_recall_all_5_p_holm")) if r.get("session_recall_all_5_p_holm") is not None else "-"
        mark = (" *" if r.get("arm") else " †" if r.get("tuned_on_this_data") else "") + (
            " !" if not r.get("complete", True) else "")
        lines.append(f"{r['dataset']:<12}{r['system'] + mark:<16}{r['n']:>5}{r['session_recall_all_5']:>7.3f}{delta:>26}"
                     f"{p:>8}{r['session_recall_any_5']:>7.3f}{r['session_ndcg_10']:>7.3f}"
                     f"{r['turn_recall_any_10']:>7.3f}{r['ingest_ms_per_turn'] or 0:>9.2f}"
                     f"{r['recall_p50_ms'] or 0:>8.2f}{r['peak_rss_mib']:>9.1f}")
    return lines + ([_ceiling_line(rows[-1])] if rows else [])


def _ceiling_line(row: dict) -> str:
    """The most session recall_all@5 any system could reach on the dataset's questions (from the gold)."""
    value = row.get("session_recall_all_5_ceiling")
    return f"{row['dataset']:<12}{'(ceiling)':<16}{'':>5}{value:>7.3f}" if value is not None else \
        f"{row['dataset']:<12}(ceiling: not in the results file)"
