"""Real server processes of the HTTP system contract for tests: the TypeScript reference server
(examples/http-system, built with its pinned compiler) and the misbehaving Python one (tests/wire_server.py)."""

import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import skip_outside_ci

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "http-system"
WIRE_SERVER = Path(__file__).with_name("wire_server.py")
TOKEN = "wire-t0ken-7f3a9c"


class ServerProcess:
    """A server in its own process group; `url` once it printed `listening on URL` (bounded wait)."""

    def __init__(self, argv: list[str], log: Path, env: dict | None = None, timeout: float = 30):
        self.argv, self.log = argv, log
        self._err = open(log, "ab")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._err, env=env, start_new_session=True)
        self.url = self._listening(timeout)
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def _listening(self, timeout: float) -> str:
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if selector.select(timeout=0.2):
                line = self.proc.stdout.readline().decode()
                if line.startswith("listening on "):
                    return line.split()[-1]
                if not line:
                    break
            if self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"{' '.join(self.argv)} did not start: {self.log.read_text()[-2000:]}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc.stdout.close()
        self._err.close()


def built_reference() -> Path:
    """The compiled reference server, compiled now if its sources are newer (needs `npm ci` done once)."""
    main = EXAMPLE / "dist" / "src" / "main.js"
    if shutil.which("node") is None:
        skip_outside_ci("node is not installed (the reference server runs on Node 20)")
    sources = [*EXAMPLE.glob("src/*.ts"), *EXAMPLE.glob("test/*.ts")]
    if main.is_file() and all(main.stat().st_mtime >= s.stat().st_mtime for s in sources):
        return main
    if not (EXAMPLE / "node_modules" / "typescript").is_dir():
        skip_outside_ci("the reference server's compiler is not installed: `make test` installs it "
                        "(cd examples/http-system && npm ci)")
    subprocess.run(["npm", "run", "build"], cwd=EXAMPLE, check=True, capture_output=True, timeout=600)
    return main


def reference_server(tmp_path: Path, *args: str, token: str | None = None, port: int = 0) -> ServerProcess:
    """The TypeScript reference server (`--leaky` for the variant whose reset forgets nothing)."""
    env = {k: v for k, v in os.environ.items() if k != "REFERENCE_SERVER_TOKEN"}
    if token:
        env["REFERENCE_SERVER_TOKEN"] = token
    name = "leaky" if "--leaky" in args else "reference"
    return ServerProcess(["node", str(built_reference()), "--port", str(port), *args], tmp_path / f"{name}.log", env)


def wire_server(tmp_path: Path, mode: str, *args: str, port: int = 0, token: str | None = None) -> ServerProcess:
    """tests/wire_server.py in `mode`, logging its requests to `tmp_path/wire-MODE.jsonl` (`requests()`)."""
    env = dict(os.environ, WIRE_TOKEN=token) if token else dict(os.environ)
    log = tmp_path / f"wire-{mode}.jsonl"
    server = ServerProcess([sys.executable, str(WIRE_SERVER), "--mode", mode, "--port", str(port), "--log", str(log),
                            *args], tmp_path / f"wire-{mode}.err", env)
    server.requests = lambda: _requests(log)
    return server


def _requests(log: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
