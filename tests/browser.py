"""A real headless Chromium driven over the DevTools protocol, for tests of pages a person looks at.

The protocol runs over a pipe (`--remote-debugging-pipe`: the browser reads
commands on fd 3 and writes replies and events on fd 4, each a JSON message
ended by a NUL byte), so no port is opened and no client library is needed.
Every console message, uncaught exception and browser log entry (a blocked
resource, a refused script) is kept, so that a test can require none was an error.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.helpers import skip_outside_ci

#: Seconds a command or a page load may take on a loaded two-core machine.
TIMEOUT = 60.0


def chromium_path() -> str:
    """The chromium binary; a skip here, a failure under CI=true."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        skip_outside_ci("chromium is not installed (tools/system-packages installs it)")
    return found


class BrowserError(RuntimeError):
    """The browser answered a command with an error, or not in time."""


class Browser:
    """One headless Chromium with one page; `with Browser() as b: b.open(url) ...`."""

    def __init__(self, width: int = 1280, height: int = 900):
        self._profile = tempfile.mkdtemp(prefix="memfarm-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        args = [chromium_path(), "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-component-update", "--mute-audio",
                f"--user-data-dir={self._profile}", f"--window-size={width},{height}", "about:blank"]

        def wire_fds():  # in the child: the pipe ends at fds 3 and 4, where chromium expects them
            read_end, write_end = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read_end, 3)  # dup2 makes 3 and 4 inheritable; Python's other fds are not
            os.dup2(write_end, 4)

        # close_fds=False: subprocess would close fds 3 and 4 after wire_fds made them
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, preexec_fn=wire_fds, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        self.session = None
        target = self.command("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.command("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.command(f"{domain}.enable")
        self.command("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                try:
                    self.command("Browser.close", session=False, timeout=10)
                except (BrowserError, OSError):
                    pass
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError("no message from chromium in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def command(self, method: str, params: dict | None = None, *, session: bool = True,
                timeout: float = TIMEOUT) -> dict:
        """Send one command (to the page's session unless `session` is False) and return its result;
        events that arrive meanwhile are kept in `events`."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, event: str, timeout: float = TIMEOUT) -> dict:
        """The next event named `event` (one already received and not yet waited for counts)."""
        deadline = time.monotonic() + timeout
        for index, kept in enumerate(self.events):
            if kept.get("method") == event and not kept.get("_seen"):
                kept["_seen"] = True
                return kept
        while True:
            reply = self._read_message(deadline)
            if "method" in reply:
                self.events.append(reply)
                if reply["method"] == event:
                    reply["_seen"] = True
                    return reply

    def open(self, url: str) -> None:
        """Load `url` and wait for its load event."""
        for kept in self.events:
            if kept.get("method") == "Page.loadEventFired":
                kept["_seen"] = True
        result = self.command("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"{url}: {result['errorText']}")
        if "loaderId" not in result:  # only the fragment changed: the document stays, no load event comes
            raise BrowserError(f"{url}: same document as the page open now; open another page first")
        self.wait_for("Page.loadEventFired")

    def eval(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-able values only)."""
        result = self.command("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                   "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """Scroll the element into view and click its centre with a real mouse event."""
        box = self.eval(f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
                        " el.scrollIntoView({block: 'center', inline: 'center'}); const r = el.getBoundingClientRect();"
                        " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.command("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                      "clickCount": 1})

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        params = {"format": "png"}
        if full_page:
            size = self.eval("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size[0], "height": min(size[1], 6000), "scale": 1})
        Path(path).write_bytes(base64.b64decode(self.command("Page.captureScreenshot", params)["data"]))
        return Path(path)

    def problems(self) -> list[str]:
        """Every console error, uncaught exception and browser log error seen so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails'].get('text')} "
                             f"{(params['exceptionDetails'].get('exception') or {}).get('description', '')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                found.append(f"console.{params['type']}: {[a.get('value') for a in params.get('args', [])]}")
            elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
                found.append(f"log {params['entry'].get('source')}: {params['entry'].get('text')} "
                             f"({params['entry'].get('url', '')})")
        return found
