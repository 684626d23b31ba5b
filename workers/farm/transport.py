"""The farm's broker transport: kombu's Redis transport, refusing a payload that is not a kombu message.

kombu turns what it reads from Redis (a task message popped off a queue, a remote-control message on a
pub/sub channel) into a message object before any consumer sees it, and a payload that is not JSON, or is
JSON of another shape, raises there: out of the worker's event loop, which stops the worker, or out of the
connection, which drops it. Any worker's password may push onto the task queue and Flower's may publish on
the control channel, so one such password would stop every worker. Here each payload is checked first; one
that is not a message is dropped with one warning and the worker reads on. A payload read off the task
queue must moreover be the farm's one task message, every field of it (`workers.farm.task_message`), before
Celery sees it: Celery stops its worker on many a field it does not expect.

A payload dropped here is off the queue already (BRPOP took it) and was never handed to kombu's
bookkeeping of unacknowledged messages, so nothing puts it back: it is gone for good, as an acknowledged
one is. Each is counted in this process (`DROPPED`, part of the worker's `stats` answer) and, for the task
queue, in Redis (`DROPPED_KEY`, a hash of counts by field, which `memfarm doctor` reports).
"""

from __future__ import annotations

import binascii
import json
import logging
from collections import Counter
from queue import Empty

import redis as redis_client
from kombu.transport import TRANSPORT_ALIASES, get_transport_cls, redis

from adapters.errors import MemfarmError
from workers.farm.task_message import QUEUE, task_message_problem

logger = logging.getLogger(__name__)

#: What kombu's JSON decoding raises on a payload that is not JSON (one nested too deep among them).
UNDECODABLE = (ValueError, TypeError, RecursionError)
#: The body encodings kombu's Redis channel knows; a message names one or none.
BODY_ENCODINGS = (None, "base64")
#: The Redis hash of task messages dropped by every worker of the farm: a count per refused field (`total`:
#: all of them). The worker's user may write it (a farm key), the coordinator's read it.
DROPPED_KEY = "memfarm:dropped-messages"
#: Payloads this process dropped, by where (`task` or `other`) and field.
DROPPED: Counter = Counter()
#: Each of the first this many drops of a process gets a warning of its own; after that one in every
#: WARN_EVERY, with the count so far, so that a flood of bad messages cannot fill the log.
WARN_FIRST = 100
WARN_EVERY = 1000


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


def payload_problem(payload, queue: str) -> tuple[str, str] | None:
    """(field, what is wrong) when `payload`, read off `queue`, may not reach a consumer; None when it may."""
    problem = message_problem(payload)
    if problem:
        return "envelope", problem
    if queue == QUEUE:
        return task_message_problem(payload)
    return None


def unacked_problem(raw: bytes, queues) -> str | None:
    """Why `raw`, an entry of kombu's hash of unacknowledged messages, is not one a consumer of `queues` wrote
    (`[message, exchange, routing key]`, the message one it was handed from one of them), or None."""
    try:
        entry = json.loads(raw)
    except UNDECODABLE as exc:
        return f"is not JSON ({type(exc).__name__})"
    if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[1], str) and isinstance(entry[2], str)):
        return "is not [message, exchange, routing key]"
    payload, exchange, routing_key = entry
    if exchange != "" or routing_key not in queues:  # put back there, it would be pushed into any key it names
        return "puts its message back somewhere else than a queue this worker reads"
    problem = payload_problem(payload, routing_key)
    return f"holds a message whose {problem[0]} {problem[1]}" if problem else None


#: Delete KEYS[1] where it holds a type other than ARGV[1] (nothing held is fine); returns the type it held.
_DELETE_IF_OTHER_TYPE = """
local found = redis.call('TYPE', KEYS[1]).ok
if found ~= ARGV[1] and found ~= 'none' then
    redis.call('DEL', KEYS[1])
    return found
end
return false
"""

class QoS(redis.QoS):
    """kombu's acknowledgement emulation, dropping an unacknowledged entry it could not put back.

    A worker's password may write kombu's hash of unacknowledged messages. kombu puts back what has been
    unacknowledged too long by reading each entry, and an entry that is not what it writes raises there,
    before the entry is removed: every later look at the hash stops at it again, and the genuine entries
    behind it are never put back. Here such an entry is removed, counted and warned of instead."""

    def restore_by_tag(self, tag, client=None, leftmost=False):
        with self.channel.conn_or_acquire(client) as connection:
            raw = connection.hget(self.unacked_key, tag)
        problem = unacked_problem(raw, self.channel._active_queues) if raw is not None else None
        if problem:
            self._remove_from_indices(tag).execute()
            self.channel.dropped(self.unacked_key, "unacked", problem)
            return None
        return super().restore_by_tag(tag, client, leftmost)


class Channel(redis.Channel):
    """kombu's Redis channel, dropping a payload that is not JSON instead of raising out of the read."""

    QoS = QoS

    def _brpop_read(self, **options):
        # the worker pops the task queue alone, so what it cannot decode is a task message
        where = QUEUE if QUEUE in self._active_queues else "a queue"
        try:
            return self._dropping_undecodable(where, super()._brpop_read, **options)
        except redis_client.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            self._drop_queue_keys_of_another_type()
            raise Empty() from None

    def _drop_queue_keys_of_another_type(self) -> None:
        """A key kombu reads as it takes a message, holding another type (a worker's password may SET any farm
        key), makes every BRPOP on it, or every bookkeeping of a taken message, fail: the message is lost and,
        where the error reached the worker's loop, the worker stopped, at each restart again. Such a key holds
        nothing kombu wrote, so it is deleted: the queue's keys (lists), the unacknowledged hash and its index."""
        wanted = {self._q_for_pri(queue, pri): ("list", queue) for pri in self.priority_steps
                  for queue in self._active_queues}
        wanted.update({self.unacked_key: ("hash", QUEUE), self.unacked_index_key: ("zset", QUEUE)})
        self._drop_keys_of_another_type(wanted)

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        """kombu's declare of a binding (SADD to the exchange's tables, and for an expiring queue a ZADD to the
        deadlines); where one of those keys held another type, it is deleted, counted, and the binding made again.
        A worker's password may SET any kombu key: a worker declares the task queue's, the control channel's and
        the events' tables as it starts, and each such declare failed, so that every worker started (or
        restarted) after the plant stopped before it was ready, and the farm had none left to take the queued
        messages."""
        return self._healing_binding_keys([exchange], super()._queue_bind, exchange, routing_key, pattern, queue)

    def _refresh_bindings(self, queues):
        """kombu's periodic refresh of an expiring queue's binding (the control channel's): a table planted as
        another type while the worker ran made every refresh fail and the worker deaf to its broadcasts until a
        restart. The keys are healed as a declare heals them, and the refresh made again."""
        exchanges = sorted({exchange for queue in queues for exchange, _, _ in self.state.queue_bindings(queue)})
        return self._healing_binding_keys(exchanges, super()._refresh_bindings, queues)

    def sweep_bindings(self, limit=100):
        return self._healing_binding_keys([], super().sweep_bindings, limit)

    def _healing_binding_keys(self, exchanges, call, *args):
        """`call(*args)`; where it met a binding key of `exchanges` (or the shared deadlines) holding another type,
        that key is deleted and counted, and the call made again, once."""
        try:
            return call(*args)
        except redis_client.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
        wanted = {self.keyprefix_binding_deadlines: ("zset", self.keyprefix_binding_deadlines)}
        for exchange in exchanges:  # the task queue's tables are counted as the task queue's
            where = QUEUE if exchange == QUEUE else None
            wanted.update({key: ("set", where or key) for key in (self.keyprefix_queue % (exchange,),
                                                                 self.keyprefix_binding_permanent % (exchange,))})
        self._drop_keys_of_another_type(wanted)
        return call(*args)

    def _drop_keys_of_another_type(self, wanted: dict) -> None:
        """Delete each key of `wanted` ({key: (the type kombu writes, where to count it)}) that holds another type,
        type check and delete in one script (a worker that has just written the key again never loses it to
        another worker's check made a moment before); each deletion counted."""
        with self.conn_or_acquire() as client:
            for key, (kind, where) in wanted.items():
                found = client.eval(_DELETE_IF_OTHER_TYPE, 1, key, kind)
                if found:
                    found = found.decode() if isinstance(found, bytes) else found
                    self.dropped(where, "key of another type", f"{key!r} held a {found}, not a {kind}: deleted")

    def _receive_one(self, c):
        return self._dropping_undecodable("a control channel", super()._receive_one, c)

    def _get(self, queue):
        payload = self._dropping_undecodable(queue, super()._get, queue)
        problem = payload_problem(payload, queue)
        if problem:
            self.dropped(queue, *problem)
            raise Empty()
        return payload

    def dropped(self, queue: str, field: str, detail: str) -> None:
        """Count a payload dropped from `queue` (in Redis too for the task queue) and warn of it."""
        kind = "task" if queue in (QUEUE, self.unacked_key) else "other"
        DROPPED[f"{kind} {field}"] += 1
        count = sum(DROPPED.values())
        if count <= WARN_FIRST or count % WARN_EVERY == 0:
            logger.warning("a message on %s is no %s message: %s %s; dropped, not to be delivered again (%d dropped "
                           "by this worker so far)", queue, "farm task" if kind == "task" else "kombu", field, detail,
                           count)
        if kind != "task":
            return
        try:
            with self.conn_or_acquire() as client:
                client.pipeline().hincrby(DROPPED_KEY, field, 1).hincrby(DROPPED_KEY, "total", 1).execute()
        except (redis_client.RedisError, OSError) as exc:
            logger.warning("could not count a dropped message in %s: %s", DROPPED_KEY, exc)

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
            self.dropped(where, "json", f"is not JSON ({type(exc).__name__}: {str(exc)[:100]})")
            raise Empty() from None


class Transport(redis.Transport):
    """kombu's Redis transport with `Channel`, and a shape check before each delivery."""

    Channel = Channel

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        #: How many payloads passed to a consumer: tells a channel's decoding error from a consumer's.
        self.delivered = 0

    def _deliver(self, message, queue):
        problem = payload_problem(message, queue)
        if problem:
            channel = next((c for c in self.channels if queue in c._active_queues), None) or self.channels[0]
            channel.dropped(queue, *problem)
            return
        self.delivered += 1
        super()._deliver(message, queue)


def register() -> None:
    """Make `Transport` the one kombu takes for `redis://` and `rediss://` URLs, in this process.

    A registration by scheme, not an app setting (`broker_transport`): every connection Celery makes (the
    consumer's, its clones, the pooled ones that collect remote-control answers) finds its transport by
    the URL's scheme, and the URL keeps that scheme where it is shown (the worker's banner, Flower's broker
    page, which picks its Redis client by it). kombu caches a transport once resolved, so this runs on import
    (`workers.farm.app` imports this module), before any connection is made, and fails loudly if it came
    late."""
    for scheme in ("redis", "rediss"):
        TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"
    if get_transport_cls("redis") is not Transport or get_transport_cls("rediss") is not Transport:
        raise MemfarmError("kombu resolved its Redis transport before workers.farm.transport registered its "
                           "own; import workers.farm.app before making any connection")


register()
