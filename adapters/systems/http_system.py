"""A system under test behind HTTP, in any language, on any host: the four-method contract over the wire.

`--system http://HOST:PORT[/PREFIX]` (or `https://`) names it; the wire format, its bounds and the URL
checks are `adapters.systems.http_client`. The server sees what an in-process system sees: the same
rendered docs, opaque ids, whitelisted props, the task's question and top_k. Each item gets a label of
its own on the wire (the runner's label and a random suffix, new for every item and attempt), so
workers, runs and retries sharing one server never meet. A whole item's ingest is started again (reset,
then every doc again) when a call fails midway.
"""

from __future__ import annotations

import logging
import os
import secrets

from adapters.defaults import HTTP_INGEST_BATCH
from adapters.systems.contract import Describes, Diagnoses, Remote
from adapters.systems.http_client import TOKEN_ENV, WIRE_VERSION, HttpClient, HttpSystemError
from adapters.terminal import printable

logger = logging.getLogger(__name__)


class HttpSystem(Describes, Diagnoses, Remote):
    """The contract of a system under test (`reset`, `ingest`, `retrieve`) over `HttpClient`.

    The Python contract's `reset()` names no label, the wire's does: the labels an item is ingested under are
    minted when its docs arrive (runner label + random suffix), reset on the server before the first doc, and
    reset again (freed) when the next item begins."""

    name = "http"

    def __init__(self, url: str, *, timeout: float | None = None, retries: int | None = None,
                 ingest_batch: int = HTTP_INGEST_BATCH):
        self.client = HttpClient(url, timeout=timeout, retries=retries)
        self.url = self.client.url
        self.ingest_batch = ingest_batch
        self._wire: dict[str, str] = {}
        self._docs: dict[str, int] = {}  # docs ingested per label this item: what bounds an answer's count
        self._info: dict | None = None
        self.last_diagnostics: dict = {}

    @property
    def info(self) -> dict:
        """The server's own account of itself (GET /info, asked once): a server that is down fails here,
        before anything is staged or run."""
        if self._info is None:
            self._info = self.client.info()
            self.name = self._info["name"]
        return self._info

    def changed_since(self, staged: dict | None) -> str | None:
        """Why the server no longer is the one a run was staged against (its info, asked again now), or None.

        A run's manifest discloses the info the coordinator was given; an item served by a server that has
        since changed its name, version or config would make that disclosure untrue."""
        if not isinstance(staged, dict):
            return None
        now = self.client.info()
        if now == staged:
            return None
        changed = [key for key in ("name", "version", "config") if now.get(key) != staged.get(key)]
        return (f"server {self.url} now answers info {printable(now['name'])} {printable(now['version'])}, "
                f"the run was staged against {printable(staged.get('name'))} "
                f"{printable(staged.get('version'))} ({', '.join(changed)} changed): stage a new run")

    @property
    def config(self) -> dict:
        """What the manifest discloses: the server's info as it gave it, and how it was called."""
        info = self.info
        return {"name": info["name"], "retrieval_mode": "http", "url": self.url, "wire_version": WIRE_VERSION,
                "info": info, "timeout_seconds": self.client.timeout, "retries": self.client.retries,
                "ingest_batch": self.ingest_batch, "token": bool(os.environ.get(TOKEN_ENV))}

    def reset(self) -> None:
        """Forget the previous item: its labels are reset on the server (best effort: a server that cannot
        answer now fails the next item's own calls, with their own error)."""
        wire, self._wire, self._docs = list(self._wire.values()), {}, {}
        for label in wire:
            try:
                self.client.reset(label)
            except HttpSystemError as exc:
                logger.warning("could not free label %s: %s", label, exc)

    def wire_label(self, label: str) -> str:
        """The label the server knows `label` by in this item (a fresh one for a label not ingested)."""
        if label not in self._wire:
            self._wire[label] = f"{label}.{secrets.token_hex(6)}"
        return self._wire[label]

    def ingest(self, docs: list[dict]) -> None:
        groups: dict[str, list[dict]] = {}
        for doc in docs:
            groups.setdefault(doc["label"], []).append(
                {"external_id": doc["external_id"], "text": doc["text"], "props": doc.get("props") or {}})
        for label, wire_docs in groups.items():
            self._ingest_label(self.wire_label(label), wire_docs)
            self._docs[label] = len(wire_docs)  # the label was reset first: these are all it holds

    def _ingest_label(self, wire: str, docs: list[dict]) -> None:
        """Reset, then every doc in batches; a failure midway that may pass starts the label again."""
        client = self.client
        for attempt in range(client.retries + 1):
            try:
                client.reset(wire)
                for start in range(0, len(docs), self.ingest_batch):
                    client.ingest(wire, docs[start:start + self.ingest_batch])
                return
            except HttpSystemError as exc:
                if not exc.retryable or attempt == client.retries:
                    raise exc.after(attempt + 1) from None
                client.pause(attempt, "ingest (the item again: reset, then every doc)", exc)

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        wire = self.wire_label(label)
        # in each record: what to look for in the server's own logs
        self.last_diagnostics = {"wire_label": wire}
        return self.client.retrieve(wire, query, top_k, docs=self._docs.get(label, 0))
