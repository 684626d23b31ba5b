"""The farm's Redis connection: one checked client from a broker URL, TLS from the environment.

Every part of the farm (the worker's ledger, the coordinator's, the shared vectors, the doctor) connects
here, so a wrong password or an unreachable server reads the same everywhere, with the password redacted.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import redis

from adapters.errors import MemfarmError
from adapters.redaction import redact


def tls_files(url: str) -> dict[str, str]:
    """For a `rediss://` URL: the CA, client certificate and key from MEMFARM_TLS_CA / _CERT / _KEY."""
    if not url.startswith("rediss://"):
        return {}
    import os

    files = {name: os.environ.get(f"MEMFARM_TLS_{name.upper()}") for name in ("ca", "cert", "key")}
    if not files["ca"]:
        raise MemfarmError("a rediss:// broker needs MEMFARM_TLS_CA (the CA that signed the server's certificate)")
    if bool(files["cert"]) != bool(files["key"]):
        missing = "MEMFARM_TLS_CERT" if not files["cert"] else "MEMFARM_TLS_KEY"
        raise MemfarmError(f"MEMFARM_TLS_CERT and MEMFARM_TLS_KEY go together (the client certificate and its key); "
                           f"{missing} is not set")
    return {k: v for k, v in files.items() if v}


def redis_tls_options(url: str) -> dict:
    """redis-py's TLS arguments for `url` (none for plain redis://): the server is always verified."""
    files = tls_files(url)
    if not files:
        return {}
    return {"ssl_cert_reqs": "required", "ssl_ca_certs": files["ca"], "ssl_certfile": files.get("cert"),
            "ssl_keyfile": files.get("key")}


def connect(url: str) -> redis.Redis:
    """A checked connection; a bad password or an unreachable server is one clear error."""
    client = redis.Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30, **redis_tls_options(url))
    try:
        client.ping()
    except redis.exceptions.AuthenticationError as exc:
        if not urlsplit(url).password:
            raise MemfarmError(f"redis at {redact(url)} needs a password: put it in the broker URL") from exc
        raise MemfarmError(f"redis at {redact(url)} refused the credentials: check the password in the broker URL") from exc
    except redis.exceptions.ResponseError as exc:
        if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
            raise MemfarmError(f"redis at {redact(url)} needs a password: put it in the broker URL") from exc
        raise MemfarmError(f"redis at {redact(url)}: {exc}") from exc
    except redis.exceptions.ConnectionError as exc:
        raise MemfarmError(f"cannot reach redis at {redact(url)}: {exc}") from exc
    return client
