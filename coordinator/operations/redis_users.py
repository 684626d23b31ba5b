"""The farm's Redis users and what each may do: the coordinator, the workers, Flower, and the admin.

A farm's Redis holds its runs and its task queue, and every farm process logs in as one of these users,
so what a leaked password can do is what its user's rules allow. `cluster up` writes them into the
server's configuration (`acl_config`); `docker-compose.yml` spells the same rules out.
"""

from __future__ import annotations

#: The keys a farm touches: its run keys, the queue and Celery's own bookkeeping (bindings, unacked
#: messages, remote-control replies). Nothing else in the server is readable by a farm user.
FARM_KEYS = "~memfarm* ~unacked* ~_kombu.* ~*.celery.pidbox*"
#: What Flower touches, and nothing more. It reads the task queue's length (the queue and its priority
#: lists, `memfarm` + kombu's two-byte separator + a digit); it writes only its own plumbing: inspect reply
#: queues (`<uuid>.reply.celery.pidbox`, a hex first character, which no farm key has), its event queue
#: and the two exchanges' binding tables (kombu refreshes and sweeps them with Lua, and checks queue
#: lengths in MULTI blocks). It subscribes to the events and publishes inspect requests on the workers'
#: control channel; workers obey no control command on it (`workers.farm.app`), so a shutdown sent there is
#: ignored. No LPUSH to the task queue, no access to a run's keys, no CLIENT, no INFO.
MONITOR_KEYS = ("%R~memfarm %R~memfarm??[369] ~[0-9a-f]*.reply.celery.pidbox* ~celeryev.* "
                "~_kombu.binding.reply.celery.pidbox ~_kombu.binding_permanent.reply.celery.pidbox "
                "~_kombu.binding.celeryev ~_kombu.binding_permanent.celeryev ~_kombu.binding_deadlines")
MONITOR_CHANNELS = "&/0.celeryev/* &/0.celery.pidbox"
MONITOR_COMMANDS = ("-@all +hello +auth +ping +multi +exec +discard +llen +brpop +del +sadd +srem +zadd +zrem "
                    "+zrangebyscore +exists +time +evalsha +eval +script|load +script|exists +publish +subscribe "
                    "+psubscribe +unsubscribe +punsubscribe")
#: What each Redis user may do. The worker cannot flush, reconfigure, list keys or switch databases.
ACL_RULES = {
    "coordinator": f"{FARM_KEYS} &* +@all -@dangerous +info -select",  # INFO: the memory staging used
    "worker": f"{FARM_KEYS} &* +@all -@dangerous -@admin -select -scan -keys -flushall -flushdb -config",
    "monitor": f"{MONITOR_KEYS} {MONITOR_CHANNELS} {MONITOR_COMMANDS}",
}
#: The default user: off, so no client can authenticate as it (it has no password either), yet with every
#: permission. Redis 7.0 replays its append-only file as the default user and checks each MULTI/EXEC block
#: of it against that user's permissions; with none, every transaction and Lua script the farm ever wrote
#: is refused at load (`NOPERM ... ACLs rules changed`) and the ledger is gone after a restart.
DEFAULT_USER = "user default off ~* &* +@all"


def acl_config(passwords: dict[str, str]) -> str:
    """Redis config lines: the default user off, one user per role with its own password and rules."""
    lines = [DEFAULT_USER]
    lines += [f"user {role} on >{passwords[role]} {ACL_RULES[role]}" for role in ACL_RULES]
    return "\n".join(lines) + "\n"


#: The user `cluster add-machine`, `revoke-machine` and `renew-certs` change the running server with: it
#: may set users and configuration, which is everything in Redis, so its password is in the hub's
#: `cluster.json` only, and no process of the farm uses it.
ADMIN_USER = "admin"
ADMIN_RULES = "resetkeys resetchannels -@all +acl|setuser +acl|deluser +config|set +ping"
