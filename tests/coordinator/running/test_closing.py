"""A system that declares `Closes` is closed once at the end of a local run and of a farm pool process."""

import json

from click.testing import CliRunner

from adapters.systems import contract
from coordinator.cli import main
from tests.coordinator.running.test_vendor_crash import Panic, PanickySystem
from tests.helpers import write_dataset

SPEC = "tests.coordinator.running.test_closing:Closing"


class Closing(PanickySystem):
    """The panicking system of test_vendor_crash, with a close() that counts its calls on the class."""

    closed = 0

    def close(self):
        Closing.closed += 1


class BadClose(Closing):
    def close(self):
        super().close()
        raise Panic("close panicked")


def test_a_local_run_closes_its_system_once_even_when_an_item_failed(tmp_path):
    Closing.closed, Closing.items_seen = 0, 0
    data = write_dataset(tmp_path / "lme.json", questions=3, seed=5, scale=0.02)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", SPEC,
                                       "--output", str(out)])
    assert result.exit_code == 1, result.output  # the results are written, and the failed item said
    assert [r["status"] for r in json.loads(out.read_text())["records"]].count("failed") == 1
    assert Closing.closed == 1


def test_a_pool_process_closes_every_system_it_built_at_its_end():
    from workers.farm import tasks

    assert contract.declares(Closing(), contract.Closes) and not contract.declares(PanickySystem(), contract.Closes)
    Closing.closed = 0
    tasks._SYSTEMS.update({("a", "{}"): BadClose(), ("b", "{}"): Closing(), ("c", "{}"): PanickySystem()})
    try:
        tasks._close_systems()  # as celery's worker_process_shutdown signal calls it
        assert Closing.closed == 2, "a close that panics stops no other"
        assert tasks._SYSTEMS == {}
    finally:
        tasks._SYSTEMS.clear()
