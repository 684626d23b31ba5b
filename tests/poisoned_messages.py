"""The task messages a holder of a worker's password could push back onto the queue, one field of a genuine
message changed in each, and the field the farm's check refuses it by (`workers.farm.task_message`).

One table for both tests that use it: the check's own (each copy refused by its field) and the red team's (a
worker that reads them all drops each, counts it by that field and serves on)."""

import base64
import json

from workers.farm.app import TASK_NAME

#: The run every damage that names a run names; a genuine message of another run is refused by the same field.
RUN = "20261202-134807-ab0d4a"


def nested_lists(depth: int):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


def encoded_body(value) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


#: name -> (the damage done to a copy of a queued message, the field it is refused by).
POISONS = {
    "task as a list": (lambda m: m["headers"].update(task=[TASK_NAME]), "headers.task"),
    "id as an object": (lambda m: m["headers"].update(id={"a": 1}), "headers.id"),
    "timelimit a word": (lambda m: m["headers"].update(timelimit="abc"), "headers.timelimit"),
    "timelimit of three": (lambda m: m["headers"].update(timelimit=[1, 2, 3]), "headers.timelimit"),
    "timelimit negative": (lambda m: m["headers"].update(timelimit=[-1, -1]), "headers.timelimit"),
    "timelimit zero": (lambda m: m["headers"].update(timelimit=[0, 0]), "headers.timelimit"),
    "stamps not a list": (lambda m: m["headers"].update(stamped_headers=5, stamps="str"), "headers.stamped_headers"),
    "body an object": (lambda m: m.update(body=encoded_body({"a": 1})), "body"),
    "header 500 lists deep": (lambda m: m["headers"].update(origin=nested_lists(500)), "headers.origin"),
    "eta far ahead": (lambda m: m["headers"].update(eta="2999-01-01T00:00:00"), "headers.eta"),
    "another task": (lambda m: m["headers"].update(task="celery.ping"), "headers.task"),
    "a callback": (lambda m: m.update(body=encoded_body([[RUN, "q-1"], {}, {"callbacks": [{"task": "x"}],
                                                                             "errbacks": None, "chain": None,
                                                                             "chord": None}])), "body.embed"),
    "kwargs": (lambda m: m.update(body=encoded_body([[RUN, "q-1"], {"x": 1}, {}])), "body.kwargs"),
    "args lying in argsrepr": (lambda m: m["headers"].update(argsrepr="['other', 'q-2']"), "headers.argsrepr"),
    "restored into a run's key": (lambda m: m["properties"]["delivery_info"].update(routing_key=f"memfarm:{RUN}:order"),
                                  "properties.delivery_info.routing_key"),
    "an unknown header": (lambda m: m["headers"].update(hostname="me"), "headers"),
    "a header missing": (lambda m: m["headers"].pop("timelimit"), "headers"),
    "priority out of range": (lambda m: m["properties"].update(priority=10**6), "properties.priority"),
    "a run id no run has": (lambda m: m.update(body=encoded_body([["../x", "q-1"], {}, {}])), "body.args"),
    # the name Flower shows must be the task's own run and item, exactly: no other item, no looser form
    "shadow of another item": (lambda m: m["headers"].update(shadow=f"evaluate_item {RUN}/q-2"), "headers.shadow"),
    "shadow of another run": (lambda m: m["headers"].update(shadow="evaluate_item 20261202-000000-000000/q-1"),
                              "headers.shadow"),
    "shadow with more after it": (lambda m: m["headers"].update(shadow=f"evaluate_item {RUN}/q-1 "), "headers.shadow"),
    "shadow as the task name": (lambda m: m["headers"].update(shadow=TASK_NAME), "headers.shadow"),
    "shadow absent (null)": (lambda m: m["headers"].update(shadow=None), "headers.shadow"),
    "shadow as a list": (lambda m: m["headers"].update(shadow=[f"evaluate_item {RUN}/q-1"]), "headers.shadow"),
}
