"""The farm's one task message, field by field: what the worker's transport lets through to Celery.

Every holder of a worker's Redis password may push onto the task queue, and Celery trusts what it reads
there: a task name or id that cannot be hashed, a time limit that is not two numbers, stamps that are not
a list, a body that is not `[args, kwargs, embed]`, a header nested past the pickler's depth, each raises
out of the consumer and stops the worker, whose message then goes back to the queue for the next one. The
farm sends one kind of message only (`send_task(TASK_NAME, args=[run_id, item_id], **send_options(run_id,
item_id))`), so a message is let through when each of its fields is what Celery writes there for that call,
by type and by bound, and refused, naming the field, otherwise. The worker's own settings decide its time
limits, never a message.

The one option the farm sets is Celery's `shadow`: the name a worker logs and reports in its events, which
Flower lists, `evaluate_item RUN/ITEM` instead of `memfarm.evaluate_item` beside a UUID, so a task in Flower
says which run and item it is. The task that runs is still `headers.task`, and a message's shadow must be
exactly the one made from its own body's run and item: a name that says another item is refused.
"""

from __future__ import annotations

import base64
import binascii
import json
import re

from workers.farm.ledger import RUN_ID
from workers.ledger_values import MAX_ITEM_ID_CHARS, shown

QUEUE = "memfarm"
TASK_NAME = "memfarm.evaluate_item"
#: The most a message's body may hold once base64 is undone: two ids (an item id of MAX_ITEM_ID_CHARS, each
#: character escaped as `\\uXXXX` at worst) and Celery's fixed frame around them.
MAX_BODY_BYTES = 16 * 1024
#: The longest `origin` (Celery writes `gen<pid>@<hostname>`) and the most `retries` a message may name.
MAX_ORIGIN_CHARS = 255
MAX_RETRIES = 1000
#: Celery's own bounds for `argsrepr` (`AMQP.argsrepr_maxsize`, `task_repr_maxlevels`): a message's must be
#: what Celery makes of its args, so that what Flower shows of a task is what the task runs.
ARGSREPR_MAXSIZE = 1024
ARGSREPR_MAXLEVELS = 3
#: How much of an item id a shadow name shows (Flower's list and the worker's log lines; the body has it whole).
SHADOW_ITEM_CHARS = 200
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: The embed part of a body: no callbacks, errbacks, chain or chord, ever.
EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
ENVELOPE = {"body", "content-encoding", "content-type", "headers", "properties"}
#: Headers Celery writes for the farm's call; kombu adds `redelivered` when it puts a message back.
HEADERS = {"lang", "task", "id", "shadow", "eta", "expires", "group", "group_index", "retries", "timelimit",
           "root_id", "parent_id", "argsrepr", "kwargsrepr", "origin", "ignore_result", "replaced_task_nesting",
           "stamped_headers", "stamps"}
OPTIONAL_HEADERS = {"redelivered"}
PROPERTIES = {"correlation_id", "reply_to", "delivery_mode", "delivery_info", "priority", "body_encoding",
              "delivery_tag"}
#: kombu's Redis transport keeps four priority steps, 0 (the default) to 9.
MAX_PRIORITY = 9


def shadow_name(run_id: str, item_id: str) -> str:
    """`evaluate_item RUN/ITEM`, what Flower and the worker's log name a task by: the item id as it is when
    printable, its repr otherwise (a control character never reaches a terminal), and at most
    SHADOW_ITEM_CHARS of it."""
    item = item_id if item_id.isprintable() else repr(item_id)
    if len(item) > SHADOW_ITEM_CHARS:
        item = item[:SHADOW_ITEM_CHARS] + "..."
    return f"evaluate_item {run_id}/{item}"


def send_options(run_id: str, item_id: str) -> dict:
    """The options of `send_task` for one item: the farm's queue, and the shadow name that shows the run and item."""
    return {"queue": QUEUE, "shadow": shadow_name(run_id, item_id)}


class Refused(Exception):
    """A field of a task message that is not what the farm sends: `field` names it (a fixed name, never a
    value from the message, so it can count drops by field), `detail` says how."""

    def __init__(self, field: str, detail: str):
        super().__init__(f"{field}: {detail}")
        self.field, self.detail = field, detail


def task_message_problem(payload) -> tuple[str, str] | None:
    """(field, what is wrong with it) for the first field of `payload`, a decoded broker payload read off the
    task queue, that is not what the farm sends there; None when every field is. Never raises."""
    try:
        check_task_message(payload)
    except Refused as refused:
        return refused.field, refused.detail
    return None


def check_task_message(payload) -> tuple[str, str]:
    """The (run id, item id) of a task message whose every field is what the farm sends; `Refused` otherwise."""
    message = _keys(payload, "message", ENVELOPE)
    if message["content-type"] != "application/json":
        raise Refused("content-type", f"is {_shown(message['content-type'])}, not application/json")
    if message["content-encoding"] != "utf-8":
        raise Refused("content-encoding", f"is {_shown(message['content-encoding'])}, not utf-8")
    headers = _keys(message["headers"], "headers", HEADERS, OPTIONAL_HEADERS)
    properties = _keys(message["properties"], "properties", PROPERTIES)
    task_id = _check_headers(headers)
    _check_properties(properties, task_id)
    run_id, item_id = _check_body(message["body"])
    from celery.utils.saferepr import saferepr

    if headers["argsrepr"] != saferepr([run_id, item_id], ARGSREPR_MAXSIZE, maxlevels=ARGSREPR_MAXLEVELS):
        raise Refused("headers.argsrepr", "is not what Celery writes for the body's args")
    # What Flower and the log call the task must be the task it runs: exactly the name of its own run and item.
    if headers["shadow"] != shadow_name(run_id, item_id):
        raise Refused("headers.shadow", f"is {_shown(headers['shadow'])}, not {_shown(shadow_name(run_id, item_id))}")
    return run_id, item_id


def _keys(value, field: str, required: set[str], optional: set[str] = frozenset()) -> dict:
    if not isinstance(value, dict):
        raise Refused(field, f"is {_kind(value)}, not an object")
    missing = sorted(required - value.keys())
    if missing:
        raise Refused(field, f"lacks {', '.join(missing)}")
    unknown = [k for k in value if k not in required and k not in optional]
    if unknown:
        raise Refused(field, f"has {len(unknown)} field(s) the farm never writes, e.g. {_shown(unknown[0])}")
    return value


def _kind(value) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), f"a {type(value).__name__}")


def _shown(value) -> str:
    """A value of a refused field, as a warning quotes it: bounded, and never by walking into it (a list nested
    past the interpreter's depth would raise again here)."""
    if isinstance(value, str):
        return shown(value[:60]) + ("..." if len(value) > 60 else "")
    if isinstance(value, (list, dict)):
        return f"{_kind(value)} of {len(value)}"
    return shown(value)


def _equal(value, wanted, field: str):
    """`value` when it is `wanted`, of the same type (so that neither 0 nor False passes for None)."""
    if type(value) is not type(wanted) or value != wanted:
        raise Refused(field, f"is {_shown(value)}, not {json.dumps(wanted)}")
    return value


def _uuid(value, field: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not UUID.fullmatch(value):
        raise Refused(field, f"is {_shown(value)}, not a UUID")
    return value


def _integer(value, field: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise Refused(field, f"is {_shown(value)}, not an integer from {low} to {high}")
    return value


def _check_headers(headers: dict) -> str:
    _equal(headers["lang"], "py", "headers.lang")
    _equal(headers["task"], TASK_NAME, "headers.task")
    task_id = _uuid(headers["id"], "headers.id")
    _uuid(headers["root_id"], "headers.root_id", optional=True)
    _uuid(headers["parent_id"], "headers.parent_id", optional=True)
    if not isinstance(headers["shadow"], str):  # compared with the body's run and item once the body is read
        raise Refused("headers.shadow", f"is {_shown(headers['shadow'])}, not the text `evaluate_item RUN/ITEM`")
    for name in ("eta", "expires", "group", "group_index", "stamped_headers"):  # none the farm sets
        if headers[name] is not None:
            raise Refused(f"headers.{name}", f"is {_shown(headers[name])}, not null (the farm sets none)")
    _equal(headers["stamps"], {}, "headers.stamps")
    # The worker's own settings give its time limits: a message naming one (negative, zero, or a word) is refused.
    _equal(headers["timelimit"], [None, None], "headers.timelimit")
    _integer(headers["retries"], "headers.retries", 0, MAX_RETRIES)
    _equal(headers["replaced_task_nesting"], 0, "headers.replaced_task_nesting")
    _equal(headers["kwargsrepr"], "{}", "headers.kwargsrepr")
    if not isinstance(headers["argsrepr"], str) or len(headers["argsrepr"]) > ARGSREPR_MAXSIZE + 16:
        raise Refused("headers.argsrepr", f"is {_shown(headers['argsrepr'])}, not the short text Celery writes")
    origin = headers["origin"]
    if origin is not None and (not isinstance(origin, str) or len(origin) > MAX_ORIGIN_CHARS
                               or not origin.isprintable()):
        raise Refused("headers.origin", f"is {_shown(origin)}, not a printable name of up to {MAX_ORIGIN_CHARS} "
                                        "characters")
    if headers["ignore_result"] is not None and type(headers["ignore_result"]) is not bool:
        raise Refused("headers.ignore_result", f"is {_shown(headers['ignore_result'])}, not true, false or null")
    if "redelivered" in headers and type(headers["redelivered"]) is not bool:
        raise Refused("headers.redelivered", f"is {_shown(headers['redelivered'])}, not true or false")
    return task_id


def _check_properties(properties: dict, task_id: str) -> None:
    if properties["correlation_id"] != task_id:
        raise Refused("properties.correlation_id", f"is {_shown(properties['correlation_id'])}, not the task's id")
    _uuid(properties["reply_to"], "properties.reply_to", optional=True)
    if properties["delivery_mode"] not in (1, 2) or type(properties["delivery_mode"]) is not int:
        raise Refused("properties.delivery_mode", f"is {_shown(properties['delivery_mode'])}, not 1 or 2")
    _integer(properties["priority"], "properties.priority", 0, MAX_PRIORITY)
    _equal(properties["body_encoding"], "base64", "properties.body_encoding")
    _uuid(properties["delivery_tag"], "properties.delivery_tag")
    # Where a message goes back to when its worker is lost: only ever this queue, never another key.
    info = _keys(properties["delivery_info"], "properties.delivery_info", {"exchange", "routing_key"},
                 {"redelivered"})
    _equal(info["exchange"], "", "properties.delivery_info.exchange")
    _equal(info["routing_key"], QUEUE, "properties.delivery_info.routing_key")
    if "redelivered" in info and type(info["redelivered"]) is not bool:
        raise Refused("properties.delivery_info.redelivered", f"is {_shown(info['redelivered'])}, not true or false")


def _check_body(body) -> tuple[str, str]:
    if not isinstance(body, str) or len(body) > (MAX_BODY_BYTES + 2) // 3 * 4:
        raise Refused("body", f"is {'a longer text' if isinstance(body, str) else _shown(body)}, not base64 of at "
                              f"most {MAX_BODY_BYTES} bytes")
    try:
        decoded = json.loads(base64.b64decode(body.encode("ascii"), validate=True).decode("utf-8"))
    except (ValueError, UnicodeError, binascii.Error, RecursionError) as exc:
        raise Refused("body", f"is not base64 of UTF-8 JSON ({type(exc).__name__})") from None
    if not isinstance(decoded, list) or len(decoded) != 3:
        raise Refused("body", f"is {_kind(decoded)}, not [args, kwargs, embed]")
    args, kwargs, embed = decoded
    if not isinstance(args, list) or len(args) != 2 or not all(isinstance(a, str) for a in args):
        raise Refused("body.args", "are not [run id, item id]")
    run_id, item_id = args
    if not RUN_ID.fullmatch(run_id):
        raise Refused("body.args", f"run id {_shown(run_id)} is none the farm makes")
    if len(item_id) > MAX_ITEM_ID_CHARS:
        raise Refused("body.args", f"item id has {len(item_id)} characters, more than {MAX_ITEM_ID_CHARS}")
    _equal(kwargs, {}, "body.kwargs")
    _equal(embed, EMBED, "body.embed")
    return run_id, item_id
