"""Faults on replay (docs/tutorial.md, "Testing what goes wrong"): a faulted call fails as its
vendor fails live, is not consumed, and the retry gets the recording.

The vendor tests record a real answer from a local server speaking the vendor's wire format,
then make the same server (or a closed port, or a silent one) fail live in each way, and check
that the replayed fault gives exactly the live provider's events, message included.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import pytest

from openprogram.providers import Fault, parse_fault
from openprogram.providers.faux import FauxProvider, faux_text, faux_tool_call
from openprogram.providers.replay import ReplayMismatch, ReplayOptions
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import complete, stream
from openprogram.providers.types import Context, Model, TextContent, ToolResultMessage, UserMessage
from openprogram.providers.vendors import google_generative_ai, openai_common
from openprogram.providers.vendors.failures import FAULT_ANSWERS, VENDOR_OF_API
from tests.openai_support import closed_port_url
from tests.transcripts.event_summary import collect
from tests.vendor_server import ScriptedResponse, VendorServer
from tests.vendors.test_vendor_contract import CASES, HELLO, VendorCase

#: A model served by a scripted provider registered under the OpenAI api: its faults read as
#: OpenAI's.
MODEL = Model(id="gpt-test", api="openai-completions", provider="openai")
RATE_LIMITED = (
    "openai: HTTP 429: Rate limit reached for requests per min (RPM). Please try again in 1s. "
    "Visit https://platform.openai.com/account/rate-limits to learn more."
)


def ask(text: str) -> Context:
    return Context(messages=[UserMessage(content=text, timestamp=0)])


async def events_of(model: Model, context: Context) -> list:
    return await collect(stream(model, context))


# ============================================================================ Fault and its spec


@pytest.mark.parametrize(
    ("spec", "fault"),
    [
        ("rate_limit", Fault("rate_limit")),
        ("rate_limit@2", Fault("rate_limit", call=2)),
        ("cut@0:15", Fault("cut", call=0, at_event=15)),
        ("server_error@1x3", Fault("server_error", call=1, times=3)),
        ("timeout:4x2", Fault("timeout", at_event=4, times=2)),
        (" network ", Fault("network")),
    ],
)
def test_a_spec_reads_as_its_fault_and_back(spec, fault):
    assert parse_fault(spec) == fault
    assert parse_fault(fault.spec) == fault


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("ratelimit", "kind must be one of rate_limit, overloaded"),
        ("rate_limit@x", "does not read as kind[@call][:event][xtimes]"),
        ("rate_limit@1x0", "times must be an int >= 1"),
        ("rate_limit:3", "at_event applies to cut and timeout only"),
        ("", "does not read as kind[@call][:event][xtimes]"),
    ],
)
def test_a_bad_spec_is_named_with_the_grammar(spec, fragment):
    with pytest.raises(ValueError) as raised:
        parse_fault(spec)
    message = str(raised.value)
    assert message.startswith(f"fault {spec!r}") and fragment in message
    assert "kind[@call][:event][xtimes]" in message


@pytest.mark.parametrize(
    ("keywords", "field"),
    [
        ({"kind": "slow"}, "kind"),
        ({"kind": "cut", "call": -1}, "call"),
        ({"kind": "cut", "call": True}, "call"),
        ({"kind": "cut", "at_event": "3"}, "at_event"),
        ({"kind": "cut", "times": 0}, "times"),
        ({"kind": "cut", "lane": 3}, "lane"),
        ({"kind": "network", "at_event": 2}, "at_event"),
    ],
)
def test_a_bad_fault_names_its_field(keywords, field):
    with pytest.raises(ValueError, match=rf"^Fault {field} "):
        Fault(**keywords)


def test_replay_options_name_the_option_at_fault():
    with pytest.raises(ValueError, match="rechunk takes a seed"):
        ReplayOptions.of(rechunk="soon")
    with pytest.raises(ValueError, match="pace takes 'recorded' or a number > 0"):
        ReplayOptions.of(pace=0)
    with pytest.raises(ValueError, match="a fault is a Fault or a string"):
        ReplayOptions.of(faults=[3])
    options = ReplayOptions.of(["cut@1", Fault("network")], 7, "recorded")
    assert options == ReplayOptions((Fault("cut", call=1), Fault("network")), 7, 1.0)
    assert options.describe() == "faults cut@1, network; rechunk seed 7; pace recorded"


def test_a_random_seed_is_picked_and_said():
    said: list[str] = []
    options = ReplayOptions.of(rechunk="random", announce=said.append)
    assert options.rechunk is not None and said == [
        f"openprogram: rechunk seed {options.rechunk} (rechunk={options.rechunk} repeats this run)"
    ]


# ============================================================================ replay semantics


@pytest.fixture
def scripted(fresh_registry) -> FauxProvider:
    """A scripted provider in the OpenAI api's place (replay never calls it)."""
    provider = FauxProvider()
    fresh_registry.register_api_provider("openai-completions", provider)
    return provider


async def record_two(path, scripted) -> None:
    scripted.queue(faux_text("first answer"), faux_text("second answer"))
    with use_recording(path, "record"):
        await complete(MODEL, ask("one"))
        await complete(MODEL, ask("two"))


async def test_a_faulted_call_is_not_consumed_and_the_retry_gets_the_recording(tmp_path, scripted):
    path = tmp_path / "r.jsonl"
    await record_two(path, scripted)
    before = path.read_bytes()
    with use_recording(path, "replay", faults=["rate_limit@1"]) as scope:
        assert (await complete(MODEL, ask("one"))).content[0].text == "first answer"
        failed = await events_of(MODEL, ask("two"))
        assert [event.type for event in failed] == ["error"]
        assert failed[0].error.error_message == RATE_LIMITED
        assert failed[0].error.content == [] and failed[0].error.stop_reason == "error"
        assert scope.call_count == 1  # the faulted request consumed nothing
        assert (await complete(MODEL, ask("two"))).content[0].text == "second answer"
        scope.assert_consumed()
    assert path.read_bytes() == before


async def test_times_faults_before_the_call_is_served_and_unused_calls_still_fail(
    tmp_path, scripted
):
    path = tmp_path / "r.jsonl"
    await record_two(path, scripted)
    with use_recording(path, "replay", faults=[Fault("server_error", call=0, times=3)]) as scope:
        messages = [await complete(MODEL, ask("one")) for _ in range(4)]
        assert [m.stop_reason for m in messages] == ["error", "error", "error", "stop"]
        assert messages[0].error_message == (
            "openai: HTTP 500: The server had an error while processing your request. Sorry about that!"
        )
        with pytest.raises(ReplayMismatch) as unused:
            scope.assert_consumed()
    assert unused.value.field_path == "remaining_calls"


async def test_a_fault_without_a_call_fails_every_call_once(tmp_path, scripted):
    path = tmp_path / "r.jsonl"
    await record_two(path, scripted)
    with use_recording(path, "replay", faults=["overloaded"]) as scope:
        outcomes = [
            (await complete(MODEL, ask(text))).stop_reason for text in ("one", "one", "two", "two")
        ]
        scope.assert_consumed()
    assert outcomes == ["error", "stop", "error", "stop"]


async def test_faults_fire_in_order_for_the_same_call(tmp_path, scripted):
    path = tmp_path / "r.jsonl"
    await record_two(path, scripted)
    with use_recording(path, "replay", faults=["network@0", "timeout@0x2"]):
        messages = [await complete(MODEL, ask("one")) for _ in range(4)]
    assert [
        m.error_message.split(": ", 1)[1][:40] if m.error_message else "served" for m in messages
    ] == [
        "connection failed (ConnectionError): Con",
        "connection failed (ConnectionError): Req",
        "connection failed (ConnectionError): Req",
        "served",
    ]


async def test_a_mismatch_is_still_a_mismatch_under_faults(tmp_path, scripted):
    path = tmp_path / "r.jsonl"
    await record_two(path, scripted)
    with use_recording(path, "replay", faults=["rate_limit"]):
        with pytest.raises(ReplayMismatch):
            await complete(MODEL, ask("not recorded"))


async def test_cut_serves_the_events_up_to_its_event_then_the_dropped_connection(
    tmp_path, scripted
):
    path = tmp_path / "r.jsonl"
    scripted.queue(faux_text("one two three four five six"))
    with use_recording(path, "record"):
        recorded = await events_of(MODEL, ask("one"))
    with use_recording(path, "replay", faults=["cut@0:3"]) as scope:
        cut = await events_of(MODEL, ask("one"))
        served = await events_of(MODEL, ask("one"))
        scope.assert_consumed()
    assert cut[:4] == recorded[:4] and len(cut) == 5
    error = cut[-1].error
    assert error.content == recorded[3].partial.content and error.stop_reason == "error"
    assert error.error_message == (
        "openai: connection failed (ConnectionError): Connection error. (peer closed connection "
        "without sending complete message body (incomplete chunked read))"
    )
    assert served == recorded


async def test_cut_without_an_event_breaks_midway_and_past_the_end_before_the_terminal(
    tmp_path, scripted
):
    path = tmp_path / "r.jsonl"
    scripted.queue(faux_text("one two three four five six"))
    with use_recording(path, "record"):
        recorded = await events_of(MODEL, ask("one"))
    with use_recording(path, "replay", faults=["cut@0", "cut@0:999"]):
        midway = await events_of(MODEL, ask("one"))
        late = await events_of(MODEL, ask("one"))
    before_terminal = len(recorded) - 1
    assert len(midway) == (before_terminal - 1) // 2 + 2
    assert late[:-1] == recorded[:-1] and late[-1].type == "error"


async def test_a_fault_in_a_lane_applies_there_only(tmp_path, scripted):
    from openprogram.providers import lane

    path = tmp_path / "r.jsonl"
    scripted.queue(faux_text("root"), faux_text("worker"))
    with use_recording(path, "record"):
        await complete(MODEL, ask("root"))
        with lane("worker"):
            await complete(MODEL, ask("worker"))
    with use_recording(path, "replay", faults=[Fault("rate_limit", lane="worker")]) as scope:
        assert (await complete(MODEL, ask("root"))).stop_reason == "stop"
        with lane("worker"):
            assert (await complete(MODEL, ask("worker"))).stop_reason == "error"
            assert (await complete(MODEL, ask("worker"))).content[0].text == "worker"
        scope.assert_consumed()


async def test_faults_never_apply_when_recording(tmp_path, scripted):
    path = tmp_path / "r.jsonl"
    scripted.queue(faux_text("live"))
    with use_recording(path, "record", faults=["rate_limit", "cut@0:1"]):
        assert (await complete(MODEL, ask("one"))).content[0].text == "live"
    with pytest.raises(ValueError, match="fault 'late': Fault kind must be one of"):
        with use_recording(path, "record", faults=["late"]):
            pass


# ============================================================================ a retrying agent


async def run_agent(retries: int) -> str:
    """A two-turn agent (a tool call, then the answer) that retries a failed model call."""
    context = ask("what is the weather?")
    while True:
        for _attempt in range(retries + 1):
            message = await complete(MODEL, context)
            if message.stop_reason != "error":
                break
        if message.stop_reason == "error":
            raise RuntimeError(message.error_message)
        context.messages.append(message)
        calls = [block for block in message.content if block.type == "toolCall"]
        if not calls:
            return message.content[0].text
        for call in calls:
            context.messages.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=[TextContent(text="sunny")],
                    timestamp=0,
                )
            )


async def test_an_agent_with_retries_passes_a_rate_limit_and_one_without_fails_with_it(
    tmp_path, scripted
):
    path = tmp_path / "agent.jsonl"
    scripted.queue(faux_tool_call("weather", {"city": "Paris"}), faux_text("It is sunny."))
    with use_recording(path, "record"):
        assert await run_agent(retries=0) == "It is sunny."
    before = path.read_bytes()
    with use_recording(path, "replay", faults=["rate_limit@1"]) as scope:
        assert await run_agent(retries=2) == "It is sunny."
        scope.assert_consumed()
    with use_recording(path, "replay", faults=["rate_limit@1"]):
        with pytest.raises(RuntimeError) as failed:
            await run_agent(retries=0)
    assert str(failed.value) == RATE_LIMITED  # the vendor's error, not a replay mismatch
    assert path.read_bytes() == before


# ============================================================================ as each vendor fails live


def silent_server() -> tuple[socket.socket, str]:
    """A server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}"


@contextlib.contextmanager
def short_timeouts(case: VendorCase, kind: str) -> Iterator[None]:
    """For the live failure of a timeout only, each vendor's client gives up after 0.3 s without
    a byte (a stall's timeout, quickly); every other live call keeps the SDK's own timeout, so a
    loaded machine cannot turn it into a timeout."""
    if not kind.startswith("timeout"):
        yield
        return
    make_client = openai_common.OpenAIProviderBase._client
    http_options = google_generative_ai.GoogleGenerativeAIProvider._http_options
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            openai_common.OpenAIProviderBase,
            "_client",
            lambda self, *args: make_client(self, *args).with_options(timeout=0.3),
        )
        patch.setattr(
            google_generative_ai.GoogleGenerativeAIProvider,
            "_http_options",
            lambda self, *args: {**http_options(self, *args), "timeout": 300},
        )
        yield


def live_provider(case: VendorCase, kind: str = ""):
    extra = (
        {"timeout": 0.3} if case.api == "anthropic-messages" and kind.startswith("timeout") else {}
    )
    return case.provider(max_retries=0, **extra)


async def live_failure(case: VendorCase, kind: str, server: VendorServer) -> list:
    """What the live provider gives when its vendor fails with ``kind``."""
    model = case.model(server.url)
    if kind in ("rate_limit", "overloaded", "server_error"):
        answer = FAULT_ANSWERS[VENDOR_OF_API[case.api]][kind]
        server.queue(
            ScriptedResponse(
                status=answer.status,
                headers={"content-type": "application/json", **answer.headers},
                chunks=[json.dumps(answer.body).encode()],
            )
        )
    elif kind == "network":
        model = case.model(closed_port_url().removesuffix("/v1"))
    elif kind == "cut":
        server.queue(ScriptedResponse(chunks=case.plain.chunks, break_after=case.hold_after))
    elif kind == "timeout-mid":
        server.queue(ScriptedResponse(chunks=case.plain.chunks, hold_after=case.hold_after))
    with short_timeouts(case, kind):
        return await collect(live_provider(case, kind).stream(model, HELLO, case.options()))


@pytest.mark.parametrize(
    "kind", ["rate_limit", "overloaded", "server_error", "network", "cut", "timeout", "timeout-mid"]
)
@pytest.mark.parametrize("case", CASES, ids=[case.api for case in CASES])
async def test_a_replayed_fault_is_what_the_vendor_provider_gives_live(
    case, kind, server, tmp_path, fresh_registry
):
    fresh_registry.register_api_provider(case.api, live_provider(case))
    path = tmp_path / "plain.jsonl"
    model = case.model(server.url)
    server.queue(ScriptedResponse(chunks=case.plain.chunks))
    with use_recording(path, "record"):
        recorded = await collect(stream(model, HELLO, case.options()))
    assert recorded[-1].type == "done"

    if kind == "timeout":
        listener, url = silent_server()
        try:
            with short_timeouts(case, kind):
                live = await collect(
                    live_provider(case, kind).stream(case.model(url), HELLO, case.options())
                )
        finally:
            listener.close()
    else:
        live = await live_failure(case, kind, server)
    assert live[-1].type == "error"
    broke_after = len(live) - 2  # the last event a broken stream delivered (-1: none)
    fault = Fault(
        "timeout" if kind == "timeout-mid" else kind,  # type: ignore[arg-type]
        at_event=broke_after if kind in ("cut", "timeout-mid") else None,
    )
    if kind in ("cut", "timeout-mid"):
        assert broke_after > 0, "the live stream broke after some events"
    with use_recording(path, "replay", faults=[fault]) as scope:
        replayed = await collect(stream(model, HELLO, case.options()))
        again = await collect(stream(model, HELLO, case.options()))
        scope.assert_consumed()
    assert replayed == live
    assert again == recorded
