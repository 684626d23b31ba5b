"""The farm's broker transport: kombu's Redis transport, refusing a payload that is not a kombu message.

kombu turns what it reads from Redis (a task message popped off a queue, a remote-control message on a
pub/sub channel) into a message object before any consumer sees it, and a payload that is not JSON, or is
JSON of another shape, raises there: out of the worker's event loop, which stops the worker, or out of the
connection, which drops it. Any worker's password may push onto the task queue and Flower's may publish on
the control channel, so one such password would stop every worker. Here each payload is checked first; one
that is not a message is dropped with one warning and the worker reads on.
"""

from __future__ import annotations

import binascii
import logging
from queue import Empty

from kombu.transport import TRANSPORT_ALIASES, get_transport_cls, redis

from adapters.errors import MemfarmError

logger = logging.getLogger(__name__)

#: What kombu's JSON decoding raises on a payload that is not JSON (one nested too deep among them).
UNDECODABLE = (ValueError, TypeError, RecursionError)
#: The body encodings kombu's Redis channel knows; a message names one or none.
BODY_ENCODINGS = (None, "base64")


def message_problem(payload) -> str | None:
    """Why `payload` (a decoded broker payload) is no message kombu can build and acknowledge, or None.

    kombu reads `properties` (its `delivery_tag`, `delivery_info` with `exchange` and `routing_key`,
    `body_encoding`), `headers`, `body`, `content-type` and `content-encoding`; each is the type kombu
    writes, or absent where kombu allows that."""
    if not isinstance(payload, dict):
        return f"a JSON {type(payload).__name__}, not an object"
    properties = payload.get("properties")
    if not isinstance(properties, dict):
        return "its 'properties' is no object"
    if not isinstance(properties.get("delivery_tag"), str):
        return "its properties hold no string 'delivery_tag'"
    info = properties.get("delivery_info")
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str) for k in ("exchange", "routing_key")):
        return "its properties hold no 'delivery_info' with a string 'exchange' and 'routing_key'"
    if payload.get("headers") is not None and not isinstance(payload["headers"], dict):
        return "its 'headers' is no object"
    for name in ("body", "content-type", "content-encoding"):
        if payload.get(name) is not None and not isinstance(payload[name], str):
            return f"its {name!r} is no string"
    if properties.get("body_encoding") not in BODY_ENCODINGS:
        return "its 'body_encoding' is none kombu knows"
    if properties.get("body_encoding") and payload.get("body"):
        try:
            binascii.a2b_base64(payload["body"].encode("ascii"))
        except (ValueError, binascii.Error):
            return "its body is not base64"
    return None


class Channel(redis.Channel):
    """kombu's Redis channel, dropping a payload that is not JSON instead of raising out of the read."""

    def _brpop_read(self, **options):
        return self._dropping_undecodable("a queue", super()._brpop_read, **options)

    def _receive_one(self, c):
        return self._dropping_undecodable("a control channel", super()._receive_one, c)

    def _get(self, queue):
        payload = self._dropping_undecodable(f"queue {queue}", super()._get, queue)
        problem = message_problem(payload)
        if problem:
            logger.warning("a message on queue %s is no message (%s); dropped", queue, problem)
            raise Empty()
        return payload

    def _dropping_undecodable(self, where: str, read, *args, **options):
        """`read`, with a decoding error raised before the payload was delivered turned into a warning: the
        payload is already off the queue (or the channel), so dropping it is all that is left. An error
        raised while a consumer handled a delivered message is the consumer's, and passes on unchanged."""
        delivered = self.connection.delivered
        try:
            return read(*args, **options)
        except UNDECODABLE as exc:
            if self.connection.delivered != delivered:
                raise
            logger.warning("a message read from %s is not JSON (%s: %s); dropped", where, type(exc).__name__,
                           str(exc)[:100])
            raise Empty() from None


class Transport(redis.Transport):
    """kombu's Redis transport with `Channel`, and a shape check before each delivery."""

    Channel = Channel

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        #: How many payloads passed to a consumer: tells a channel's decoding error from a consumer's.
        self.delivered = 0

    def _deliver(self, message, queue):
        problem = message_problem(message)
        if problem:
            logger.warning("a message for queue %s is no message (%s); dropped", queue, problem)
            return
        self.delivered += 1
        super()._deliver(message, queue)


def register() -> None:
    """Make `Transport` the one kombu takes for `redis://` and `rediss://` URLs, in this process.

    A registration by scheme, not an app setting (`broker_transport`): every connection Celery makes (the
    consumer's, its clones, the pooled ones that collect remote-control answers) finds its transport by
    the URL's scheme, and the URL keeps that scheme where it is shown (the worker's banner, Flower's broker
    page, which picks its Redis client by it). kombu caches a transport once resolved, so this runs on import
    (`workers.app` imports this module), before any connection is made, and fails loudly if it came late."""
    for scheme in ("redis", "rediss"):
        TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"
    if get_transport_cls("redis") is not Transport or get_transport_cls("rediss") is not Transport:
        raise MemfarmError("kombu resolved its Redis transport before workers.transport registered its own; "
                           "import workers.app before making any connection")


register()
