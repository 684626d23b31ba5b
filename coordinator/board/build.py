"""`memfarm board`: many runs of many systems side by side, and what each returned for every question.

A static folder (HTML, one stylesheet, one small script, SVG pictures) that
opens from the file system and fetches nothing: `data` reads and pairs
the runs, `pages` writes the pages, `charts` draws. `serve` shows a
built board on localhost for those who prefer a URL.
"""

from __future__ import annotations

import functools
import http.server
import logging
import time
from pathlib import Path

from coordinator.board import data as board_data, pages as board_pages
from coordinator.board.files import NOT_REGULAR
from coordinator.results.compare import DEFAULT_RESAMPLES, DEFAULT_SEED

logger = logging.getLogger(__name__)

#: `--serve` listens here, on the loopback interface only.
DEFAULT_PORT = 8765


def build_board(paths: list[str | Path], output: str | Path, *, resamples: int = DEFAULT_RESAMPLES,
                seed: int = DEFAULT_SEED) -> dict:
    """Read the results files among `paths`, write the board into `output`; what was built and how long it took."""
    started = time.perf_counter()
    board_pages.check_output(output)  # before the runs are read: a refused folder is said at once
    data = board_data.build_data(paths, exclude=Path(output), resamples=resamples, seed=seed)
    read = time.perf_counter()
    written = board_pages.write_site(data, output)
    return {**written, "runs": data["runs"], "groups": len(data["groups"]), "skipped": len(data["skipped"]),
            "not_regular": [line for line in data["skipped"] if line.endswith(NOT_REGULAR)],
            "read_seconds": round(read - started, 3), "write_seconds": round(time.perf_counter() - read, 3),
            "seconds": round(time.perf_counter() - started, 3)}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        logger.debug("%s " + format, self.address_string(), *args)


def make_server(directory: str | Path, port: int = DEFAULT_PORT) -> http.server.ThreadingHTTPServer:
    """An HTTP server of `directory` on 127.0.0.1 (`port` 0: any free port); the caller runs and closes it."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
