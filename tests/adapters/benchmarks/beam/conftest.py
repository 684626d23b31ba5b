import pytest


@pytest.fixture(scope="session")
def beam_items(beam_dir):
    """Every development chat's item, read once for the session."""
    from adapters.benchmarks import BENCHMARKS

    return {item["item_id"]: item for item in BENCHMARKS["beam"].open(beam_dir).iter_items()}
