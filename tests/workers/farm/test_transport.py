"""The farm's broker transport reads past a payload that is not a kombu message, and only past that."""

import json

import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue

from coordinator.running.run_ledger import connect
from workers.farm.transport import Transport, message_problem

#: Payloads no consumer can take: not JSON, nested past Python's recursion limit, JSON of another shape.
POISONS = ["not json", "[" * 100_000, "[]", '"x"', "{}", '{"body": 1}', '{"properties": {"delivery_tag": "t"}}']


def _queue() -> Queue:
    return Queue("q", Exchange("q", type="direct"), routing_key="q")


def _published(url: str, body: dict) -> str:
    """What kombu writes onto the queue's list for `body`."""
    with Connection(url) as conn:
        Producer(conn.default_channel).publish(body, exchange=_queue().exchange, routing_key="q",
                                               declare=[_queue()], serializer="json")
    return connect(url).lpop("q").decode()


@pytest.mark.server
def test_a_message_kombu_writes_passes_and_each_damage_to_it_is_named(redis_server):
    payload = json.loads(_published(redis_server.url, {"n": 1}))
    assert message_problem(payload) is None
    damaged = {
        "properties": lambda p: p.pop("properties"),
        "delivery_tag": lambda p: p["properties"].update(delivery_tag=["t"]),
        "delivery_info": lambda p: p["properties"]["delivery_info"].pop("routing_key"),
        "headers": lambda p: p.update(headers=[]),
        "'body'": lambda p: p.update(body=1),
        "body_encoding": lambda p: p["properties"].update(body_encoding="rot13"),
        "base64": lambda p: p.update(body="a"),
    }
    for word, damage in damaged.items():
        copy = json.loads(json.dumps(payload))
        damage(copy)
        assert word in (message_problem(copy) or ""), (word, copy)
    assert "list" in message_problem([])


@pytest.mark.server
def test_a_consumer_reads_past_every_payload_that_is_no_message(redis_server, caplog):
    assert Connection(redis_server.url).transport_cls == "redis"
    with Connection(redis_server.url) as conn:
        assert isinstance(conn.transport, Transport)
        received = []
        Consumer(conn, [_queue()], callbacks=[lambda body, message: (received.append(body), message.ack())]).consume()
        raw = connect(redis_server.url)
        raw.lpush("q", *POISONS)
        raw.lpush("q", _published(redis_server.url, {"n": 2}))  # pushed after the poisons, so read after them
        while not received:
            conn.drain_events(timeout=10)
    assert received == [{"n": 2}]
    assert connect(redis_server.url).llen("q") == 0
    assert sum("dropped" in r.getMessage() for r in caplog.records) == len(POISONS)


@pytest.mark.server
def test_an_error_raised_by_the_consumer_itself_is_not_swallowed(redis_server):
    """Only a payload kombu could not decode is dropped; an error in handling a message passes on."""
    def fail(body, message):
        raise ValueError("the consumer's own")

    with Connection(redis_server.url) as conn:
        Consumer(conn, [_queue()], callbacks=[fail]).consume()
        connect(redis_server.url).lpush("q", _published(redis_server.url, {"n": 3}))
        with pytest.raises(ValueError, match="the consumer's own"):
            conn.drain_events(timeout=10)


@pytest.mark.server
def test_an_unacknowledged_entry_kombu_cannot_put_back_is_dropped_and_the_genuine_one_goes_back(redis_server):
    """A worker's password may write kombu's hash of unacknowledged messages. An entry there that is not what
    kombu writes (not JSON, a message the farm never sends, one routed into another key) is removed and counted
    when its time to be put back comes, and no longer stops the genuine entries behind it from going back."""
    from workers.farm.app import QUEUE, TASK_NAME, make_app
    from workers.farm.task_message import send_options
    from workers.farm.transport import DROPPED_KEY

    run_id, item_id = "20261202-000000-abcdef", "q-1"
    make_app(redis_server.url).send_task(TASK_NAME, args=[run_id, item_id], **send_options(run_id, item_id))
    raw = connect(redis_server.url)
    genuine = json.loads(raw.lrange(QUEUE, 0, 0)[0])
    poisoned = json.loads(json.dumps(genuine))
    poisoned["headers"]["timelimit"] = [-1, -1]
    planted = {"zz-not-json": "not json", "zz-not-a-triple": json.dumps({"a": 1}),
               "zz-poisoned": json.dumps([poisoned, "", QUEUE]), "zz-elsewhere": json.dumps([genuine, "", "memfarm:r:order"])}
    with Connection(redis_server.url, transport_options={"visibility_timeout": 0}) as conn:
        received = []
        consumer = Consumer(conn, [Queue(QUEUE, Exchange(QUEUE), routing_key=QUEUE)],
                            callbacks=[lambda body, message: received.append(message)])
        consumer.consume()
        while not received:
            conn.drain_events(timeout=10)
        tag = received[0].delivery_tag
        score = raw.zscore("unacked_index", tag)
        for name, entry in planted.items():  # the same age as the genuine entry, and looked at before it
            raw.hset("unacked", name, entry)
            raw.zadd("unacked_index", {name: score})
        consumer.channel.qos.restore_visible(num=10, interval=1)
    assert raw.hlen("unacked") == 0 and raw.zcard("unacked_index") == 0
    assert [json.loads(m)["headers"]["id"] for m in raw.lrange(QUEUE, 0, -1)] == [genuine["headers"]["id"]]
    assert not raw.exists("memfarm:r:order")
    assert int(raw.hget(DROPPED_KEY, "unacked")) == len(planted)


@pytest.mark.server
def test_binding_keys_planted_as_another_type_are_healed_by_declare_refresh_and_sweep(redis_server):
    """kombu's binding tables and the deadlines of expiring bindings, planted as strings: the declare of an
    expiring queue (as the control channel's is), the periodic refresh of a consumed one and the sweep each
    delete what they find planted, count it and do their work; a key of the right type is left alone."""
    import workers.farm.transport as transport

    raw = connect(redis_server.url)
    table, deadlines = "_kombu.binding.probe.pidbox", "_kombu.binding_deadlines"
    before = sum(transport.DROPPED.values())
    with Connection(redis_server.url) as conn:
        channel = conn.channel()
        queue = Queue("w1.probe.pidbox", Exchange("probe.pidbox", type="fanout"), expires=10.0, channel=channel)
        raw.set(table, "not a set")
        raw.set(deadlines, "not a zset")
        queue.declare()
        assert (raw.type(table), raw.type(deadlines)) == (b"set", b"zset")
        assert sum(transport.DROPPED.values()) == before + 2
        members = raw.smembers(table)

        channel._active_queues.append(queue.name)  # consumed, so refreshed
        raw.set(table, "not a set")
        raw.set(deadlines, "not a zset")
        channel._binding_expiry_refreshed_at = 0
        channel._bindings_swept_at = float("inf")  # the refresh alone
        channel.maybe_refresh_binding_expiry()
        assert (raw.type(table), raw.type(deadlines)) == (b"set", b"zset") and raw.smembers(table) == members
        assert sum(transport.DROPPED.values()) == before + 4

        raw.set(deadlines, "not a zset")
        channel.sweep_bindings()
        assert raw.type(deadlines) == b"none" and raw.smembers(table) == members  # nothing overdue: none swept
        assert sum(transport.DROPPED.values()) == before + 5
        channel.maybe_refresh_binding_expiry()  # nothing planted: nothing counted
        assert sum(transport.DROPPED.values()) == before + 5
