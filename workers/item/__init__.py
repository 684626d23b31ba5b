"""The evaluation of one item, the same locally and on the farm: build or restore its state, ask, score.

Nothing here knows Celery or Redis: `evaluate.evaluate_item` is called by the local executor and by the
farm's task alike, and `cache` keeps an item's built state between runs.
"""
