import os

import pytest

from tests.conftest import SHARED_DATA


@pytest.fixture(scope="session")
def beam_dir():
    """BEAM's 37 development chats (`../shared/data/beam_dev`: 20 at 128K, 17 at 500K, with SHA256SUMS)."""
    path = SHARED_DATA / "beam_dev"
    if not (path / "chats").is_dir():
        message = f"BEAM development chats not found at {path} (set MEMFARM_SHARED_DATA)"
        if os.environ.get("CI") == "true":  # in CI the data is always beside the clone: its absence is a fault
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def beam_items(beam_dir):
    """Every development chat's item, read once for the session."""
    from adapters.benchmarks import BENCHMARKS

    return {item["item_id"]: item for item in BENCHMARKS["beam"].open(beam_dir).iter_items()}
