"""The Celery app Flower runs (`celery -A workers.farm.monitor flower`): see `app.make_monitor_app`.

Flower's worker list (`/api/workers`, the worker pages) holds what workers answered when Flower asked
them, and Flower asks once, when it starts: a worker that comes up later (one still loading when `cluster
up` starts Flower beside it, one on a machine added later, one restarted) sends its events, so the
dashboard counts it, but is never listed. Here Flower also asks a worker when it comes online, and at a
heartbeat while any answer of the list is missing (a worker's first events come before its mailbox
listens, so the first asking may go unanswered, in part or whole).
Event names are anyone's to send who may publish events, so a name is asked at most once every
`ASK_AGAIN_SECONDS`, and at most `MAX_ASKED` names are remembered.
"""

from __future__ import annotations

import logging
import time

from adapters.errors import MemfarmError
from workers.farm.app import make_monitor_app

logger = logging.getLogger(__name__)

#: Seconds before a worker Flower asked is asked again.
ASK_AGAIN_SECONDS = 5.0
#: Worker names whose last asking is remembered; past this, the oldest are forgotten.
MAX_ASKED = 1000

app = make_monitor_app()


def _farm_flower():
    from flower.app import Flower

    class FarmFlower(Flower):
        """Flower, asking each worker it hears come up for what its worker list shows."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._asked: dict[str, float] = {}
            hear = self.events.on_event

            def on_event(event):  # in the events thread: the asking is done in the io loop, as Flower's own is
                hear(event)
                self.io_loop.add_callback(self.ask_if_new, event)

            self.events.on_event = on_event

        def ask_if_new(self, event) -> None:
            kind, name = event.get("type"), event.get("hostname")
            if kind not in ("worker-online", "worker-heartbeat") or not isinstance(name, str):
                return
            known = self.inspector.workers.get(name) or {}
            if kind == "worker-heartbeat" and all(method in known for method in self.inspector.methods_to_inspect(None)):
                return
            now = time.monotonic()
            if now - self._asked.get(name, float("-inf")) < ASK_AGAIN_SECONDS:
                return
            self._asked.pop(name, None)
            self._asked[name] = now
            while len(self._asked) > MAX_ASKED:
                del self._asked[next(iter(self._asked))]
            logger.info("asking worker %r for its details (%s)", name[:100], kind)
            self.update_workers(workername=name)

    return FarmFlower


def _use_farm_flower() -> None:
    """Make Flower's command build `FarmFlower`: `celery -A workers.farm.monitor flower` imports this module
    before the command runs. A Flower whose command builds its app otherwise fails here, loudly."""
    import flower.command
    from flower.app import Flower

    if not (isinstance(getattr(flower.command, "Flower", None), type) and issubclass(flower.command.Flower, Flower)):
        raise MemfarmError("this Flower's command does not build flower.app.Flower; workers.farm.monitor "
                           "cannot extend it (pin the flower version memoria-farm was tested with)")
    if not getattr(flower.command.Flower, "ask_if_new", None):
        flower.command.Flower = _farm_flower()


_use_farm_flower()
