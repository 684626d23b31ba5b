"""A small server of the HTTP system contract that misbehaves on purpose, run as a real process by the tests.

    python tests/wire_server.py --mode MODE [--port 0] [--log FILE] [--die-after N] [--delay S]

Modes: `good` (word-overlap ranking), `slow` (retrieve takes --delay seconds), `flaky` (the first reset and
the second ingest answer 503 once, the first retrieve 429), `wrong-shape` (a hit's score is a string), `nan-score` (a
NaN, which is not JSON), `deep` (lists nested 200,000 deep), `bad-info` (an empty name),
`oversized` (retrieve answers 9 MiB, with no Content-Length), `dies` (the process exits in the middle of
retrieve number --die-after + 1, answering nothing), `drip` (retrieve's headers come one byte every 0.1 s,
never ending), `echo-token` (the Authorization header it was sent comes back in info's config and in
retrieve's 401 error, as a careless server might), `cheat` (every label shares one pool and a reset forgets
nothing, unless the label is not shaped like a run's `item-<12 hex>.<12 hex>`: then it behaves), `jitter` (each score
off in its last bits, as a server summing in another order each time: the ranking stays), `shuffle` (the
second time a question is asked, its two best hits swap), `replace` (an ingest replaces what the label held
rather than adding to it), `flood` (retrieve answers --flood hits of ids never ingested), `prefix` (a label is
kept by its part before the first `.`: two labels of one item, as a retry's, share one pool), `deep-info`
(info's config nested --depth deep, 900 unless said) and `inf-info` (info's config holds `1e400`, past a
float's range).
Each request is one JSON line in --log: the call,
the label, how many docs, whether its bearer token was WIRE_TOKEN (the token itself is never logged) and,
with --bodies, the request's body.
Prints `listening on http://127.0.0.1:PORT` once it takes connections.
"""

import argparse
import json
import os
import random
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = {"labels": {}, "counts": {}, "lock": threading.Lock()}


def words(text):
    return set(re.findall(r"\w+", text.lower()))


class Handler(BaseHTTPRequestHandler):
    options = None

    def log_message(self, *args):  # the request log below replaces the default stderr lines
        pass

    def _answer(self, status, body, length=True):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if length:
            self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _log(self, call, body):
        token = os.environ.get("WIRE_TOKEN")
        entry = {"call": call, "label": body.get("label"), "docs": len(body.get("docs") or []),
                 "token_ok": bool(token) and self.headers.get("Authorization") == f"Bearer {token}"}
        if self.options.bodies:
            entry["body"] = body
        with STATE["lock"]:
            STATE["counts"][call] = STATE["counts"].get(call, 0) + 1
            entry["n"] = STATE["counts"][call]
            if self.options.log:
                with open(self.options.log, "a", encoding="utf-8") as log:
                    log.write(json.dumps(entry) + "\n")
        return entry["n"]

    def do_GET(self):
        if self.path.rstrip("/").endswith("/info"):
            self._log("info", {})
            if self.options.mode == "bad-info":
                return self._answer(200, {"name": "", "version": "0.1", "config": {}})
            if self.options.mode == "deep-info":
                depth = self.options.depth
                nested = b'{"a": ' * depth + b"1" + b"}" * depth
                return self._answer(200, b'{"name": "wire-deep", "version": "0.1", "config": '
                                    + nested + b"}")
            if self.options.mode == "inf-info":
                return self._answer(200, b'{"name": "wire-inf", "version": "0.1", '
                                    b'"config": {"limit": 1e400}}')
            if self.options.mode == "echo-token":
                auth = self.headers.get("Authorization")
                return self._answer(200, {"name": "wire-echo-token", "version": "0.1",
                                          "config": {"seen": {"headers": [auth]}, "note": f"called with {auth}"}})
            self._answer(200, {"name": f"wire-{self.options.mode}", "version": "0.1", "config": {"mode": self.options.mode}})
        else:
            self._answer(404, {"error": "no route"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        call = self.path.rstrip("/").rsplit("/", 1)[-1]
        n = self._log(call, body)
        mode, label = self.options.mode, body.get("label")
        if mode == "flaky" and ((call == "reset" and n == 1) or (call == "ingest" and n == 2)):
            return self._answer(503, {"error": "busy, try again"})
        if mode == "flaky" and call == "retrieve" and n == 1:
            return self._answer(429, {"error": "too many requests"})
        if mode == "prefix" and label:
            label = label.split(".")[0]
        if mode == "cheat" and re.fullmatch(r"item-[0-9a-f]{12}\.[0-9a-f]{12}", label or ""):
            label = "one pool"
            if call == "reset":
                return self._answer(200, {})
        if call == "reset":
            STATE["labels"].pop(label, None)
            return self._answer(200, {})
        if call == "ingest" and mode == "replace":
            STATE["labels"][label] = {}
        if call == "ingest":
            STATE["labels"].setdefault(label, {}).update({d["external_id"]: d["text"] for d in body["docs"]})
            return self._answer(200, {})
        if call != "retrieve":
            return self._answer(404, {"error": f"no route {self.path}"})
        if mode == "slow":
            time.sleep(self.options.delay)
        if mode == "dies" and n > self.options.die_after:
            os._exit(3)
        if mode == "drip":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
            try:
                while True:
                    self.wfile.write(b"a")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:  # the client gave up
                return None
        if mode == "echo-token" and body.get("query") == "echo":  # an unknown id the runner would report
            return self._answer(200, {"hits": [{"external_id": self.headers.get("Authorization"), "score": 1.0}]})
        if mode == "echo-token":
            return self._answer(401, {"error": f"refused {self.headers.get('Authorization')}"})
        if mode == "wrong-shape":
            return self._answer(200, {"hits": [{"external_id": "x", "score": "high"}]})
        if mode == "nan-score":
            return self._answer(200, b'{"hits": [{"external_id": "x", "score": NaN}]}')
        if mode == "deep":
            return self._answer(200, b'{"hits": ' + b"[" * 200_000 + b"]" * 200_000 + b"}")
        if mode == "flood":
            ghosts = [{"external_id": f"ghost-{n:07d}", "score": 1.0} for n in range(self.options.flood)]
            return self._answer(200, {"hits": ghosts})
        if mode == "oversized":
            return self._answer(200, b'{"hits": [], "padding": "' + b"x" * (9 * 1024 * 1024) + b'"}', length=False)
        query = words(body["query"])
        scored = [(len(query & words(text)), eid) for eid, text in STATE["labels"].get(label, {}).items()]
        hits = sorted((s, eid) for s, eid in scored if s > 0)
        hits.sort(key=lambda pair: (-pair[0], pair[1]))
        ranked = [{"external_id": eid, "score": float(s)} for s, eid in hits[:body["top_k"]]]
        if mode == "jitter":
            ranked = [{**hit, "score": hit["score"] * (1 + random.uniform(-1e-12, 1e-12))} for hit in ranked]
        with STATE["lock"]:
            asked = STATE.setdefault("asked", {})
            asked[(label, body["query"])] = asked.get((label, body["query"]), 0) + 1
            again = asked[(label, body["query"])] > 1
        if mode == "shuffle" and again and len(ranked) > 1:
            ranked[0]["external_id"], ranked[1]["external_id"] = ranked[1]["external_id"], ranked[0]["external_id"]
        self._answer(200, {"hits": ranked})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="good",
                        choices=["good", "slow", "flaky", "wrong-shape", "nan-score", "deep", "oversized", "dies", "bad-info",
                                 "drip", "echo-token", "cheat", "jitter", "shuffle",
                                 "replace", "flood", "prefix", "deep-info", "inf-info"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", default=None)
    parser.add_argument("--die-after", type=int, default=2)
    parser.add_argument("--delay", type=float, default=5.0)
    parser.add_argument("--depth", type=int, default=900, help="Levels of info's config in --mode deep-info.")
    parser.add_argument("--flood", type=int, default=20_000, help="Hits in each answer of --mode flood.")
    parser.add_argument("--bodies", action="store_true", help="Also log each request's body.")
    parser.add_argument("--tls-cert", default=None, help="Serve https with this certificate (and --tls-key).")
    parser.add_argument("--tls-key", default=None)
    Handler.options = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", Handler.options.port), Handler)
    server.daemon_threads = True
    scheme = "http"
    if Handler.options.tls_cert:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(Handler.options.tls_cert, Handler.options.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    print(f"listening on {scheme}://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
