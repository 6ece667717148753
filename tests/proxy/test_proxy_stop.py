"""Stopping ``openprogram proxy`` (docs/proxy.md, "Stopping"): Ctrl-C and SIGTERM are its
normal end, so a drifted ``--mode update`` session is kept and the stop says what it kept and
dropped; calls in flight when it stops leave the file as it was; SIGKILL cannot be handled and
leaves the file intact, and the next update removes what it left beside it."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading

import pytest

from openprogram.providers.replay import read_recording_file
from openprogram.providers.scoped import use_recording
from openprogram.proxy import ProxySettings, start_proxy
from tests.conftest import CTRL_C_AS_IN_A_TERMINAL, PYTHON, cli_env
from tests.transcripts import openai_completions_streams as c
from tests.vendor_server import ScriptedResponse, VendorServer

COMMAND = f"{CTRL_C_AS_IN_A_TERMINAL}\nimport sys\nfrom openprogram.cli.main import main\nsys.exit(main(sys.argv[1:]))"


def whole(hold_after: int | None = None, pause_after: int | None = None) -> ScriptedResponse:
    """The vendor's answer to a call that does not stream (``ask``'s): one JSON body, written
    in three pieces so that a test can hold it part-way (and then break it off, or go on)."""
    body = c.PLAIN_TEXT_WHOLE
    pieces = [body[:40], body[40:80], body[80:]]
    return ScriptedResponse(
        chunks=pieces,
        headers={"content-type": "application/json"},
        hold_after=hold_after,
        pause_after=pause_after,
    )


def ask(url: str, prompt: str) -> str:
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-proxy-stop-test", max_retries=0)
    answer = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}]
    )
    return answer.choices[0].message.content


def prompts_in(path) -> list[str]:
    return [call.context["messages"][0]["content"] for call in read_recording_file(path).calls]


@pytest.fixture
def recorded(tmp_path):
    """A recording of two calls ('first', 'second'), made through a proxy."""
    path = tmp_path / "session.jsonl"
    with VendorServer() as server:
        server.queue(whole(), whole())
        settings = ProxySettings(
            upstreams={"openai-completions": server.url + "/v1"}, recording=path, mode="record"
        )
        with start_proxy(settings) as proxy:
            ask(proxy.url, "first")
            ask(proxy.url, "second")
    assert prompts_in(path) == ["first", "second"]
    return path


class Proxy:
    """``openprogram proxy --mode update`` in a process of its own; its stderr read as it comes."""

    def __init__(self, home, path, vendor_url: str) -> None:
        arguments = ["proxy", "--port", "0", "--mode", "update", "--recording", str(path)]
        arguments += ["--upstream", f"openai-completions={vendor_url}/v1"]
        self.process = subprocess.Popen(
            [PYTHON, "-c", COMMAND, *arguments],
            env=cli_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        first = self.process.stdout.readline()
        assert first.startswith("openprogram proxy: listening on "), (
            first + self.process.stderr.read()
        )
        self.url = first.split("listening on ", 1)[1].split(" ", 1)[0]
        self._errors: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read_errors, daemon=True).start()
        self.stderr: list[str] = []

    def _read_errors(self) -> None:
        for line in self.process.stderr:
            self._errors.put(line.rstrip("\n"))
        self._errors.put("")  # the end

    def next_error_line(self) -> str:
        line = self._errors.get(timeout=60)
        self.stderr.append(line)
        return line

    def wait(self) -> int:
        code = self.process.wait(timeout=60)
        while self.next_error_line():
            pass
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=60)


@pytest.mark.parametrize(("stop", "said"), [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_a_drifted_update_stopped_by_its_signal_is_kept_and_the_stop_says_so(
    recorded, isolated_home, stop, said
):
    with VendorServer() as server:
        server.queue(whole())
        proxy = Proxy(isolated_home, recorded, server.url)
        try:
            assert ask(proxy.url, "first") == "Hello world!"  # replayed
            assert ask(proxy.url, "changed") == "Hello world!"  # drifted: live
            proxy.process.send_signal(stop)
            assert proxy.wait() == 0
        finally:
            proxy.kill()
        assert len(server.requests) == 1
    assert proxy.stderr[-2:] == [
        f"openprogram proxy: stopped ({said}); recording {recorded}: updated: kept 1 call, recorded 1, dropped 1",
        "",
    ]
    assert "Traceback" not in "\n".join(proxy.stderr)
    assert prompts_in(recorded) == ["first", "changed"]


def test_a_stop_with_a_call_in_flight_answers_it_and_leaves_the_file(recorded, isolated_home):
    before = recorded.read_bytes()
    with VendorServer() as server:
        server.queue(whole(hold_after=2))  # mid-answer until released
        proxy = Proxy(isolated_home, recorded, server.url)
        answered: list[object] = []
        try:
            assert ask(proxy.url, "first") == "Hello world!"
            client = threading.Thread(
                target=lambda: answered.append(_outcome(proxy.url, "changed"))
            )
            client.start()
            assert server.holding.wait(60)
            proxy.process.send_signal(signal.SIGINT)
            assert proxy.next_error_line() == (
                "openprogram proxy: stopping (Ctrl-C): waiting for the 1 call in flight to be answered "
                "(Ctrl-C again cuts them); an update session is not kept"
            )
            server.release.set()
            client.join(60)
            assert proxy.wait() == 1
        finally:
            proxy.kill()
    assert answered  # the client got its answer (here the vendor's broken stream), not a hang
    assert proxy.stderr[-2] == (
        f"openprogram proxy: stopped (Ctrl-C); recording {recorded}: left unchanged: the run ended with "
        "1 call in flight when the proxy was stopped; its 1 new call was not kept"
    )
    assert recorded.read_bytes() == before


def _outcome(url: str, prompt: str) -> object:
    try:
        return ask(url, prompt)
    except Exception as error:  # noqa: BLE001 - any answer will do: the test is about the file
        return error


def test_sigkill_leaves_the_file_intact_and_the_next_update_removes_what_it_left(
    recorded, isolated_home, fresh_registry
):
    before = recorded.read_bytes()
    with VendorServer() as server:
        server.queue(whole())
        proxy = Proxy(isolated_home, recorded, server.url)
        try:
            ask(proxy.url, "first")
            ask(proxy.url, "changed")
            proxy.process.send_signal(signal.SIGKILL)
            assert proxy.wait() == -signal.SIGKILL
        finally:
            proxy.kill()
    assert recorded.read_bytes() == before
    (left,) = recorded.parent.glob(f".{recorded.name}.*.update")  # its new call, never kept
    with use_recording(recorded, "update"):  # the next update of that recording starts
        assert not left.exists()
    assert recorded.read_bytes() == before


def test_a_second_ctrl_c_cuts_the_calls_in_flight_quietly_and_leaves_the_file(
    recorded, isolated_home
):
    before = recorded.read_bytes()
    with VendorServer() as server:
        server.queue(whole(hold_after=2))  # never released here
        proxy = Proxy(isolated_home, recorded, server.url)
        answered: list[object] = []
        try:
            client = threading.Thread(
                target=lambda: answered.append(_outcome(proxy.url, "changed"))
            )
            client.start()
            assert server.holding.wait(60)
            proxy.process.send_signal(signal.SIGINT)
            assert proxy.next_error_line().startswith(
                "openprogram proxy: stopping (Ctrl-C): waiting for the 1 call"
            )
            proxy.process.send_signal(signal.SIGINT)
            assert proxy.wait() == 1
            client.join(60)
        finally:
            proxy.kill()
    assert answered and "Traceback" not in "\n".join(proxy.stderr)
    assert proxy.stderr[-2] == (
        f"openprogram proxy: stopped (Ctrl-C); recording {recorded}: left unchanged: the run ended with "
        "1 call in flight when the proxy was stopped; its 1 new call was not kept"
    )
    assert recorded.read_bytes() == before


def test_a_background_proxy_stops_when_asked_not_at_its_next_tick(tmp_path, monkeypatch):
    """``start_proxy``'s ``stop()`` wakes the server (uvicorn alone looks at its exit flag on a
    tick): with the tick an hour long, a stop with a call in flight still answers the call
    whole, then ends within ``stop``'s own timeout, and the recording holds the call."""
    from openprogram.proxy import prompt_server

    monkeypatch.setattr(prompt_server, "TICK_SECONDS", 3600.0)
    path = tmp_path / "session.jsonl"
    with VendorServer() as server:
        server.queue(whole(), whole(pause_after=1))
        settings = ProxySettings(
            upstreams={"openai-completions": server.url + "/v1"}, recording=path, mode="record"
        )
        proxy = start_proxy(settings)
        assert ask(proxy.url, "idle") == "Hello world!"
        proxy.stop(timeout=30)  # an idle proxy, a keep-alive connection open
        proxy = start_proxy(settings)
        answered: list[object] = []
        client = threading.Thread(target=lambda: answered.append(_outcome(proxy.url, "first")))
        client.start()
        assert server.holding.wait(60)
        stopping = threading.Thread(target=proxy.stop, kwargs={"timeout": 30})
        stopping.start()
        server.release.set()
        client.join(60)
        stopping.join(60)
        assert not stopping.is_alive()
    assert answered == ["Hello world!"]  # answered whole, not cut by the stop
    assert prompts_in(path) == ["idle", "first"]
