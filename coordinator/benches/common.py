"""What the benches share: writing a bench file, timing a `memfarm` child, a fresh work folder, a
generated LongMemEval-S file and how much it repeats itself, starting and stopping workers, Redis's
memory, and one quality row run here.

Each bench is a module of its own beside this one; this module measures nothing by itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from adapters.errors import MemfarmError
from adapters.files import write_json
from coordinator.running.reducer import git_commit

#: A wrapper process runs the `memfarm` child, so that RUSAGE_CHILDREN holds that child's peak alone. The child's
#: standard output (its table; the results file holds the same) is dropped, its standard error is the wrapper's.
_CHILD_WRAPPER = ("import resource,subprocess,sys,time;t=time.perf_counter();"
                  "p=subprocess.run([sys.executable,'-m','coordinator.cli',*sys.argv[1:]],"
                  "stdout=subprocess.DEVNULL);"
                  "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024);"
                  "sys.exit(p.returncode)")


def invoking_command(argv: list[str] | None = None) -> str:
    """The command line that made this process, as a user would type it (`memfarm bench ...`)."""
    argv = list(sys.argv if argv is None else argv)
    head = argv[0].replace("\\", "/") if argv else ""
    if head.endswith("/memfarm") or head == "memfarm" or "coordinator/cli" in head:
        prog = "memfarm"
    elif "devtools" in head:
        prog = "python -m devtools"
    else:
        prog = Path(head).name or "python"
    return " ".join([prog, *(shlex.quote(a) for a in argv[1:])])


def provenance() -> dict:
    """What made a measurement, as a file records it: the command, the commit, the machine, its cores and load
    average now, and the time (a figure in the manual is traced through these fields)."""
    return {"command": invoking_command(), "commit": git_commit(), "machine": platform.platform(),
            "cores": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()],
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def write_bench(name: str, data: dict, output: str | Path, started_at: str | None = None) -> Path:
    """`data` under the bench's name, with what made it (`provenance`, taken when the bench ended; `started_at`:
    the commit the bench started from, which a long bench records since the tree may move while it runs);
    written atomically and redacted."""
    made = provenance()
    if started_at and started_at != "unknown":
        made["commit"] = started_at
    return write_json(output, {"benchmark": name, **made, **data})


def child_command(args: list[str]) -> list[str]:
    """The argument list of the wrapper process that runs `memfarm ARGS` (readable by every local user)."""
    return [sys.executable, "-c", _CHILD_WRAPPER, *args]


def measure_memfarm(args: list[str], broker: str | None = None, written: str | Path | None = None,
                    show_progress: bool = False) -> tuple[float, int]:
    """Wall seconds and peak RSS in bytes of one `memfarm ARGS` child, measured by a fresh wrapper process.

    `broker` reaches the child in its environment (MEMFARM_BROKER), never among its arguments. `written`: the
    results file the child writes; a run that wrote it and ends non-zero because items failed is measured, not
    refused (its failed items are in the file, for the bench to report). `show_progress`: the child's progress
    lines (its standard error) reach this process's standard error as they come; otherwise they are kept, and the
    last of them are in the error a failed child raises."""
    env = dict(os.environ, MEMFARM_BROKER=broker) if broker else None
    # the wrapper and the `memfarm` it runs in a group of their own, stopped together if this process is stopped
    # (Ctrl-C, or SIGTERM where a bench turns it into an exit): killing the wrapper alone would leave the run
    child = subprocess.Popen(child_command(args), stdout=subprocess.PIPE,
                             stderr=None if show_progress else subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
    try:
        stdout, stderr = child.communicate()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise
    proc = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    if proc.returncode != 0 and not (proc.returncode == 1 and written is not None and Path(written).is_file()):
        said = "\n".join((proc.stderr or "").strip().splitlines()[-5:])
        raise RuntimeError(f"memfarm {' '.join(args)} failed (exit {proc.returncode})" + (f":\n{said}" if said else ""))
    seconds, rss = proc.stdout.split()
    return float(seconds), int(rss)


#: The file a bench leaves in the folder it works in: only a folder holding it is emptied by the next bench.
WORKDIR_MARKER = ".memfarm-bench-workdir"


def fresh_workdir(workdir: str | Path, keep: bool = False) -> Path:
    """An empty `workdir`: what an earlier bench left there is removed, so that a cold run is cold (`keep`: what
    is there stays, for a bench that reuses its own earlier runs).

    Only a bench's own folder is ever emptied or written into (it holds `WORKDIR_MARKER`): a folder that holds
    anything else, or a symbolic link, is refused before anything is touched, so a mistyped `--workdir results`
    deletes nothing."""
    workdir = Path(workdir)
    if workdir.is_symlink():
        raise MemfarmError(f"--workdir {workdir}: is a symbolic link; name a folder of the bench's own")
    if workdir.exists():
        if not workdir.is_dir():
            raise MemfarmError(f"--workdir {workdir}: exists and is not a folder")
        if any(workdir.iterdir()) and not (workdir / WORKDIR_MARKER).is_file():
            raise MemfarmError(f"--workdir {workdir}: holds files no bench made (no {WORKDIR_MARKER} in it), and a "
                               "bench empties its folder first; name a new or empty folder")
        if not keep:
            shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / WORKDIR_MARKER).write_text("made by memfarm bench; emptied by the next bench run here\n")
    return workdir


def generated_longmemeval(workdir: Path, questions: int, scale: float, seed: int) -> Path:
    """A generated LongMemEval-S file whose sessions repeat about as often as the real file's."""
    from adapters.generators.longmemeval_s import DISTINCT_SESSION_SHARE, write

    path = workdir / "data.json"
    write(path, questions, seed=seed, scale=scale, distinct_share=DISTINCT_SESSION_SHARE)
    return path


def question_files(data: Path, workdir: Path, name: str, size: int,
                   limit: int | None = None) -> list[tuple[Path, Path]]:
    """`data` read as a stream and cut into files of `size` consecutive questions (its first `limit` only, where
    given), NAME_0.json, NAME_1.json, ..., each with its companion questions file NAME_K_q.json."""
    from itertools import islice

    from adapters.benchmarks.longmemeval.reader import extract_questions
    from adapters.jsonstream import iter_array

    if size < 1:
        raise ValueError(f"question_files: size must be at least 1, not {size}")
    questions, files = islice(iter_array(data), limit), []
    while part := list(islice(questions, size)):
        path, companion = workdir / f"{name}_{len(files)}.json", workdir / f"{name}_{len(files)}_q.json"
        path.write_text(json.dumps(part, ensure_ascii=False), encoding="utf-8")
        extract_questions(path, companion)
        files.append((path, companion))
    return files


def redis_used_memory(url: str) -> int:
    """The Redis server's `used_memory` in bytes."""
    from workers.farm.connection import connect

    return int(connect(url).info("memory")["used_memory"])


def start_workers(broker: str, workdir: Path, tag: str, count: int, threads: int) -> list:
    """`count` workers named TAG0, TAG1, ..., each with its own cache and log under `workdir`, once all are
    ready; those started are stopped again if any fails to come up."""
    from coordinator.operations.processes import start_worker, wait_ready

    running = []
    try:
        for number in range(count):
            running.append(start_worker(broker, f"{tag}{number}", workdir / f"cache_{tag}{number}",
                                        workdir / f"{tag}{number}.log", torch_threads=threads))
        wait_ready(running)  # Celery writes its ready line once the pool's processes have started
    except BaseException:
        stop_workers(running)
        raise
    return running


def stop_workers(running: list) -> None:
    """Stop each worker's whole process group and empty `running`: stopping twice stops nothing."""
    for child in running:
        child.stop()
    running.clear()


def sharing_statistics(path: str | Path) -> dict:
    """How much a LongMemEval file repeats itself: session occurrences (each one, as the official evaluation counts
    them) vs distinct ids, turns vs distinct texts."""
    from adapters.jsonstream import iter_array

    occurrences, sessions, turns, texts = 0, set(), 0, set()
    for question in iter_array(path):
        for sid, session in zip(question["haystack_session_ids"], question["haystack_sessions"]):  # every occurrence
            occurrences += 1
            sessions.add(sid)
            for turn in session:
                if isinstance(turn.get("content"), str) and turn["content"].strip():
                    turns += 1
                    texts.add(turn["content"])
        texts.add(question["question"])
        turns += 1
    return {"session_occurrences": occurrences, "distinct_sessions": len(sessions),
            "texts_given_to_the_model": turns, "distinct_texts": len(texts),
            "real_file": {"session_occurrences": 23867, "distinct_sessions": 19195}}


def quality_row(spec, workdir: Path, label: str) -> tuple[dict, dict]:
    """Run `spec` here through the reducer; write its results file and manifest under `workdir`."""
    from coordinator.running.local_executor import run_local
    from coordinator.running.reducer import write_results

    results, manifest = run_local(spec)
    name = "".join(c if c.isalnum() else "-" for c in label).strip("-")
    write_results(results, manifest, workdir / f"{spec.benchmark}_{name}.json")
    return results, manifest


def metric(summary: dict, level: str, name: str) -> float | None:
    """One metric of a run's summary at `level`, to four places; None where the level was not measured (a
    bench file is strict JSON, which has no NaN)."""
    value = (summary.get(level) or {}).get(name)
    return None if value is None else round(value, 4)


def shown(value) -> float:
    """A table cell's number: a measure that is None (not measured) prints as nan."""
    return float("nan") if value is None else value
