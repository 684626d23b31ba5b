import os
import time
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


@pytest.fixture()
def cluster():
    """`memfarm cluster up` (a redis-server and real workers): `cluster(state_dir, *args)` returns its
    `cluster.json`; the test brings it down."""
    from tests.farm_support import cluster_up

    return cluster_up


@pytest.fixture()
def chromium():
    """A real headless chromium: `chromium(page, screenshot, height=1600)` returns the DOM it built."""
    from tests.helpers import render_in_chromium

    return render_in_chromium


def shared_data(name: str, what: str, folder: bool = False) -> Path:
    """A file or folder of `../shared/data`: skipped where it is missing, failed under CI, where it is always beside
    the clone and its absence is a fault."""
    path = SHARED_DATA / name
    if not (path.is_dir() if folder else path.is_file()):
        message = f"{what} not found at {path} (set MEMFARM_SHARED_DATA)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def locomo_path():
    return shared_data("locomo_dev5.json", "real LoCoMo file")


@pytest.fixture(scope="session")
def realmem_dir():
    """The five development personas of RealMem (`../shared/data/realmem_dev5`)."""
    return shared_data("realmem_dev5", "RealMem development personas", folder=True)


@pytest.fixture(scope="session")
def beam_dir():
    """BEAM's 37 development chats (`../shared/data/beam_dev`: 20 at 128K, 17 at 500K, with SHA256SUMS)."""
    return shared_data("beam_dev/chats", "BEAM development chats", folder=True).parent


from hypothesis import HealthCheck, settings  # noqa: E402

#: Fuzz budgets: small enough for CI by default; `pytest --hypothesis-profile=long` for a longer local run.
settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


# ---- Tiers: a test is marked by what it uses, read from its fixtures, and held to it at run time ----------------
#
# `make check` runs the fast tier, every test that uses none of the resources below; `make test` runs them all.
# A test is never marked by hand for what it uses: it asks for the fixture, and the fixture's resource marks it.
# The guard below watches what each test really starts (a redis-server, a worker, chromium, the real model) and
# fails a fast-tier test that used one its fixtures did not declare, so the fast tier cannot grow slow unnoticed.

#: fixture -> the resource (and mark) it brings; a fixture that depends on one of these brings it too, since
#: pytest's `fixturenames` is the closure of every fixture a test asks for.
RESOURCE_OF_FIXTURE = {
    "embedder": ("model",),
    "redis_server": ("server",),
    "workers": ("workers",),
    "cluster": ("server", "workers"),
    "browser": ("browser",), "chromium": ("browser",),
}
RESOURCES = ("model", "server", "workers", "browser")
_USED: dict[str, set] = {}
_STARTED = [time.monotonic()]
_CURRENT: list[str] = []


def pytest_configure(config):
    for resource, what in (("model", "the real embedding model (MiniLM or mpnet)"),
                           ("server", "a real redis-server"), ("workers", "real `memfarm worker` processes"),
                           ("browser", "a real headless chromium")):
        config.addinivalue_line("markers", f"{resource}: uses {what}; marked from the test's fixtures")
    _watch_resources()


def pytest_addoption(parser):
    parser.addoption("--fast", action="store_true",
                     help=f"the fast tier only (make check): deselect what is marked {' or '.join(('slow',) + RESOURCES)}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        for resource in sorted({r for f in item.fixturenames for r in RESOURCE_OF_FIXTURE.get(f, ())}):
            item.add_marker(resource)
    if config.getoption("--fast"):
        keep = [item for item in items if not any(item.get_closest_marker(m) for m in ("slow",) + RESOURCES)]
        if len(keep) < len(items):
            config.hook.pytest_deselected(items=[item for item in items if item not in keep])
            items[:] = keep


def _resource_of_command(args) -> str | None:
    words = [str(a) for a in (args if isinstance(args, (list, tuple)) else [args])]
    program = os.path.basename(words[0]) if words else ""
    if program == "redis-server":
        return "server"
    if program.startswith("chromium"):
        return "browser"
    if ("worker" in words or "cluster" in words) and any("memfarm" in w or "coordinator.cli" in w or "celery" in w for w in words):
        return "workers"
    return None


def _watch_resources():
    """Record, per running test, every redis-server, worker and browser it starts and every real encode."""
    import subprocess

    original_popen = subprocess.Popen.__init__

    def popen(self, args, *rest, **kwargs):
        resource = _resource_of_command(args)
        if resource and _CURRENT:
            _USED.setdefault(_CURRENT[-1], set()).add(resource)
        return original_popen(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = popen

    from memoria.embedder import Embedder
    from memoria.onnx_backend import OnnxEmbedder

    for cls in (Embedder, OnnxEmbedder):
        original_encode = cls.encode

        def encode(self, *args, _original=original_encode, **kwargs):
            if _CURRENT:
                _USED.setdefault(_CURRENT[-1], set()).add("model")
            return _original(self, *args, **kwargs)

        cls.encode = encode


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _CURRENT.append(item.nodeid)
    yield
    _CURRENT.pop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed:
        return
    if any(item.get_closest_marker(mark) for mark in ("slow",) + RESOURCES):
        return  # outside the fast tier already: what else it uses changes no tier
    undeclared = sorted(_USED.get(item.nodeid, ()))
    if undeclared:
        fixtures = ", ".join(f for f, rs in RESOURCE_OF_FIXTURE.items() if set(rs) & set(undeclared))
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} used {', '.join(undeclared)} without declaring it: ask for one of the "
                           f"fixtures ({fixtures}) so the test is marked and the fast tier (make check) leaves it out")


def pytest_terminal_summary(terminalreporter):
    """Every run ends with its slowest tests and its total, a budget anyone can see (never a timed assertion);
    and how many damaged files the fuzz suite tried."""
    durations = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) and hasattr(report, "duration"):
                durations.append((report.nodeid, report.duration))
    per_test: dict[str, float] = {}
    for nodeid, seconds in durations:
        per_test[nodeid] = per_test.get(nodeid, 0.0) + seconds
    if per_test:
        wall = time.monotonic() - _STARTED[0]
        terminalreporter.write_sep("-", "slowest tests (setup + call + teardown)")
        for nodeid, seconds in sorted(per_test.items(), key=lambda kv: -kv[1])[:10]:
            terminalreporter.write_line(f"{seconds:8.1f} s  {nodeid}")
        terminalreporter.write_line(f"{len(per_test)} tests, {sum(per_test.values()):.0f} s of test time, "
                                    f"{wall:.0f} s wall")
    try:
        from tests.adapters.test_fuzz import TRIED
    except ImportError:
        return
    if TRIED.get("files") or TRIED.get("locomo"):
        terminalreporter.write_line(f"fuzz: {TRIED.get('files', 0)} damaged LongMemEval-S files and "
                                    f"{TRIED.get('locomo', 0)} damaged LoCoMo files tried")
