"""The task message check: what Celery writes for the farm's call passes; every other shape is refused by name,
and whatever passes is a message Celery's own worker code takes without an error."""

import base64
import copy
import json
import pickle

import pytest
from hypothesis import given, strategies as st
from kombu.serialization import loads
from kombu.transport.virtual import Message

import workers.farm.tasks  # noqa: F401  (registers the task on the app)
from workers.farm.app import QUEUE, TASK_NAME, app, make_app
from tests.poisoned_messages import POISONS, RUN, encoded_body, nested_lists
from workers.farm.ledger import RUN_ID
from workers.ledger_values import MAX_ITEM_ID_CHARS
from workers.farm.task_message import (SHADOW_ITEM_CHARS, check_task_message, send_options, shadow_name,
                                       task_message_problem)


def written(run_id: str = RUN, item_id: str = "q-1") -> dict:
    """The payload Celery and kombu write onto the task queue for the farm's call (kombu's in-memory
    transport: the same virtual channel as Redis's, which only adds the list push)."""
    producer = make_app("memory://")
    producer.send_task(TASK_NAME, args=[run_id, item_id], **send_options(run_id, item_id))
    with producer.connection_for_write() as connection:
        return connection.default_channel._get(QUEUE)


def test_the_shadow_name_shows_the_run_and_item_and_never_a_control_character():
    message = written()
    assert message["headers"]["shadow"] == f"evaluate_item {RUN}/q-1" and message["headers"]["task"] == TASK_NAME
    assert shadow_name(RUN, "q\x1b[31m") == f"evaluate_item {RUN}/'q\\x1b[31m'"
    assert shadow_name(RUN, "é" * 1000) == f"evaluate_item {RUN}/{'é' * SHADOW_ITEM_CHARS}..."
    assert check_task_message(written(RUN, "q\x1b[31m")) == (RUN, "q\x1b[31m")


def test_the_task_sent_event_carries_the_shadow_name_as_the_workers_events_do():
    """Flower keeps the name of the latest event to arrive; the coordinator's `task-sent` may arrive after the
    worker's `task-received`, so both must name the task by its run and item."""
    producer = make_app("memory://")
    assert producer.conf.task_send_sent_event
    message = producer.amqp.create_task_message("0b5c4f8e-1f7a-4a55-9c11-2f3e4d5a6b7c", TASK_NAME, [RUN, "q-1"], {},
                                                 create_sent_event=True, shadow=shadow_name(RUN, "q-1"))
    assert message.sent_event["name"] == message.headers["shadow"] == f"evaluate_item {RUN}/q-1"
    assert message.headers["task"] == TASK_NAME
    plain = producer.amqp.create_task_message("0b5c4f8e-1f7a-4a55-9c11-2f3e4d5a6b7d", TASK_NAME, [RUN, "q-1"], {},
                                              create_sent_event=True)
    assert plain.sent_event["name"] == TASK_NAME  # without a shadow, Celery's own name


def test_what_celery_writes_for_the_farm_passes_and_a_put_back_copy_too():
    message = written()
    assert check_task_message(message) == (RUN, "q-1")
    message["headers"]["redelivered"] = True  # what kombu's Redis transport adds when it restores a message
    message["properties"]["delivery_info"]["redelivered"] = True
    assert task_message_problem(message) is None


@pytest.mark.parametrize("poison", list(POISONS))
def test_each_poisoned_copy_is_refused_by_its_field(poison):
    message = written()
    damage, field = POISONS[poison]
    damage(message)
    problem = task_message_problem(message)
    assert problem is not None and problem[0] == field, problem


@given(run_id=st.from_regex(RUN_ID, fullmatch=True), item_id=st.text(max_size=MAX_ITEM_ID_CHARS))
def test_every_id_the_farm_may_stage_passes_as_celery_writes_it(run_id, item_id):
    assert check_task_message(written(run_id, item_id)) == (run_id, item_id)


#: Values near the ones Celery writes, so that changed messages are often still let through: what is let
#: through must be taken by Celery too.
PLAUSIBLE = [None, 0, 1, 2, -1, 9, True, False, "", "py", "{}", "base64", "memfarm", TASK_NAME, RUN,
             "00000000-0000-4000-8000-000000000000", [None, None], [], {}, [RUN, "q"], 1.5]


def json_values():
    scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=20)
               | st.sampled_from(PLAUSIBLE))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                           max_size=4),
                        max_leaves=12)


def _places(message: dict) -> list[tuple]:
    """Every place of a message a value sits: (path to its container, key)."""
    places = [((), key) for key in message]
    places += [(("headers",), key) for key in message["headers"]]
    places += [(("properties",), key) for key in message["properties"]]
    places += [(("properties", "delivery_info"), key) for key in message["properties"]["delivery_info"]]
    return places


TEMPLATE = written()
PLACES = _places(TEMPLATE)
BODY = json.loads(base64.b64decode(TEMPLATE["body"]))


@st.composite
def damaged_messages(draw):
    """A message Celery wrote with one to three changes: a value replaced (by any JSON, by a list nested past
    the interpreter's depth, or by the same value of another JSON type), a key removed or added, or a body
    made of any JSON (including the real body with one part replaced)."""
    message = copy.deepcopy(TEMPLATE)
    for _ in range(draw(st.integers(1, 3))):
        path, key = draw(st.sampled_from(PLACES))
        container = message
        for part in path:
            container = container.get(part) if isinstance(container, dict) else None
        if not isinstance(container, dict):
            continue
        change = draw(st.sampled_from(["value", "deep", "drop", "add", "body", "body part"]))
        if change == "value":
            container[key] = draw(json_values())
        elif change == "deep":
            container[key] = nested_lists(draw(st.sampled_from([500, 990, 5000])))
        elif change == "drop":
            container.pop(key, None)
        elif change == "add":
            container[draw(st.text(max_size=10))] = draw(json_values())
        elif change == "body":
            message["body"] = encoded_body(draw(json_values()))
        else:
            body = copy.deepcopy(BODY)
            part = draw(st.sampled_from([(0,), (0, 0), (0, 1), (1,), (2,), (2, "callbacks")]))
            target = body
            for index in part[:-1]:
                target = target[index]
            target[part[-1]] = draw(json_values())
            message["body"] = encoded_body(body)
    return message


def celery_takes(payload: dict) -> None:
    """What a worker's consumer and pool do with a delivered task message, by Celery's own code: raises where
    Celery would have raised out of the worker."""
    with make_app("memory://").connection_for_write() as connection:
        message = Message(payload, channel=connection.default_channel)
        assert "args" not in message.payload  # the protocol-1 path is never taken
        from celery.worker.request import Request

        request = Request(message, app=app, task=app.tasks[message.headers["task"]], hostname="w@h",
                          body=message.body, headers=message.headers, decoded=False)
        assert request.id in {request.id} and list(request.time_limits) == [None, None]
        assert request.eta is None and request.expires is None and not request.revoked()
        request.info(safe=True)
        pickle.dumps((request._request_dict, request._body))  # what the pool is sent
        args, kwargs, embed = loads(request._body, request._content_type, request._content_encoding, accept={"application/json"})
        assert len(args) == 2 and kwargs == {} and not any(embed.values())


@given(damaged_messages())
def test_a_damaged_message_is_refused_or_is_one_celery_takes(message):
    problem = task_message_problem(message)
    if problem is None:
        celery_takes(message)
    else:
        field, detail = problem
        assert isinstance(field, str) and len(detail) < 400


UUIDS = st.uuids().map(str)


@st.composite
def allowed_messages(draw):
    """A message Celery wrote, with every field the check lets vary drawn from all it lets through."""
    run_id, item_id = draw(st.from_regex(RUN_ID, fullmatch=True)), draw(st.text(max_size=40))
    message = written(run_id, item_id)
    headers, properties = message["headers"], message["properties"]
    task_id = draw(UUIDS)
    headers.update(id=task_id, root_id=draw(st.none() | UUIDS), parent_id=draw(st.none() | UUIDS),
                   retries=draw(st.integers(0, 1000)), ignore_result=draw(st.none() | st.booleans()),
                   origin=draw(st.none() | st.text(st.characters(blacklist_categories=["Cc", "Cs", "Zl", "Zp", "Cf",
                                                                                       "Co", "Cn", "Zs"]),
                                                   max_size=255)))
    properties.update(correlation_id=task_id, reply_to=draw(st.none() | UUIDS), delivery_mode=draw(st.sampled_from([1, 2])),
                      priority=draw(st.integers(0, 9)), delivery_tag=draw(UUIDS))
    if draw(st.booleans()):
        headers["redelivered"] = properties["delivery_info"]["redelivered"] = draw(st.booleans())
    return message


@given(allowed_messages())
def test_every_message_the_check_lets_vary_passes_and_is_one_celery_takes(message):
    assert task_message_problem(message) is None
    celery_takes(message)


@given(json_values() | st.builds(nested_lists, st.integers(0, 3000)))
def test_any_json_value_is_refused_without_an_error(value):
    assert task_message_problem(value) is not None


def test_a_message_celery_takes_is_what_the_property_checks_with():
    """The property above tells a taken message from a refused one: a message Celery writes passes it, and one
    of the breaks (an unhashable id) fails it, as it failed the worker."""
    celery_takes(written())
    message = written()
    message["headers"]["id"] = {"a": 1}
    with pytest.raises(TypeError):
        celery_takes(message)
