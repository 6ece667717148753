"""What ``openprogram proxy`` sends and keeps (docs/proxy.md, "What the client gets"): the
client's request reaches the upstream byte for byte, the vendor's answer is recorded as it came
and replayed as it came, unless redaction had to change it; and recordings made through the
proxy and through ``openprogram.providers`` replay either way."""

from __future__ import annotations

import asyncio
import json
import subprocess

import httpx
import pytest

from openprogram.providers.replay import read_recording_file
from openprogram.proxy import ProxySettings, start_proxy
from tests.conftest import PYTHON, cli_env
from tests.transcripts import openai_completions_streams as c
from tests.vendor_server import ScriptedResponse, VendorServer

API = "openai-completions"
KEY = "sk-test-vendor-answer-0123456789"


def _record(path, chunks, body: bytes, **settings) -> tuple[httpx.Response, VendorServer]:
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=chunks))
        proxy_settings = ProxySettings(
            upstreams={API: server.url + "/v1"}, recording=path, mode="record", **settings
        )
        with start_proxy(proxy_settings) as proxy:
            answer = _post(proxy.url, body)
    return answer, server


def _post(url: str, body: bytes) -> httpx.Response:
    headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    return httpx.post(url + "/v1/chat/completions", content=body, headers=headers, timeout=30)


def _replay(path, body: bytes, **settings) -> httpx.Response:
    with start_proxy(ProxySettings(recording=path, mode="replay", **settings)) as proxy:
        answer = _post(proxy.url, body)
        assert proxy.scope is not None
        proxy.scope.assert_consumed()
    return answer


def _streamed(*texts: str) -> list[bytes]:
    return c.sse_frames(
        c.ROLE,
        *(c.chunk(json.dumps({"content": text})) for text in texts),
        c.STOP,
        c.usage_chunk(5, 4),
        done=True,
    )


def _body(stream: bool = True, **fields) -> bytes:
    messages = [{"role": "user", "content": "Say it."}]
    return json.dumps(
        {"model": "gpt-4o-mini", "messages": messages, "stream": stream, **fields}
    ).encode()


def _text_of(answer: httpx.Response) -> str:
    text = ""
    for line in answer.text.splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                text += choice["delta"].get("content") or ""
    return text


def test_the_client_s_request_reaches_the_upstream_byte_for_byte(tmp_path):
    """Spacing, key order, an assistant tool call's ``"content": ""`` and a call that does not
    stream all reach the upstream as the client wrote them (before, ``""`` became ``null``,
    which llama.cpp's server refuses, and every call went upstream streaming)."""
    body = (
        b'{ "messages": [{"role": "user", "content": "Weather?"},\n'
        b' {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",'
        b' "function": {"name": "weather", "arguments": "{}"}}]},\n'
        b' {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],  "model": "gpt-4o-mini",'
        b' "tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}] }'
    )
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_06737a9306",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Sunny."},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 30,
            "completion_tokens": 2,
            "total_tokens": 32,
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }
    whole = json.dumps(completion).encode()
    path = tmp_path / "bytes.jsonl"
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=[whole], headers={"content-type": "application/json"}))
        with start_proxy(
            ProxySettings(upstreams={API: server.url + "/v1"}, recording=path, mode="record")
        ) as proxy:
            live = _post(proxy.url, body)
    (received,) = server.requests
    assert received.body == body
    assert received.path == "/v1/chat/completions"
    assert received.headers["authorization"] == f"Bearer {KEY}"
    assert not any(name.lower().startswith("x-openprogram") for name in received.headers)
    assert live.content == whole and live.headers["content-type"] == "application/json"
    replayed = _replay(path, body)
    assert (replayed.status_code, replayed.content) == (200, whole)


def test_a_stream_replays_with_the_vendor_s_bytes_and_chunking(tmp_path):
    path = tmp_path / "stream.jsonl"
    chunks = _streamed("Hello", " world", "!")
    live, _ = _record(path, chunks, _body())
    assert live.content == b"".join(chunks)
    (call,) = read_recording_file(path).calls
    assert call.vendor_answer is not None
    assert call.vendor_answer["chunks"] == [
        len(chunk) for chunk in chunks
    ]  # the server wrote one frame a chunk
    assert call.event_count > 0  # the events are parsed from the same bytes
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        with httpx.stream(
            "POST",
            proxy.url + "/v1/chat/completions",
            content=_body(),
            headers={"authorization": "Bearer x", "content-type": "application/json"},
        ) as response:
            pieces = list(response.iter_raw())
    assert b"".join(pieces) == b"".join(chunks)


@pytest.mark.parametrize("split", [False, True], ids=["whole", "split-across-deltas"])
def test_a_secret_in_the_model_s_output_replays_from_events_and_never_reaches_the_file(
    tmp_path, split
):
    secret = "corp-internal-7f3a9c2e51"
    texts = (
        ["The id is ", secret[:9], secret[9:], " ok."] if split else ["The id is ", secret, " ok."]
    )
    path = tmp_path / "secret.jsonl"
    live, _ = _record(path, _streamed(*texts), _body(), secrets=(secret,))
    assert _text_of(live) == f"The id is {secret} ok."  # the live client gets what the vendor said
    stored = path.read_text(encoding="utf-8")
    assert not any(secret[i : i + 8] in stored for i in range(len(secret) - 7))
    (call,) = read_recording_file(path).calls
    assert (
        call.vendor_answer is None
        and call.answer_withheld
        and "replays from its events" in call.answer_withheld
    )
    replayed = _replay(path, _body(), secrets=(secret,))
    assert _text_of(replayed) == "The id is [secret removed] ok."
    shown = subprocess.run(
        [PYTHON, "-m", "openprogram", "recordings", "show", str(path)],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "REPLAYS" in shown and "events" in shown and "redaction" in shown


def test_a_run_value_in_the_answer_replays_from_events_with_this_run_s_value(tmp_path):
    path = tmp_path / "values.jsonl"
    recorded_dir, replay_dir = "/tmp/pytest-of-a/run-17/work", "/tmp/pytest-of-b/run-42/work"
    _record(path, _streamed("Saved to ", recorded_dir, "."), _body(), values={"work": recorded_dir})
    stored = path.read_text(encoding="utf-8")
    assert recorded_dir not in stored and "{{work}}" in stored
    (call,) = read_recording_file(path).calls
    assert call.vendor_answer is None and call.answer_withheld
    replayed = _replay(path, _body(), values={"work": replay_dir})
    assert _text_of(replayed) == f"Saved to {replay_dir}."


def test_show_says_which_way_each_proxied_call_replays(tmp_path):
    path = tmp_path / "show.jsonl"
    _record(path, _streamed("Hello"), _body())
    shown = subprocess.run(
        [PYTHON, "-m", "openprogram", "recordings", "show", str(path), "--json"],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (summary,) = json.loads(shown)["calls"]
    assert summary["replays_from"] == "vendor" and summary["answer_withheld"] is None


def test_a_recording_made_through_the_providers_replays_through_the_proxy(tmp_path, isolated_home):
    """``openprogram run`` and ``use_recording`` record through openprogram.providers, without
    the vendor's bytes: the proxy serves such a call from its events, in the client's format."""
    import openai

    from openprogram.providers import complete_simple
    from openprogram.providers.models import get_model
    from openprogram.providers.scoped import use_recording
    from openprogram.providers.types import Context, SimpleStreamOptions, UserMessage

    path = tmp_path / "providers.jsonl"
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=_streamed("Hello", " there")))
        model = get_model("openai/gpt-4o-mini").model_copy(update={"base_url": server.url + "/v1"})
        context = Context(messages=[UserMessage(content="Say it.", timestamp=0)])
        with use_recording(path, "record"):
            message = asyncio.run(
                complete_simple(model, context, SimpleStreamOptions(api_key=KEY, max_tokens=50))
            )
    assert [block.text for block in message.content] == ["Hello there"]
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused", max_retries=0)
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Say it."}],
            max_completion_tokens=50,
            stream=True,
            stream_options={"include_usage": True},
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert proxy.scope is not None
        proxy.scope.assert_consumed()
    assert text == "Hello there"


def test_a_recording_made_through_the_proxy_replays_through_use_recording(tmp_path):
    """Its events are parsed from the vendor's bytes: code on openprogram.providers replays it."""
    from openprogram.providers import complete_simple
    from openprogram.providers.models import get_model
    from openprogram.providers.scoped import use_recording
    from openprogram.providers.types import Context, SimpleStreamOptions, UserMessage

    path = tmp_path / "proxied.jsonl"
    body = json.dumps(
        {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "Say it."}],
            "max_completion_tokens": 50,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    _record(path, _streamed("Hello", " there"), body)
    model = get_model("openai/gpt-4o-mini")
    context = Context(messages=[UserMessage(content="Say it.", timestamp=0)])
    with use_recording(path, "replay", ignore=("model.base_url",)) as scope:
        message = asyncio.run(complete_simple(model, context, SimpleStreamOptions(max_tokens=50)))
        scope.assert_consumed()
    assert [block.text for block in message.content] == ["Hello there"]
    assert (message.usage.input, message.usage.output) == (5, 4)


def test_a_live_call_that_reaches_nobody_names_the_host_and_how_to_point_elsewhere(tmp_path):
    from tests.openai_support import closed_port_url

    upstream = closed_port_url()
    with start_proxy(
        ProxySettings(upstreams={API: upstream}, recording=tmp_path / "none.jsonl", mode="record")
    ) as proxy:
        answer = _post(proxy.url, _body())
    assert answer.status_code == 502
    message = answer.json()["error"]["message"]
    host = upstream.split("//", 1)[1].split("/", 1)[0]
    assert f"cannot reach {host}" in message
    assert f"--upstream {API}=URL" in message and "[tool.openprogram.proxy.upstream]" in message
    assert KEY not in message


def test_an_image_by_url_travels_and_replays_compared_as_sent(tmp_path):
    """A part openprogram's types cannot hold goes upstream as it came and is compared as the
    JSON the client sent (before, the proxy answered 400)."""
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}

    def body(url: str) -> bytes:
        content = [{"type": "text", "text": "What is this?"}, {**image, "image_url": {"url": url}}]
        return json.dumps(
            {
                "model": "gpt-4o-mini",
                "messages": [{"role": "user", "content": content}],
                "stream": True,
            }
        ).encode()

    path = tmp_path / "image.jsonl"
    live, server = _record(path, _streamed("A cat."), body("https://example.com/cat.png"))
    assert _text_of(live) == "A cat."
    assert server.requests[0].body == body("https://example.com/cat.png")
    assert _text_of(_replay(path, body("https://example.com/cat.png"))) == "A cat."
    with start_proxy(ProxySettings(recording=path, mode="replay")) as proxy:
        drifted = _post(proxy.url, body("https://example.com/dog.png"))
    assert drifted.status_code == 400
    message = drifted.json()["error"]["message"]
    assert (
        "replay mismatch at call 0" in message
        and "context.messages[0].content[1].payload" in message
    )


def test_an_answer_the_proxy_cannot_read_still_reaches_the_client_whole(tmp_path):
    """Reading the answer into events is the proxy's business, not the client's: a line it
    cannot read fails the recorded call's events, and every byte still goes to the client."""
    chunks = _streamed("Hello")
    chunks.insert(2, b"data: {not json\n\n")
    path = tmp_path / "unreadable.jsonl"
    live, _ = _record(path, chunks, _body())
    assert live.content == b"".join(chunks)
    (call,) = read_recording_file(path).calls
    final = call.last_event_dump()
    assert final is not None and final["type"] == "error"


def test_the_strict_reader_refuses_a_stored_answer_that_does_not_add_up(tmp_path):
    from openprogram.providers.replay import RecordingFileError

    path = tmp_path / "edited.jsonl"
    _record(path, _streamed("Hello"), _body())
    lines = path.read_text(encoding="utf-8").splitlines()
    end = next(number for number, line in enumerate(lines) if '"call_end"' in line[:20])
    row = json.loads(lines[end])
    row["vendor_answer"]["chunks"][0] += 1
    lines[end] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RecordingFileError) as raised:
        read_recording_file(path)
    assert f"at line {end + 1}" in str(raised.value) and "chunks add up to" in str(raised.value)


def test_each_event_keeps_the_time_its_bytes_arrived_though_it_is_read_once_forwarded(tmp_path):
    """A proxy of its own reads the answer into events once all of it went to the client
    (docs/proxy.md, "Speed"); the recording still times each event by when its bytes came."""
    import time

    from openprogram.recordings.file.reader import read_event_times

    path = tmp_path / "timed.jsonl"
    gap_ms = 40
    with VendorServer() as server:
        server.queue(
            ScriptedResponse(chunks=_streamed("Hello", " world"), pause_after=2)
        )  # role, "Hello"
        with start_proxy(
            ProxySettings(upstreams={API: server.url + "/v1"}, recording=path, mode="record")
        ) as proxy:
            headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
            with httpx.stream(
                "POST", proxy.url + "/v1/chat/completions", content=_body(), headers=headers
            ) as response:
                pieces = response.iter_raw()
                seen = b""
                while b"Hello" not in seen:  # forwarded as it came, before the rest exists
                    seen += next(pieces)
                held_at = time.monotonic()
                while time.monotonic() - held_at < gap_ms / 1000:
                    time.sleep(gap_ms / 4000)  # the vendor pauses mid-answer for gap_ms
                server.release.set()
                rest = b"".join(pieces)
    assert _text_of(httpx.Response(200, content=seen + rest)) == "Hello world"
    recording = read_recording_file(path)
    (call,) = recording.calls
    (times,) = read_event_times(recording).values()
    kinds = [event.type for event in call.events()]
    hello, world = kinds.index("text_delta"), len(kinds) - 1 - kinds[::-1].index("text_delta")
    assert times[hello] is not None and times[world] is not None
    assert times[world] - times[hello] >= gap_ms  # not both stamped when they were read
    assert times == sorted(times)
