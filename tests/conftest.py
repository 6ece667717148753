"""Shared fixtures: an isolated state folder for every test, and a registry that tests may
change freely."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests explore the same examples on every run (a test that fails one run in fifty is
# a bug, not bad luck); HYPOTHESIS_PROFILE=explore searches anew, to look for new failures.
settings.register_profile("deterministic", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: a test of a minute or more on a loaded machine; runs first (see below)"
    )
    if not hasattr(config, "workerinput"):  # once, in the process that starts the workers
        compile_the_checkout()


def compile_the_checkout() -> None:
    """Byte-compile the package and the tests before any test starts a Python of its own.
    Where ``PYTHONDONTWRITEBYTECODE`` is set (as on these CI machines) no import writes a
    ``.pyc``, so every CLI, proxy and inner pytest process the suite starts (hundreds) would
    compile each openprogram module it imports from source again, about 0.2 s of CPU each;
    an existing ``.pyc`` is still read. Files already compiled and unchanged are skipped, and
    ``__pycache__`` is ignored by git."""
    import compileall

    for folder in ("openprogram", "tests"):
        compileall.compile_dir(REPO_ROOT / folder, quiet=2, workers=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, the rest in their order: under -n, xdist hands tests out in this
    order, a few at a time (``--maxschedchunk 1`` in pyproject's addopts), so a long test that
    started last cannot hold the run up alone while the other workers are idle. The order is
    the same on every worker, as xdist requires."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


#: Options for every pytest a test starts (pytester's inner sessions, the tutorial's ``pytest``
#: commands): the dev extras install pytest plugins this suite's inner sessions never use, and
#: importing them costs each inner session more than the session itself (langsmith's, from the
#: clients extra, about 1.5 s of CPU; hypothesis's about 0.7 s; anyio's about 0.2 s, its 30
#: modules assertion-rewritten anew in each session where no bytecode is written). Blocking a
#: plugin by name is a no-op where it is not installed; openprogram's plugin still loads from
#: its entry point.
INNER_PYTEST_ADDOPTS = "-p no:langsmith_plugin -p no:hypothesispytest -p no:anyio"


@pytest.fixture(scope="session", autouse=True)
def one_certificate_authority(tmp_path_factory) -> Iterator[None]:
    """Every HTTP client the tests make trusts one certificate authority, not the ~150 of
    the full bundle. The vendor SDKs make a TLS context with every client (the google-genai
    client three), and loading the bundle costs ~25 ms of CPU each time: 11 s of the 29 s
    of tests/proxy/test_proxy_sdks.py. No test speaks TLS (every server is plain HTTP on
    127.0.0.1), so which authorities are trusted changes nothing a test sees.
    ``SSL_CERT_FILE`` is the variable httpx, httpcore2 and google-genai read for it, and the
    processes the tests start inherit it."""
    import certifi

    bundle = Path(certifi.where()).read_text()
    end = "-----END CERTIFICATE-----"
    first = bundle[bundle.index("-----BEGIN CERTIFICATE-----") : bundle.index(end) + len(end)]
    path = tmp_path_factory.mktemp("one-ca") / "ca.pem"
    path.write_text(first + "\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SSL_CERT_FILE", str(path))
        patch.delenv("SSL_CERT_DIR", raising=False)
        yield


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch) -> Path:
    """Every test gets its own OPENPROGRAM_HOME and no credentials from the developer's shell,
    nor the keys earlier tests of this process used (redaction knows every key a call used)."""
    from openprogram.providers import credentials

    monkeypatch.setenv("PYTEST_ADDOPTS", INNER_PYTEST_ADDOPTS)
    monkeypatch.setattr(credentials, "_seen_keys", set())
    home = tmp_path_factory.mktemp("openprogram-home")
    monkeypatch.setenv("OPENPROGRAM_HOME", str(home))
    monkeypatch.delenv("OPENPROGRAM_PROFILE", raising=False)
    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def fresh_registry():
    """Save the registry (entries and transform) and restore it after the test."""
    from openprogram.providers import api_registry
    from openprogram.providers.initialization import initialize_provider_runtime

    initialize_provider_runtime()  # so a first lookup inside the test cannot register into it
    saved = (dict(api_registry._originals), dict(api_registry._served), api_registry._transform)
    api_registry._reset_registry_for_tests()
    yield api_registry
    api_registry._reset_registry_for_tests()
    api_registry._originals.update(saved[0])
    api_registry._served.update(saved[1])
    api_registry._transform = saved[2]


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester, whose set-up clears ``PYTEST_ADDOPTS``, with the inner sessions' options back."""
    monkeypatch.setenv("PYTEST_ADDOPTS", INNER_PYTEST_ADDOPTS)
    return pytester


#: Folders made once per worker (see :func:`made_once`): key -> a copy of the folder.
_MADE_ONCE: dict[str, Path] = {}


def made_once(
    tmp_path_factory: pytest.TempPathFactory, key: str, folder: Path, make: Callable[[], None]
) -> None:
    """Give ``folder`` what ``make()`` puts there (a project and the recordings an inner
    ``--llm-record-mode=record`` session writes; a state folder a CLI and a program filled),
    its assertions included: made by the first test of the worker that asks, then copied into
    later tests' folders (what is made holds no path of the folder it was made in). The
    making is the same deterministic run each time and each test works on a copy of its own;
    it costs its processes once instead of once per test."""
    saved = _MADE_ONCE.get(key)
    if saved is None:
        make()
        saved = tmp_path_factory.mktemp(f"made-{key}")
        shutil.copytree(folder, saved, dirs_exist_ok=True, symlinks=True)
        _MADE_ONCE[key] = saved
    else:
        shutil.copytree(saved, folder, dirs_exist_ok=True, symlinks=True)


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for a CLI subprocess: isolated home, no keys, this checkout importable."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["OPENPROGRAM_HOME"] = str(home)
    env.pop("OPENPROGRAM_PROFILE", None)
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(extra)
    return env


PYTHON = sys.executable

#: The first line of a Python child that a test stops with Ctrl-C (SIGINT). A suite run in the
#: background (``pytest &``, ``nohup``, some CI runners) starts with SIGINT ignored; children
#: inherit that, and Python then installs no KeyboardInterrupt handler, so the Ctrl-C would do
#: nothing. This gives the child the handler of a program run in a terminal.
CTRL_C_AS_IN_A_TERMINAL = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)"


pytest_plugins = ["pytester"]
