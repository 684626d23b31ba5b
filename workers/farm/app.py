"""The Celery app: JSON messages only, late acks, one task at a time per process.

Configuration comes from the environment so that `celery -A workers.farm.app`
(Flower) and `memfarm worker` agree:
MEMFARM_BROKER (redis URL), MEMFARM_TASK_TIME_LIMIT (hard limit, seconds),
MEMFARM_VISIBILITY_TIMEOUT (must exceed the hard limit),
MEMFARM_MAX_MEMORY_PER_CHILD (KiB before a pool process is replaced) and
MEMFARM_LEASE_SECONDS (how long an attempt's lease lives without a heartbeat).
"""

from __future__ import annotations

import logging
import os
import re

from celery import Celery
from celery.app.amqp import AMQP
from celery.signals import after_setup_logger, after_setup_task_logger, worker_init

from adapters.errors import MemfarmError
# registered on import: kombu's Redis transport, checking payloads
from workers.farm import transport  # noqa: F401
# the farm's queue and task, named where checked
from workers.farm.task_message import QUEUE, TASK_NAME  # noqa: F401

logger = logging.getLogger(__name__)

DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
DEFAULT_TASK_TIME_LIMIT = 3600
DEFAULT_MAX_MEMORY_PER_CHILD_KIB = 3_000_000
#: The remote-control commands a worker answers: Flower's inspections, ping, and the request for a heartbeat
#: event Flower sends when it starts listening. Every other one (shutdown, revoke, pool restart, rate and time
#: limits, consumers, events on or off) is ignored: any Redis user that may publish on the control channel,
#: Flower's monitor among them, could otherwise stop or steer every worker, and the farm itself sends none
#: (the ledger, not Celery, drives a run).
ANSWERED_COMMANDS = frozenset({"ping", "heartbeat", "stats", "active_queues", "registered", "scheduled", "active",
                               "reserved", "revoked", "conf"})
#: The routing key of a remote-control answer: the asker's id, a UUID (its reply queue is `<id>.reply.<mailbox>`).
REPLY_ROUTING_KEY = re.compile(r"^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$")


def broker_url() -> str:
    return os.environ.get("MEMFARM_BROKER", DEFAULT_BROKER)


def task_time_limit() -> int:
    return int(os.environ.get("MEMFARM_TASK_TIME_LIMIT", DEFAULT_TASK_TIME_LIMIT))


def lease_seconds() -> int:
    from workers.farm.ledger import DEFAULT_LEASE_SECONDS

    return int(os.environ.get("MEMFARM_LEASE_SECONDS", DEFAULT_LEASE_SECONDS))


class ShadowNamedEvents(AMQP):
    """Celery's messages, with the `task-sent` event named as the message is shown (its shadow name). Celery
    names that event by the bare task, and Flower takes the name of the latest event to arrive: a `task-sent`
    that reaches Flower after the worker's `task-received` (they travel on two connections) would put the bare
    name back on a task that had shown its run and item."""

    def as_task_v2(self, *args, **kwargs):
        message = super().as_task_v2(*args, **kwargs)
        shadow = message.headers.get("shadow")
        if shadow and message.sent_event is not None:
            message.sent_event["name"] = shadow
        return message


def make_app(broker: str | None = None) -> Celery:
    broker = broker or broker_url()
    hard_limit = task_time_limit()
    visibility = int(os.environ.get("MEMFARM_VISIBILITY_TIMEOUT", hard_limit + 600))
    if visibility <= hard_limit:
        raise MemfarmError(f"visibility timeout ({visibility}s) must exceed the hard time limit ({hard_limit}s), "
                           "or a running item would be handed to a second worker")
    app = Celery("memfarm", broker=broker, include=["workers.farm.tasks"], amqp=ShadowNamedEvents)
    from workers.farm.connection import tls_files

    tls = tls_files(broker)
    if tls:
        import ssl

        app.conf.broker_use_ssl = {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": tls["ca"],
                                   "ssl_certfile": tls.get("cert"), "ssl_keyfile": tls.get("key")}
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        event_serializer="json",
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_time_limit=hard_limit,
        task_soft_time_limit=hard_limit - max(1, min(30, hard_limit // 10)),
        broker_transport_options={"visibility_timeout": visibility},
        broker_connection_retry_on_startup=True,
        worker_send_task_events=True,
        task_send_sent_event=True,
        worker_max_memory_per_child=int(os.environ.get("MEMFARM_MAX_MEMORY_PER_CHILD", DEFAULT_MAX_MEMORY_PER_CHILD_KIB)),
        task_default_queue=QUEUE,
        worker_hijack_root_logger=False,
        # A replacement pool process imports nothing heavy (the model loads on its first item), but on a
        # loaded machine even a fork can be slow: give it a minute before calling it dead.
        worker_proc_alive_timeout=60,
    )
    return app


def make_monitor_app(broker: str | None = None) -> Celery:
    """The app Flower runs: the farm's, as a listener. It consumes only its event and inspect-reply queues
    and acknowledges nothing, so it never restores unacknowledged task messages into the queue (kombu's ack
    emulation would, and the monitor's Redis user may not write the queue)."""
    app = make_app(broker)
    app.conf.broker_transport_options = {**app.conf.broker_transport_options, "ack_emulation": False}
    return app


@worker_init.connect
def _answer_only_what_flower_asks(sender=None, **_):
    """In a worker process only: drop every remote-control handler but `ANSWERED_COMMANDS` (the worker's
    mailbox serves this very table), and send answers only where they belong."""
    from celery.worker.control import Panel

    for name in [n for n in Panel.data if n not in ANSWERED_COMMANDS]:
        del Panel.data[name]
    if not getattr(Panel.data["stats"], "counts_drops", False):
        Panel.data["stats"] = _stats_with_drops(Panel.data["stats"])
    if sender is not None:
        _answer_into_reply_queues_only(sender.app.control.mailbox)


def _stats_with_drops(stats):
    """Celery's `stats` answer, with the messages this worker dropped unread (`transport.DROPPED`) by field."""

    def stats_and_drops(state, **kwargs):
        return {**stats(state, **kwargs), "memfarm_dropped_messages": dict(transport.DROPPED)}

    stats_and_drops.counts_drops = True
    return stats_and_drops


def _answer_into_reply_queues_only(mailbox) -> None:
    """A request names where its answer goes, and kombu would push it into any list so named: through the
    anonymous exchange straight into a key (a run's order list, the task queue), or through any entry of the
    reply exchange's binding table (which every asker may write). A worker answers only into the asker's own
    reply queue, and only while that queue is bound (someone still waits for the answer)."""
    publish = mailbox._publish_reply

    def publish_reply(reply, exchange, routing_key, ticket, channel=None, **options):
        if exchange != mailbox.reply_exchange.name or not REPLY_ROUTING_KEY.match(str(routing_key)):
            logger.warning("a remote-control request asked for its answer in %r of exchange %r; not sent",
                           routing_key, exchange)
            return
        queue = f"{routing_key}.{exchange}"
        with channel.conn_or_acquire() as client:
            if not client.sismember(channel.keyprefix_queue % exchange, channel.sep.join((routing_key, "", queue))):
                return
        publish(reply, "", queue, ticket, channel=channel, **options)

    mailbox._publish_reply = publish_reply


@after_setup_logger.connect
@after_setup_task_logger.connect
def _redact_logs(logger=None, **_):
    """Worker logs pass the same redaction as every file: no broker password in a log line."""
    from adapters.redaction import RedactingFilter

    for handler in (logger.handlers if logger else []):
        handler.addFilter(RedactingFilter())


app = make_app()
