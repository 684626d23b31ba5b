"""The wire client of a system behind HTTP: JSON wire format version 1, its URL checks and its bounds.

The wire format (also in `http-systems.openapi.yaml` beside this file):

- `GET  {base}/info` -> `{"name": str, "version": str, "config": {...}}` (the manifest records it)
- `POST {base}/reset` `{"label": str}` -> `{}`
- `POST {base}/ingest` `{"label": str, "docs": [{"external_id": str, "text": str, "props": {...}}]}`
  -> `{}`
- `POST {base}/retrieve` `{"label": str, "query": str, "top_k": int}`
  -> `{"hits": [{"external_id": str, "score": float}]}`
- a non-2xx answer may carry `{"error": str}`; `Authorization: Bearer TOKEN` is sent when
  MEMFARM_SYSTEM_TOKEN is set.

The network is not trusted: every call has a deadline, answers are bounded in size and checked field
by field, and info / reset / retrieve are retried with backoff. Redirects are not followed (a worker's
allow-list names the one origin it may call). The token is read from the environment only and is never
part of a message, a config or an error. The coordinator and the workers check a system URL here
without loading the system class (`adapters.systems.http_system`).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import math
import os
import random
import re
import socket
import ssl
import threading
import time
from urllib.parse import urlsplit

from adapters.defaults import (HTTP_BACKOFF_CAP_SECONDS, HTTP_BACKOFF_SECONDS, HTTP_MAX_INFO_BYTES,
                               HTTP_MAX_RESPONSE_BYTES, HTTP_RETRIES, HTTP_TIMEOUT_SECONDS, MAX_JSON_DEPTH)
from adapters.errors import MemfarmError
from adapters.hits import count_problem
from adapters.jsonstream import nesting_depth
from adapters.terminal import printable

logger = logging.getLogger(__name__)

WIRE_VERSION = 1
TOKEN_ENV = "MEMFARM_SYSTEM_TOKEN"
TIMEOUT_ENV = "MEMFARM_SYSTEM_TIMEOUT"
RETRIES_ENV = "MEMFARM_SYSTEM_RETRIES"
SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Longest `name` / `version` an info answer may give (they name result files and tables).
_MAX_NAME_CHARS = 200
#: Longest part of a server's error text kept in a message.
_MAX_ERROR_CHARS = 300
#: Deepest an answer may nest, its top level counting as 1: wire v1's answers nest 3 deep, and info's config
#: goes into the manifest, which every reader refuses past MAX_JSON_DEPTH.
MAX_ANSWER_DEPTH = 20
#: What a URL's path may hold (RFC 3986: unreserved, sub-delims, `:@/`, percent escapes): it is sent as it is.
_PATH = re.compile(r"(?:[A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{2})*")
_HOST_LABEL = re.compile(r"[A-Za-z0-9_-]{1,63}")


class HttpSystemError(MemfarmError):
    """A call to a system behind HTTP failed: `call` names it, `field` the part of the answer that was wrong.

    `retryable`: the network or the server may do better on another try (no answer, a timeout, 5xx, 429)."""

    def __init__(self, url: str, call: str, problem: str, *, field: str | None = None,
                 retryable: bool = False):
        self.url, self.call, self.problem, self.field, self.retryable = url, call, problem, field, retryable
        where = f" field {field}:" if field else ""
        super().__init__(f"system {url} {call}:{where} {problem}")

    def after(self, tries: int) -> "HttpSystemError":
        """The same error, saying how many tries it took (one try: itself)."""
        if tries < 2:
            return self
        return HttpSystemError(self.url, self.call, f"{self.problem} (after {tries} tries)", field=self.field,
                               retryable=self.retryable)


def is_http_system(spec) -> bool:
    """Whether a `--system` value names a server (http:// or https://) rather than a Python class."""
    return isinstance(spec, str) and spec.lower().startswith(("http://", "https://"))


def parse_url(spec: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, prefix) of a system URL; MemfarmError for anything else.

    No user, password, query or fragment: a secret goes in MEMFARM_SYSTEM_TOKEN, never in a URL that is
    recorded in results and shown on command lines."""
    shown = _without_secrets(spec)
    try:
        parts = urlsplit(spec)
        port = parts.port
    except ValueError as exc:  # its text may quote a password read as a port: said only for a URL with none
        raise MemfarmError(f"system {shown!r}: not a URL" + ("" if "@" in spec else f" ({exc})")) from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES or not parts.hostname:
        raise MemfarmError(f"system {shown!r}: expected http://HOST:PORT[/PREFIX] or https://...")
    if parts.username is not None or parts.password is not None:
        raise MemfarmError(f"system {shown!r}: no user or password in the URL; put a token "
                           f"in the environment variable {TOKEN_ENV}")
    if parts.query or parts.fragment or "?" in spec or "#" in spec:
        raise MemfarmError(f"system {shown!r}: no query or fragment in the URL (a token goes in {TOKEN_ENV})")
    if not _PATH.fullmatch(parts.path):
        raise MemfarmError(f"system {shown!r}: the path may hold ASCII letters, digits and "
                           "-._~!$&'()*+,;=:@/ only; write others percent-encoded (%C3%BC for ü)")
    return scheme, _ascii_host(parts.hostname, shown), port or _DEFAULT_PORTS[scheme], parts.path.rstrip("/")


def _ascii_host(host: str, shown: str) -> str:
    """The host as it is looked up and sent: an IP address, or a name in ASCII (an international name in its
    IDNA form, xn--...), lower-cased."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        name = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        name = ""
    if not all(_HOST_LABEL.fullmatch(label) for label in name.removesuffix(".").split(".")):
        raise MemfarmError(f"system {shown!r}: the host is neither an IP address nor a valid (IDNA) name")
    return name


def _without_secrets(spec: str) -> str:
    """A refused URL as an error may show it: nothing before its last `@` (a password may hold `/`, `?`
    or `#`, which end the host part for a parser), nothing from its first `?` or `#` (a query may carry
    a token)."""
    text = printable(spec)
    if "@" in text:
        text = "..." + text.rsplit("@", 1)[-1]
    return re.split(r"[?#]", text, maxsplit=1)[0]


def canonical_url(spec: str) -> str:
    """The one spelling of a system URL: scheme and host lower-cased, the port written out, no trailing
    slash."""
    scheme, host, port, prefix = parse_url(spec)
    shown_host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown_host}:{port}{prefix}"


def origin(spec: str) -> tuple[str, str, int]:
    """What a worker's allow-list compares: scheme, host and port."""
    return parse_url(spec)[:3]


def _env_number(name: str, default, kind, least):
    value = os.environ.get(name)
    if not value:
        return default
    try:
        number = kind(value)
    except ValueError:
        number = None
    if number is None or not math.isfinite(number) or number < least:
        raise MemfarmError(f"{name}={value!r}: expected a number of at least {least}")
    return number


def finite_number(value) -> bool:
    """Whether `value` is a JSON number that is a finite float (not a bool, not an int past float's range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _shut(connection: http.client.HTTPConnection, expired: threading.Event) -> None:
    """The deadline of a call passed: shut its socket, so that a read blocked on it returns now."""
    expired.set()
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # already closed: the call is over
            pass


def redacted(value):
    """`value` (JSON) with the token written as `***` wherever a server echoed it back: in what it discloses
    about itself (the manifest), in its error texts (the ledger, the logs), in a key as in a value."""
    token = os.environ.get(TOKEN_ENV)
    if not token:
        return value
    if isinstance(value, str):
        return value.replace(token, "***")
    if isinstance(value, dict):
        return {redacted(key): redacted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item) for item in value]
    return value


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _unwritable(value, where: str | None) -> tuple[str | None, str | None]:
    """(field, problem) of the first part of a parsed answer that a results file or manifest could not hold
    as JSON every reader reads back: nesting past MAX_ANSWER_DEPTH, a number past a float's range (`1e400`
    parses as infinity); (None, None) when there is none."""
    stack = [(value, where, 1)]
    while stack:
        item, path, depth = stack.pop()
        shown = printable(path or "the answer")[:120]
        if isinstance(item, float) and not math.isfinite(item):
            return shown, f"{item!r} is not a finite number (JSON has no NaN or infinity)"
        if isinstance(item, (dict, list)):
            if depth > MAX_ANSWER_DEPTH:
                return shown, f"nests more than {MAX_ANSWER_DEPTH} levels deep"
            for key, child in item.items() if isinstance(item, dict) else enumerate(item):
                step = f"[{key}]" if isinstance(item, list) else f".{key}" if path else str(key)
                stack.append((child, (path or "") + step, depth + 1))
    return None, None


class HttpClient:
    """The four calls of wire format v1 against one base URL, each with a deadline, a size bound and checked
    answers; info, reset and retrieve retried with backoff. `latencies` holds each call's milliseconds."""

    def __init__(self, url: str, *, timeout: float | None = None, retries: int | None = None,
                 max_response_bytes: int = HTTP_MAX_RESPONSE_BYTES, backoff: float = HTTP_BACKOFF_SECONDS):
        self.url = canonical_url(url)
        self.scheme, self.host, self.port, self.prefix = parse_url(url)
        self.timeout = float(timeout if timeout is not None else
                             _env_number(TIMEOUT_ENV, HTTP_TIMEOUT_SECONDS, float, 0.001))
        self.retries = int(retries if retries is not None else _env_number(RETRIES_ENV, HTTP_RETRIES, int, 0))
        self.max_response_bytes = max_response_bytes
        self.backoff = backoff
        self.latencies: dict[str, list[float]] = {}

    # -- the four calls ---------------------------------------------------------------
    def info(self) -> dict:
        answer = self._retried("info", "GET", None, HTTP_MAX_INFO_BYTES)
        for name in ("name", "version"):
            value = answer.get(name)
            if not isinstance(value, str) or not value.strip() or len(value) > _MAX_NAME_CHARS:
                raise self._error("info", f"expected a non-empty string of at most {_MAX_NAME_CHARS} "
                                          f"characters, got {printable(repr(value))[:80]}", field=name)
        if not isinstance(answer.get("config"), dict):
            raise self._error("info", f"expected an object, got {type(answer.get('config')).__name__}",
                              field="config")
        where, problem = _unwritable(answer["config"], "config")
        if where:  # the manifest must stay JSON that every reader reads back
            raise self._error("info", problem, field=where)
        return {"name": answer["name"], "version": answer["version"], "config": answer["config"]}

    def reset(self, label: str) -> None:
        self._retried("reset", "POST", {"label": label})

    def ingest(self, label: str, docs: list[dict]) -> None:
        """One ingest call, not retried (a server may have stored part of it): `HttpSystem` retries the
        item."""
        self._call("ingest", "POST", {"label": label, "docs": docs}, self.max_response_bytes)

    def retrieve(self, label: str, query: str, top_k: int, docs: int | None = None) -> list[dict]:
        """The hits, checked; with `docs` (how many the label holds), a flood fails on its count, before its
        hits are read one by one."""
        answer = self._retried("retrieve", "POST", {"label": label, "query": query, "top_k": top_k})
        hits = answer.get("hits")
        if not isinstance(hits, list):
            raise self._error("retrieve", f"expected a list, got {type(hits).__name__}", field="hits")
        flood = count_problem(len(hits), top_k, docs) if docs is not None else None
        if flood:
            raise self._error("retrieve", flood, field="hits")
        checked = []
        for position, hit in enumerate(hits):
            where = f"hits[{position}]"
            if not isinstance(hit, dict):
                raise self._error("retrieve", f"expected an object, got {type(hit).__name__}", field=where)
            if not isinstance(hit.get("external_id"), str):
                raise self._error("retrieve",
                                  f"expected a string, got {type(hit.get('external_id')).__name__}",
                                  field=f"{where}.external_id")
            if not finite_number(hit.get("score")):
                raise self._error("retrieve",
                                  f"expected a finite number, got {printable(repr(hit.get('score')))[:40]}",
                                  field=f"{where}.score")
            checked.append({"external_id": hit["external_id"], "score": float(hit["score"])})
        return checked

    # -- transport --------------------------------------------------------------------
    def _retried(self, call: str, method: str, body, limit: int | None = None) -> dict:
        for attempt in range(self.retries + 1):
            try:
                return self._call(call, method, body, limit or self.max_response_bytes)
            except HttpSystemError as exc:
                if not exc.retryable or attempt == self.retries:
                    raise exc.after(attempt + 1) from None
                self.pause(attempt, call, exc)
        raise AssertionError("unreachable")

    def pause(self, attempt: int, call: str, exc: Exception) -> None:
        """Wait before try `attempt + 2`: exponential backoff with jitter, so that workers do not retry in
        step."""
        delay = min(HTTP_BACKOFF_CAP_SECONDS, self.backoff * 2 ** attempt) * random.uniform(0.5, 1.0)
        logger.info("%s (try %d of %d); again in %.2f s", exc, attempt + 1, self.retries + 1, delay)
        time.sleep(delay)  # the backoff itself

    def _headers(self, body: bytes | None) -> dict:
        headers = {"Accept": "application/json", "User-Agent": f"memoria-farm/wire-v{WIRE_VERSION}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        token = os.environ.get(TOKEN_ENV)
        if token:
            # http.client would echo a bad header value in its error
            if not all("!" <= ch <= "~" for ch in token):
                raise MemfarmError(f"{TOKEN_ENV} holds a character a header cannot carry (a space, a line "
                                   "break or non-ASCII); the token is not shown")
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _connection(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def _call(self, call: str, method: str, body, limit: int) -> dict:
        """One request; the answer's JSON object, or HttpSystemError saying what went wrong."""
        payload = json.dumps(body, ensure_ascii=False).encode() if body is not None else None
        started = time.perf_counter()
        deadline = started + self.timeout
        headers = self._headers(payload)
        connection = self._connection()
        # A socket timeout bounds each read, not the answer: a server dripping its status line or headers a
        # byte at a time would hold the call for hours. At the deadline the socket is shut, whatever is being
        # read.
        expired = threading.Event()
        watchdog = threading.Timer(self.timeout, _shut, args=(connection, expired))
        watchdog.daemon = True
        watchdog.start()
        try:
            connection.request(method, f"{self.prefix}/{call}", body=payload, headers=headers)
            response = connection.getresponse()
            raw = self._read(response, call, limit, deadline, connection)
        except HttpSystemError:
            raise
        except (OSError, http.client.HTTPException) as exc:
            timed_out = expired.is_set() or isinstance(exc, TimeoutError) or "timed out" in str(exc)
            problem = f"no answer within {self.timeout:g} s" if timed_out else \
                f"no answer ({type(exc).__name__}: {printable(redacted(str(exc)))[:_MAX_ERROR_CHARS]})"
            # a certificate that does not verify will not verify on another try
            raise HttpSystemError(self.url, call, problem,
                                  retryable=not isinstance(exc, ssl.SSLCertVerificationError)) from None
        finally:
            watchdog.cancel()
            connection.close()
        self.latencies.setdefault(call, []).append((time.perf_counter() - started) * 1000)
        if not 200 <= response.status < 300:
            raise HttpSystemError(self.url, call, f"HTTP {response.status}{self._server_error(raw)}",
                                  retryable=response.status >= 500 or response.status == 429)
        depth = nesting_depth(raw)
        if depth > MAX_JSON_DEPTH:  # not parsed: Python's parser recurses once per level
            raise self._error(call, f"the answer nests {depth:,} levels deep (at most {MAX_ANSWER_DEPTH})")
        try:
            answer = redacted(json.loads(raw.decode("utf-8"), parse_constant=_reject_constant))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise self._error(call, f"the answer is not JSON ({printable(exc)[:120]})") from None
        if not isinstance(answer, dict):
            raise self._error(call, f"the answer is {type(answer).__name__}, expected an object")
        if depth > MAX_ANSWER_DEPTH:
            where, problem = _unwritable(answer, None)
            raise self._error(call, problem or f"the answer nests {depth} levels deep", field=where)
        return answer

    def _read(self, response, call: str, limit: int, deadline: float, connection) -> bytes:
        length = response.getheader("Content-Length")
        if length and length.isdigit() and int(length) > limit:
            raise self._error(call, f"the answer is over {limit} bytes (Content-Length {length})")
        chunks, size = [], 0
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise HttpSystemError(self.url, call, f"no whole answer within {self.timeout:g} s",
                                      retryable=True)
            if connection.sock is not None:
                connection.sock.settimeout(left)
            chunk = response.read1(65536) if hasattr(response, "read1") else response.read(65536)
            if not chunk:
                if time.perf_counter() >= deadline:  # the end was the deadline's shutdown, not the server's
                    raise HttpSystemError(self.url, call, f"no whole answer within {self.timeout:g} s",
                                          retryable=True)
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                raise self._error(call, f"the answer is over {limit} bytes")
            chunks.append(chunk)

    @staticmethod
    def _server_error(raw: bytes) -> str:
        try:
            error = json.loads(raw.decode("utf-8")).get("error")
        except (UnicodeDecodeError, ValueError, AttributeError, RecursionError):
            return ""
        return f": {printable(redacted(error))[:_MAX_ERROR_CHARS]}" if isinstance(error, str) else ""

    def _error(self, call: str, problem: str, field: str | None = None) -> HttpSystemError:
        return HttpSystemError(self.url, call, problem, field=field)
