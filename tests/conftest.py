import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("MEMFARM_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def embedder():
    """The real MiniLM model, loaded once for the whole test session."""
    from memoria.embedder import Embedder

    return Embedder.shared()


@pytest.fixture(scope="session")
def locomo_path():
    path = SHARED_DATA / "locomo_dev5.json"
    if not path.is_file():
        pytest.skip(f"real LoCoMo file not found at {path} (set MEMFARM_SHARED_DATA)")
    return path
