"""A run fetches nothing: not even a host name is looked up, by Python or by a native library it loads.

Every process of the run is traced with strace; a look-up shows as a `connect` to a resolver's port 53 (glibc
connects its UDP socket before it asks), and any other connection off the loopback is a reach outward too.
ONNX Runtime's native library looks up its telemetry host unless its switch is set before it loads: a Python-level
guard never sees that, which is why the trace is of system calls.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.adapters.systems.one_conversation import need
from tests.helpers import skip_outside_ci, write_dataset

_CONNECT = re.compile(r'connect\(\d+, \{sa_family=AF_INET6?, (?:sin6?_port=htons\((\d+)\), )?[^}]*?'
                      r'(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")')
#: What the run's environment must not already hold: the test shows the command sets them itself.
_SWITCHES = ("ORT_DISABLE_TELEMETRY", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def reaches_out(trace: str) -> list[str]:
    """The lines of an strace log that look a name up or connect off the loopback."""
    found = []
    for line in trace.splitlines():
        match = _CONNECT.search(line)
        if not match:
            continue
        port, address = match.group(1), match.group(2) or match.group(3)
        if port == "53" or not (address.startswith("127.") or address == "::1"):
            found.append(line.strip())
    return found


def traced(tmp_path, name: str, *args: str, env: dict | None = None) -> list[str]:
    """Run `args` under strace (every thread and child) and return its reaches outward."""
    if shutil.which("strace") is None:
        skip_outside_ci("strace is not installed (`make test` installs it: tools/system-packages strace)")
    log = tmp_path / f"{name}.strace"
    clean = {k: v for k, v in os.environ.items() if k not in _SWITCHES}
    done = subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(log), *args],
                          env={**clean, **(env or {})}, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return reaches_out(log.read_text())


def test_the_trace_sees_a_look_up_made_by_any_thread(tmp_path):
    """The detector itself: a look-up from a thread of a child process is seen (so a silent run means silence)."""
    code = ("import socket, threading\n"
            "def ask():\n"
            "    try: socket.getaddrinfo('memfarm-lookup.invalid', 80)\n"
            "    except OSError: pass\n"
            "t = threading.Thread(target=ask); t.start(); t.join()\n")
    assert traced(tmp_path, "control", sys.executable, "-c", code)


@pytest.mark.parametrize("system, options", [
    ("memoria", ("--retrieval-mode", "dense", "--embedder-backend", "onnx")),
    ("txtai", ("--embedder-backend", "onnx")),
])
def test_a_run_on_onnx_runtime_looks_up_no_name(tmp_path, embedder, system, options):
    if system == "txtai":
        need("txtai", "txtai")
    data = write_dataset(tmp_path / "lme.json", questions=2, seed=3, scale=0.02)
    found = traced(tmp_path, system, sys.executable, "-m", "coordinator.cli", "run", "longmemeval",
                   "--dataset", str(data), "--system", system, *options, "--output", str(tmp_path / "out.json"))
    assert found == [], "the run reached out:\n" + "\n".join(found[:5])
