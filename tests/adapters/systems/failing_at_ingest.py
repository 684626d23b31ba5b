"""Users' systems that fail as they ingest, each its own way, run by a test as `--system FILE:CLASS`."""


class FailingAtIngest:
    """A user's class whose ingest raises `failure`."""

    name = "failing"
    failure, message = RuntimeError, "the index is unavailable"

    def reset(self):
        pass

    def ingest(self, docs):
        raise self.failure(self.message)

    def retrieve(self, label, query, top_k):
        return []


class Broken(FailingAtIngest):
    """Its index is unavailable: every item fails, and the run goes on."""

    name = "broken"


class Stopped(FailingAtIngest):
    """Ctrl-C while it ingests: the run stops."""

    name = "stopped"
    failure, message = KeyboardInterrupt, ""
