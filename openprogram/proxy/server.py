"""Running a proxy: in the foreground for ``openprogram proxy``, or in a background thread on a
free port for tests (:func:`start_proxy`, which a pytest fixture can stand on).

The proxy's own recording session (``ProxySettings.recording``) is entered in the thread that
runs the server, around it, so every request the server answers is inside it: the session is a
context variable, which the server's tasks inherit. Without one, calls go through whatever the
``record_replay`` configuration activated for the process.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .settings import (
    DEFAULT_UPSTREAMS,
    IGNORED_IN_REPLAY,
    ProxySettings,
    base_url_environment,
    shown_url,
)

if TYPE_CHECKING:
    from ..providers.scoped import RecordingScope
    from .in_flight import InFlight

#: What starts every line the command writes about itself.
PREFIX = "openprogram proxy: "

#: How long :func:`start_proxy` waits for the server thread to be serving.
START_TIMEOUT_SECONDS = 30.0


@contextlib.contextmanager
def recording_session(settings: ProxySettings) -> Iterator[RecordingScope | None]:
    """``use_recording`` for the proxy's own session (None when it has none): the upstream's
    address is left out of what replay compares (see :data:`.settings.IGNORED_IN_REPLAY`)."""
    if settings.session_mode == "off":
        from ..providers.api_registry import routed
        from ..providers.scoped import route_for

        # Every call to the registered vendor provider itself, past whatever the
        # ``record_replay`` configuration installed for the process.
        with routed(route_for("off", None).route):
            yield None
        return
    if settings.recording is None or settings.session_mode is None:
        yield None
        return
    from ..providers.scoped import use_recording

    with use_recording(
        settings.recording,
        settings.session_mode,
        ignore=(*IGNORED_IN_REPLAY, *settings.ignore),
        normalize=settings.normalize,
        values=settings.values,
        secrets=settings.secrets,
        faults=settings.replay.faults if settings.replay else None,
        rechunk=settings.replay.rechunk if settings.replay else None,
        pace=settings.replay.pace if settings.replay else None,
    ) as scope:
        yield scope


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket already listening, so a client may connect as soon as the URL is known (the
    kernel queues the connection until the server takes it): no start-up race, no wait."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Each server-sent event is written as it is made: without this, Nagle's algorithm holds a
    # small write until the client's delayed acknowledgement (40 ms a call on Linux).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _uvicorn_server(settings: ProxySettings) -> tuple[Any, InFlight]:
    """The server for ``settings``, built inside the recording session (a replay's lane book
    reads the file the session replays), and what knows the calls it is answering."""
    import uvicorn

    from .app import build_app
    from .in_flight import InFlight
    from .lanes import LaneBook
    from .prompt_server import PromptServer

    mode, path = describe_mode(settings)
    lanes = LaneBook.for_replay(path) if mode == "replay" and path else LaneBook()
    in_flight = InFlight(build_app(settings, lanes))
    config = uvicorn.Config(
        in_flight,
        http=_protocol_that_can_drop(),
        log_level="warning",
        access_log=False,
        lifespan="off",
        # no clock in the answers: a replay gives the SDK the very objects the live run gave
        date_header=False,
        server_header=False,
    )
    return PromptServer(config), in_flight


def _protocol_that_can_drop() -> Any:
    """uvicorn's HTTP protocol, with :data:`.faults.DROP_CONNECTION` set for the requests of
    each connection (a fault closes a connection unanswered, as a vendor's refused or dropped
    one); uvicorn's own (``"auto"``) when its protocol does not look as expected."""
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    from .faults import DROP_CONNECTION

    base = import_from_string(HTTP_PROTOCOLS["auto"])
    if not isinstance(base, type) or not callable(getattr(base, "data_received", None)):
        return "auto"

    class Protocol(base):  # type: ignore[misc, valid-type]
        def data_received(self, data: bytes) -> None:
            # A request's task starts here and copies this context (uvicorn's own design).
            transport = getattr(self, "transport", None)
            token = DROP_CONNECTION.set(None if transport is None else transport.close)
            try:
                super().data_received(data)
            finally:
                DROP_CONNECTION.reset(token)

    return Protocol


def describe_mode(settings: ProxySettings) -> tuple[str, str | None]:
    """The mode calls go through and its recording file: the proxy's own session, else what
    the ``record_replay`` configuration activated (initialising the runtime, as the first
    call would)."""
    if settings.session_mode == "off":
        return "off", None
    if settings.session_mode is not None:
        return settings.session_mode, str(settings.recording)
    if settings.call_context is not None:  # the caller's own session (a test's)
        return settings.mode or "live", None if settings.recording is None else str(
            settings.recording
        )
    from ..providers.initialization import initialize_provider_runtime

    snapshot = initialize_provider_runtime()
    return snapshot.mode, snapshot.path


def startup_lines(url: str, settings: ProxySettings) -> list[str]:
    """What the command prints when it starts: where it listens, the mode and file, the
    variables that point each SDK at it, where live calls go (each upstream as
    :func:`.settings.shown_url` shows it: no credential of its URL), and whose keys they use."""
    mode, path = describe_mode(settings)
    where = f"mode {mode}" + (f", recording {path}" if path else "")
    lines = [f"openprogram proxy: listening on {url} ({where})"]
    if settings.replay:
        lines.append(f"  replaying with {settings.replay.describe()}")
    lines.append("  point the SDKs at it:")
    lines += [f"    export {name}={value}" for name, value in base_url_environment(url).items()]
    if mode != "replay":
        upstreams = ", ".join(
            f"{api} {shown_url(settings.upstream(api))}" for api in DEFAULT_UPSTREAMS
        )
        lines.append(f"  live calls go to: {upstreams}")
    if settings.env_keys:
        lines.append("  a request without a key of its own gets this process's (--env-keys)")
    lines.append("  the client's own key is used for live calls and never recorded; Ctrl-C stops")
    return lines


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def serve(
    settings: ProxySettings,
    host: str,
    port: int,
    announce: Callable[[str], None] = print,
    say: Callable[[str], None] = _to_stderr,
) -> int:
    """Serve in the foreground until stopped by Ctrl-C or SIGTERM (``openprogram proxy``), and
    return the exit status. The stop is the proxy's normal end: its session ends as a run that
    ended normally (an ``update`` that drifted is kept), unless calls were in flight when it
    began (they are answered first; an ``update`` is then not kept, and the status is 1).
    ``say`` gets what the stop did (docs/proxy.md, "Stopping")."""
    sock = listening_socket(host, port)
    scope = None
    try:
        with recording_session(settings) as scope:
            server, in_flight = _uvicorn_server(settings)
            stop = _Stop(server, in_flight, say)
            for line in startup_lines(url_of(sock), settings):
                announce(line)
            with stop.on_signals():
                server.run(sockets=[sock])
            if stop.cut and scope is not None and scope.update is not None:
                scope.update.finish(f"{_calls(stop.cut)} in flight when the proxy was stopped")
    finally:
        sock.close()
    report = scope.update.report if scope is not None and scope.update is not None else None
    say(
        f"{PREFIX}stopped ({stop.how})"
        + (f"; recording {report.message}" if report is not None else "")
    )
    return 1 if stop.cut or (report is not None and report.failed) else 0


def _calls(count: int) -> str:
    return f"{count} call" + ("" if count == 1 else "s")


class _Stop:
    """How ``openprogram proxy`` stops: Ctrl-C or SIGTERM asks uvicorn to finish the calls in
    flight and end, and the signal it then raises again (to end the process the usual way)
    finds this class's handler instead, so the session ends as a normal run. ``cut``: the
    calls in flight when the server began to stop, their answers not yet whole at the client
    (their session is not complete; one still being recorded is waited for and kept)."""

    def __init__(self, server: Any, in_flight: InFlight, say: Callable[[str], None]) -> None:
        self.how = "stopped"
        self.cut = 0
        self._noted = False
        self._server, self._in_flight, self._say = server, in_flight, say
        uvicorn_exit, uvicorn_shutdown = server.handle_exit, server.shutdown

        def handle_exit(signum: int, frame: Any) -> None:
            self._note(signum)
            uvicorn_exit(signum, frame)

        async def shutdown(sockets: Any = None) -> None:
            self.cut = in_flight.unanswered
            if self.cut:
                self._say(
                    f"{PREFIX}stopping ({self.how}): waiting for the {_calls(self.cut)} in flight to be "
                    f"answered ({self.how} again cuts them); an update session is not kept"
                )
            await uvicorn_shutdown(sockets=sockets)
            # A second signal stopped the wait: end what is left here, each call recorded as
            # far as it got, rather than leave it to the event loop's closing (a traceback).
            await in_flight.end_now()

        server.handle_exit, server.shutdown = handle_exit, shutdown

    def _note(self, signum: int) -> None:
        if not self._noted:
            self._noted = True
            self.how = _SIGNAL_NAMES.get(signum, f"signal {signum}")

    @contextlib.contextmanager
    def on_signals(self) -> Iterator[None]:
        """This class's handlers for the stop signals while the server runs (the main thread
        only; uvicorn installs its own inside, and restores these)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def stop(signum: int, frame: Any) -> None:
            self._note(signum)
            self._server.should_exit = True  # before uvicorn's handlers, or after (a no-op then)

        previous = {signum: signal.signal(signum, stop) for signum in _SIGNAL_NAMES}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


#: The signals that stop the command, as its messages name them.
_SIGNAL_NAMES: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


@dataclass
class RunningProxy:
    """A proxy serving from a background thread. ``url`` is where it listens; ``environment()``
    the base-URL variables that point every SDK at it; ``scope`` the recording session it runs
    (``scope.assert_consumed()`` after a replay), or None. ``stop()`` ends it and its session
    (an ``update`` session rewrites its file then), raising what ending the session raised."""

    url: str
    settings: ProxySettings
    scope: RecordingScope | None
    _server: Any = field(repr=False)
    _in_flight: InFlight = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _errors: list[BaseException] = field(default_factory=list, repr=False)

    def environment(self) -> dict[str, str]:
        return base_url_environment(self.url)

    def end_calls(self, timeout: float = 10.0) -> int:
        """End the calls the proxy is still answering (a client that stopped reading a stream
        early): each is cancelled, so its recording ends with what it got so far and a
        ``call_end``, and its response is closed. Returns how many there were. ``llm_proxy``
        calls it when the test body ends, before the test's recording is closed."""
        return self._in_flight.end_all(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        self._server.request_exit()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"the proxy at {self.url} did not stop within {timeout:g} s")
        if self._errors:
            raise self._errors[0]

    def __enter__(self) -> RunningProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_proxy(
    settings: ProxySettings | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> RunningProxy:
    """Start a proxy in a background thread (on a free port unless ``port`` is given) and
    return once it is listening. A recording session that cannot start (a replay file that is
    invalid) raises here."""
    settings = settings or ProxySettings()
    sock = listening_socket(host, port)
    started: queue.Queue[tuple[str, Any]] = queue.Queue()
    errors: list[BaseException] = []

    def run() -> None:
        reported = False
        try:
            with recording_session(settings) as scope:
                server, in_flight = _uvicorn_server(settings)
                started.put(("ok", (scope, server, in_flight)))
                reported = True
                server.run(sockets=[sock])
        except BaseException as error:  # handed to the caller: at start, or by stop()
            if reported:
                errors.append(error)
            else:
                started.put(("error", error))
        finally:
            sock.close()

    thread = threading.Thread(target=run, name="openprogram-proxy", daemon=True)
    thread.start()
    kind, value = started.get(timeout=START_TIMEOUT_SECONDS)
    if kind == "error":
        thread.join()
        raise value
    scope, server, in_flight = value
    return RunningProxy(url_of(sock), settings, scope, server, in_flight, thread, errors)


__all__ = [
    "RunningProxy",
    "describe_mode",
    "recording_session",
    "serve",
    "start_proxy",
    "startup_lines",
]
