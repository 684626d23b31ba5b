"""The farm: Celery workers that share one Redis, and what they trust of it.

`app` configures Celery, `tasks` holds the one task (evaluate a staged item: `workers.item`), `transport`
and `task_message` check every message before Celery reads it, `ledger` keeps each item's state in Redis,
`run_settings` checks a run's settings as read back, `shared_vectors` shares encoded texts between workers,
`monitor` is the app Flower runs.
"""
