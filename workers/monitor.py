"""The Celery app Flower runs (`celery -A workers.monitor flower`): see `workers.app.make_monitor_app`."""

from workers.app import make_monitor_app

app = make_monitor_app()
