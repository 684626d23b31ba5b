"""An item id planted in Redis with a worker's password (megabytes long) reaches no key name and no line whole:
the farm's item-id rule is checked where ids are staged and wherever one is read back."""

import logging

import pytest
from click.testing import CliRunner

from adapters.errors import MemfarmError
from coordinator.cli import main
from coordinator.running.farm_run import resume
from coordinator.running.run_ledger import RunLedger, connect
from tests.helpers import write_dataset
from workers.farm.app import make_app
from workers.farm.ledger import Ledger
from workers.ledger_values import MAX_ITEM_ID_CHARS

pytestmark = pytest.mark.server

HUGE = "S" * (4 * 1024 * 1024)


@pytest.fixture()
def run(redis_server, tmp_path):
    dataset = write_dataset(tmp_path / "d.json", questions=2, seed=5, scale=0.04)
    result = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(dataset), "--run-id", "r1"],
                                env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code == 0, result.output
    return RunLedger(connect(redis_server.url))


def test_a_huge_field_of_the_state_and_attempts_hashes_is_left_out_in_a_bounded_warning(run, redis_server, caplog,
                                                                                      tmp_path):
    staged = run.order("r1")
    run.r.hset("memfarm:r1:state", HUGE, "queued")
    run.r.hset("memfarm:r1:attempts", HUGE, "1")
    with caplog.at_level(logging.WARNING):
        assert sorted(run.states("r1")) == sorted(staged)
        assert run.attempts("r1") == {}  # no item has begun
        assert resume(run, make_app(redis_server.url), "r1") == []  # both items wait in the queue
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("memfarm:r1:state field" in w and "no item id" in w for w in warnings), warnings
    assert any("memfarm:r1:attempts field" in w for w in warnings), warnings
    assert max(map(len, warnings)) < 1000
    result = CliRunner().invoke(main, ["reduce", "r1", "--output", str(tmp_path / "r.json")],
                                env={"MEMFARM_BROKER": redis_server.url})
    assert len(result.output) < 10_000, result.output[:300]


def test_a_worker_looks_up_no_item_whose_id_is_too_long(run, caplog):
    ledger = Ledger(run.r)
    keys = run.r.dbsize()
    with caplog.at_level(logging.WARNING):
        assert ledger.begin("r1", HUGE, "w/1", stale_after=60, max_attempts=2) == ("unknown", 0)
    assert run.r.dbsize() == keys
    assert caplog.records and max(len(r.getMessage()) for r in caplog.records) < 1000


def test_staging_refuses_an_item_id_longer_than_the_farm_reads_back(run):
    with pytest.raises(MemfarmError, match=f"at most {MAX_ITEM_ID_CHARS}") as caught:
        run.stage("r1", {"item_id": "x" * (MAX_ITEM_ID_CHARS + 1)})
    assert len(str(caught.value)) < 300
    assert not run.r.hexists("memfarm:r1:state", "x" * (MAX_ITEM_ID_CHARS + 1))


def test_a_worker_names_a_message_for_a_huge_run_id_in_a_bounded_line(run, caplog):
    from workers.farm.tasks import process_item

    with caplog.at_level(logging.WARNING):
        assert process_item(Ledger(run.r), HUGE, "i", "w") == "unknown run"
    assert caplog.records and max(len(r.getMessage()) for r in caplog.records) < 1000
