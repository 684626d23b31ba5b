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


@pytest.fixture(scope="session", autouse=True)
def cache_key_file(tmp_path_factory):
    """The cache key of this test session (workers started by tests inherit it), never the user's own."""
    path = tmp_path_factory.mktemp("config") / "cache.key"
    previous = os.environ.get("MEMFARM_CACHE_KEY_FILE")
    os.environ["MEMFARM_CACHE_KEY_FILE"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("MEMFARM_CACHE_KEY_FILE", None)
    else:
        os.environ["MEMFARM_CACHE_KEY_FILE"] = previous


@pytest.fixture()
def redis_server(tmp_path):
    """A real redis-server for one test (password on, append-only file on), its data and `redis.log` in the
    test's folder; killed at the end."""
    from tests.farm_support import RedisServer

    server = RedisServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture()
def workers(tmp_path):
    """Start real `memfarm worker` processes in the test's folder: `workers(broker, name, *args, **env)`;
    every one is stopped, group and all, at the end."""
    from tests.farm_support import Worker

    started = []

    def start(broker, name, *extra, **env):
        worker = Worker(broker, tmp_path, name, *extra, **env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture(scope="session")
def locomo_path():
    path = SHARED_DATA / "locomo_dev5.json"
    if not path.is_file():
        message = f"real LoCoMo file not found at {path} (set MEMFARM_SHARED_DATA)"
        if os.environ.get("CI") == "true":  # in CI the file is always beside the clone: its absence is a fault
            pytest.fail(message)
        pytest.skip(message)
    return path


from hypothesis import HealthCheck, settings  # noqa: E402

#: Fuzz budgets: small enough for CI by default; `pytest --hypothesis-profile=long` for a longer local run.
settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


def pytest_terminal_summary(terminalreporter):
    """Say how many damaged files the fuzz suite tried, in every run's closing lines (CI's log included)."""
    try:
        from tests.adapters.test_fuzz import TRIED
    except ImportError:
        return
    if TRIED.get("files") or TRIED.get("locomo"):
        terminalreporter.write_line(f"fuzz: {TRIED.get('files', 0)} damaged LongMemEval-S files and "
                                    f"{TRIED.get('locomo', 0)} damaged LoCoMo files tried")
