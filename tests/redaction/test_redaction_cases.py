"""Redaction removes secrets and changes nothing else: the cases of the redaction issue, each
as a user sees it (what a replay serves, what a file or a command shows)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import string
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from openprogram.providers.assembly import AssistantStreamAssembler
from openprogram.providers.lanes import lane
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.replay import (
    RecordedCallInterrupted,
    ReplayMismatch,
    ReplayProvider,
    read_recording_file,
)
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import stream
from openprogram.providers.types import Context, ImageContent, TextContent, UserMessage
from openprogram.recordings.redaction import PLACEHOLDER, redact_text
from tests.conftest import PYTHON, cli_env
from tests.record_replay.test_recording_support import (
    MODEL,
    ScriptedProvider,
    collect,
    context_of,
    rows_of,
)

from .test_stream_redaction import pieces, streamed

ALNUM = string.ascii_letters + string.digits
URL_SAFE = ALNUM + "-_"


# ============================================================================ helpers


def answer(blocks: list[tuple[str, str]], size: int, *, tool: str = "checkout") -> list[Any]:
    """The events of an answer whose blocks (``("text", TEXT)`` or ``("tool", ARGUMENTS)``)
    stream in ``size``-character deltas."""
    return streamed(blocks, size, tool=tool)


def record(
    path: Path, events: list[Any], context: Context | None = None, provider: Any = None
) -> list[Any]:
    """Record one call of ``provider`` (default: one that streams ``events``); the live events."""
    provider = provider or ScriptedProvider(events)
    recorder = RecordingProvider(provider, path)
    try:
        return asyncio.run(collect(recorder.stream(MODEL, context or context_of("go"))))
    finally:
        recorder.sink.close()


def replay(path: Path, context: Context | None = None, **options: Any) -> list[Any]:
    return asyncio.run(
        collect(ReplayProvider(path, **options).stream(MODEL, context or context_of("go")))
    )


def stored_deltas(path: Path) -> dict[tuple[int, int], str]:
    """The joined stored deltas of every block of every call, from the raw file rows."""
    joined: dict[tuple[int, int], str] = {}
    for row in rows_of(path):
        if row["type"] == "event" and "delta" in row["event"]:
            key = (row["call_index"], row["event"]["content_index"])
            joined[key] = joined.get(key, "") + row["event"]["delta"]
    return joined


def windows(secret: str) -> list[str]:
    return [secret[start : start + 8] for start in range(len(secret) - 7)]


def pieces_in(secret: str, *texts: str) -> list[str]:
    """The 8-character windows of ``secret`` found in any of ``texts``."""
    return [run for run in windows(secret) if any(run in text for text in texts)]


def assert_no_piece(secret: str, path: Path) -> None:
    """No 8-character window of ``secret`` in the file bytes or in any call's joined deltas."""
    found = pieces_in(secret, path.read_text(), *stored_deltas(path).values())
    assert not found, f"pieces of the secret are in the file: {found}"


def final_message(events: list[Any]) -> Any:
    last = events[-1]
    return last.message if last.type == "done" else last.error


def random_text(rng: random.Random, alphabet: str, length: int) -> str:
    """``length`` characters of ``alphabet``, with a digit and a letter of each case in it."""
    while True:
        text = "".join(rng.choice(alphabet) for _ in range(length))
        if (
            any(c.isdigit() for c in text)
            and any(c.islower() for c in text)
            and any(c.isupper() for c in text)
        ):
            return text


# ============================================================================ case 1


@pytest.mark.parametrize(
    "branch",
    [
        "task-1234-fix-login-redirect",
        "flask-2024-login-fix-abcdef12",
        "risk-2024-assessment-v2-abcdef",
    ],
)
def test_case_01_an_ordinary_identifier_in_tool_arguments_replays_unchanged(tmp_path, branch):
    arguments = orjson.dumps({"branch": branch}).decode()
    path = tmp_path / "rec.jsonl"
    live = record(path, answer([("tool", arguments)], 4))
    replayed = replay(path)
    assert final_message(replayed).content[0].arguments == {"branch": branch}
    assert replayed == live


# ============================================================================ case 2


PASSWORD_IN_ARGUMENTS = "Vq8mT3kLz6Wp1Rn4"


@pytest.mark.parametrize("name", ["next_page_token", "csrf_token", "cursor_token"])
def test_case_02_a_page_cursor_replays_unchanged_while_a_password_field_goes(tmp_path, name):
    cursor = "CiAKGjBpNDd2Nmp2Zml6"
    arguments = orjson.dumps({name: cursor, "password": PASSWORD_IN_ARGUMENTS}).decode()
    path = tmp_path / "rec.jsonl"
    record(path, answer([("tool", arguments)], 5, tool="list_items"))
    replayed = replay(path)
    assert final_message(replayed).content[0].arguments == {name: cursor, "password": PLACEHOLDER}
    assert (
        "".join(e.delta for e in replayed if e.type == "toolcall_delta")
        == orjson.dumps({name: cursor, "password": PLACEHOLDER}).decode()
    )
    assert_no_piece(PASSWORD_IN_ARGUMENTS, path)


# ============================================================================ case 3


def _blob(seed: int, size: int) -> str:
    return base64.urlsafe_b64encode(random.Random(seed).randbytes(size)).decode()


def _encrypted_reasoning() -> str:
    """An OpenAI-Responses-like ``encrypted_content`` (a Fernet token: url-safe base64) that
    happens to hold ``-sk-`` and 30 url-safe characters."""
    blob = "gAAAAAB" + _blob(3, 1500)
    inside = "-sk-" + random_text(random.Random(4), URL_SAFE, 30)
    return blob[:100] + inside + blob[100:]


def test_case_03_an_encrypted_reasoning_signature_is_stored_and_replayed_byte_for_byte(tmp_path):
    signature = _encrypted_reasoning()
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    index, event = assembler.begin_thinking()
    events.append(event)
    events.extend(
        assembler.append_thinking(index, piece) for piece in pieces("weighing the options", 4)
    )
    assembler.set_thinking_signature(index, signature)
    events.append(assembler.end_thinking(index))
    index, event = assembler.begin_text()
    events.append(event)
    events.append(assembler.append_text(index, "done"))
    events.extend(assembler.finish())
    path = tmp_path / "rec.jsonl"
    live = record(path, events)
    stored = final_message(list(read_recording_file(path).calls[0].events()))
    assert stored.content[0].thinking_signature == signature
    replayed = replay(path)
    assert final_message(replayed).content[0].thinking_signature == signature
    assert replayed == live


def test_case_03_a_large_base64_image_in_the_request_is_stored_and_replayed_byte_for_byte(tmp_path):
    data = base64.b64encode(random.Random(5).randbytes(3 * 64 * 1024)).decode()  # 256 KB of base64
    assert len(data) == 256 * 1024
    planted = "AIza" + random_text(random.Random(6), ALNUM, 35)
    data = data[:100_000] + planted + data[100_000 + len(planted) :]
    assert len(data) == 256 * 1024
    context = Context(
        system_prompt="describe",
        messages=[
            UserMessage(
                content=[
                    TextContent(text="what is in this picture?"),
                    ImageContent(data=data, mime_type="image/png"),
                ],
                timestamp=1,
            )
        ],
    )
    path = tmp_path / "rec.jsonl"
    live = record(path, answer([("text", "a cat on a mat")], 4), context)
    request = read_recording_file(path).calls[0].request
    assert request["context"]["messages"][0]["content"][1]["data"] == data
    assert replay(path, context) == live


# ============================================================================ case 4


def test_case_04_a_common_environment_value_stays_but_a_real_password_goes(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTGRES_PASSWORD", "postgres")  # the image's default: a word, not a secret
    db_password = "Xk7#pQ9vLm2wZr"
    monkeypatch.setenv("DB_PASSWORD", db_password)
    prompt = "connect to the postgres database as user postgres"
    text = f"Run psql -U postgres; the app logs in with {db_password} today."
    context = context_of(prompt)
    path = tmp_path / "rec.jsonl"
    record(path, answer([("text", text)], 4), context)
    assert_no_piece(db_password, path)
    request = read_recording_file(path).calls[0].request
    assert request["context"]["messages"][0]["content"] == prompt
    replayed = replay(path, context)
    assert (
        final_message(replayed).content[0].text
        == f"Run psql -U postgres; the app logs in with {PLACEHOLDER} today."
    )


# ============================================================================ case 5


@pytest.fixture
def scripted_faux(fresh_registry):
    """Register a scripted provider for api ``faux`` (``MODEL``'s); set its events per test."""
    provider = ScriptedProvider([])
    provider.requires_credentials = False
    fresh_registry.register_api_provider("faux", provider)
    return provider


def _through_facade(context: Context) -> list[Any]:
    return asyncio.run(collect(stream(MODEL, context)))


def test_case_05_a_run_value_is_replaced_only_where_it_stands_alone(tmp_path, scripted_faux):
    text = "listen on 8080, not 18080 or JIRA-80801"
    scripted_faux.events = answer([("text", text)], 3)
    path = tmp_path / "rec.jsonl"
    context = context_of("which port?")
    with use_recording(path, mode="record", values={"port": "8080"}):
        live = _through_facade(context)
    assert final_message(live).content[0].text == text
    stored = final_message(list(read_recording_file(path).calls[0].events()))
    assert stored.content[0].text == "listen on {{port}}, not 18080 or JIRA-80801"
    with use_recording(path, mode="replay", values={"port": "9090"}):
        replayed = _through_facade(context)
    assert final_message(replayed).content[0].text == "listen on 9090, not 18080 or JIRA-80801"
    assert (
        "".join(e.delta for e in replayed if e.type == "text_delta")
        == "listen on 9090, not 18080 or JIRA-80801"
    )


def test_case_05_a_literal_token_written_by_the_model_replays_as_the_literal(
    tmp_path, scripted_faux
):
    text = "the config template reads: listen on {{port}}"
    scripted_faux.events = answer([("text", text)], 3)
    path = tmp_path / "rec.jsonl"
    context = context_of("show the template")
    with use_recording(path, mode="record", values={"port": "8080"}):
        live = _through_facade(context)
    assert final_message(live).content[0].text == text
    # Run values may regroup deltas around a value, so the texts are compared, not the events.
    with use_recording(path, mode="replay", values={"port": "9090"}):
        replayed = _through_facade(context)
    assert final_message(replayed).content[0].text == text
    assert "".join(e.delta for e in replayed if e.type == "text_delta") == text


# ============================================================================ case 6


def _cut_after(deltas: list[str], ending: str) -> ScriptedProvider:
    """A text stream of ``deltas`` cut off after the last: an ``error`` event, or the
    provider raising."""
    assembler = AssistantStreamAssembler(MODEL, timestamp=5)
    events = [assembler.start()]
    index, event = assembler.begin_text()
    events.append(event)
    events.extend(assembler.append_text(index, delta) for delta in deltas)
    if ending == "error":
        events.append(assembler.fail("connection reset"))
        return ScriptedProvider(events)
    return ScriptedProvider(events, raise_after=len(events))


def _record_cut(path: Path, provider: ScriptedProvider, ending: str) -> None:
    try:
        record(path, [], provider=provider)
    except RuntimeError:
        assert ending == "raise"


def _replayed_text(path: Path) -> str:
    served = []

    async def go() -> None:
        try:
            async for event in ReplayProvider(path).stream(MODEL, context_of("go")):
                served.append(event)
        except RecordedCallInterrupted:
            pass

    asyncio.run(go())
    return "".join(e.delta for e in served if e.type == "text_delta")


@pytest.mark.parametrize("cut", ["p", "pla", "plan"])
@pytest.mark.parametrize("ending", ["error", "raise"])
def test_case_06_prose_cut_short_after_a_scheme_word_keeps_the_word(tmp_path, ending, cut):
    """ "In 2024 the basic plan" broken off in (or right at the end of) the word after "basic":
    what streamed up to and including "basic" is stored and replayed as it was; the unfinished
    word after it may be kept or replaced, but the scheme word is prose and stays."""
    prose = tmp_path / "prose.jsonl"
    _record_cut(prose, _cut_after(["In 2024 ", "the ", "basic ", cut], ending), ending)
    for shown in (stored_deltas(prose)[(0, 0)], _replayed_text(prose)):
        assert shown.startswith("In 2024 the basic "), shown
        assert shown[len("In 2024 the basic ") :] in (cut, PLACEHOLDER), shown

    secret = tmp_path / "secret.jsonl"
    _record_cut(secret, _cut_after(["the token is ", "ghp_", "1a2B"], ending), ending)
    assert "ghp_1a2B" not in secret.read_text()
    assert stored_deltas(secret)[(0, 0)] == f"the token is {PLACEHOLDER}"


# ============================================================================ case 7


PROSE_LIKE_SECRETS = [
    "version token 1.2.3-beta4",
    "Basic 2000-series",
    "Bearer 2nd-generation-bonds",
    "docker://alpine:3.18@sha256:" + "3f9a1c7e" * 8,
    "hf_AutoModelForCausalLM",
    "xoxo-love-you-forever-2",
    "ASIAPACIFIC2024Q3REV",
]
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


@pytest.mark.parametrize("prose", PROSE_LIKE_SECRETS)
def test_case_07_prose_that_looks_like_a_credential_replays_unchanged(tmp_path, prose):
    text = f"Note: {prose} is fine."
    path = tmp_path / "prose.jsonl"
    live = record(path, answer([("text", text)], 4))
    replayed = replay(path)
    assert final_message(replayed).content[0].text == text
    assert replayed == live

    secrets = tmp_path / "secrets.jsonl"
    record(secrets, answer([("text", f"send Bearer {JWT} or Basic dXNlcjE6cGFzczEyMzQ= now")], 4))
    assert_no_piece(JWT, secrets)
    assert_no_piece("dXNlcjE6cGFzczEyMzQ=", secrets)


SLACK_AND_AWS = [
    "xoxb-1234567890123-1234567890123-aB3dE6gH9jK2mN5pQ8sT1vW4",
    "xoxp-1234567890123-1234567890123-1234567890123-0123456789abcdef0123456789abcdef",
    "xoxa-2-1234567890123-1234567890123-abcdef0123456789abcdef",
    "xoxo-1234567890-1234567890-1234567890-0a1b2c3d4e",
    "AKIAY34FZKBOKMUTVV7A",
    "ASIAY34FZKBOKMUTVV7A",
]


@pytest.mark.parametrize("token", SLACK_AND_AWS)
def test_case_07_slack_tokens_and_aws_key_ids_in_their_documented_forms_still_go(tmp_path, token):
    """The prose rules for ``xoxo-`` and ``ASIA...`` words keep real tokens recognised."""
    path = tmp_path / "rec.jsonl"
    record(
        path,
        answer([("text", f"the bot uses {token} now"), ("tool", json.dumps({"note": token}))], 3),
    )
    assert_no_piece(token[4:], path)


# ============================================================================ case 8


MALFORMED_PASSWORD = "Zx9!kLm2#qR8vT"


@pytest.mark.parametrize(
    "arguments",
    [
        '{"password": "Zx9!kLm2#qR8vT",}',
        "{'password': 'Zx9!kLm2#qR8vT'}",
        '{"password": "Zx9!kLm2#qR8vT\nsecond line"}',
    ],
    ids=["trailing-comma", "single-quotes", "raw-newline"],
)
@pytest.mark.parametrize("size", range(1, 17))
def test_case_08_tool_arguments_that_are_not_json_leave_no_piece_of_a_password(
    tmp_path, arguments, size
):
    path = tmp_path / "rec.jsonl"
    record(path, answer([("tool", arguments)], size, tool="login"))
    assert_no_piece(MALFORMED_PASSWORD, path)


# ============================================================================ case 9


LANE_SECRET = "ghp_" + "R7mK2vQ9xL4pW8nT3sZ6bH1cJ5dF0gY2aE4u"


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [PYTHON, "-m", "openprogram", "recordings", *args],
        env=cli_env(home),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_case_09_a_secret_in_a_lane_name_reaches_neither_the_file_nor_the_commands(
    tmp_path, isolated_home
):
    assert len(LANE_SECRET) == 40
    path = tmp_path / "lanes.jsonl"

    async def go() -> None:
        recorder = RecordingProvider(
            ScriptedProvider(answer([("text", "hello from the worker")], 4)), path
        )
        with lane(f"worker-{LANE_SECRET}"):
            await collect(recorder.stream(MODEL, context_of("go")))
        recorder.sink.close()

    asyncio.run(go())
    outputs = {"file": path.read_text()}
    for args in (
        ["show", str(path)],
        ["show", str(path), "--json"],
        ["show", str(path), "--conversation"],
    ):
        result = _cli(isolated_home, *args)
        assert result.returncode == 0, result.stderr
        outputs[" ".join(args[:1] + args[2:])] = result.stdout + result.stderr
    page = tmp_path / "page.html"
    result = _cli(isolated_home, "view", str(path), "--output", str(page))
    assert result.returncode == 0, result.stderr
    outputs["view"] = result.stdout + result.stderr + page.read_text()
    leaks = {
        name: found for name, text in outputs.items() if (found := pieces_in(LANE_SECRET, text))
    }
    assert not leaks, f"pieces of the lane's secret: {leaks}"


# ============================================================================ case 10


def test_case_10_a_replay_mismatch_does_not_quote_an_unredacted_recorded_secret(tmp_path):
    secret = "sk-" + random_text(random.Random(10), ALNUM, 48)
    path = tmp_path / "rec.jsonl"
    record(path, answer([("text", "noted")], 4), context_of("my key is here"))
    # A file whose request holds the secret as it is (written by hand, or by older rules).
    lines = path.read_text().splitlines()
    number = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "request")
    request = json.loads(lines[number])
    request["context"]["messages"][0]["content"] = f"my key is {secret}"
    lines[number] = json.dumps(request)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ReplayMismatch) as caught:
        replay(path, context_of("my key is not here"))
    assert caught.value.field_path == "context.messages[0].content"
    found = pieces_in(secret, str(caught.value))
    assert not found, f"the mismatch quotes pieces of the secret: {found}"


# ============================================================================ case 11


def test_case_11_a_secret_variable_added_as_another_is_removed_is_known(tmp_path, monkeypatch):
    monkeypatch.setenv("OLD_SERVICE_TOKEN", "Lw3nB8qT5vR2kY7mX4pJ9cZ6")
    redact_text("a first redaction, with the old environment")
    record(tmp_path / "before.jsonl", answer([("text", "warm up")], 4))
    count = len(os.environ)
    new_value = "Qm7vT2xLp9RkW4nZ8sHd3Fj6"
    monkeypatch.delenv("OLD_SERVICE_TOKEN")
    monkeypatch.setenv("MY_SERVICE_TOKEN", new_value)
    assert len(os.environ) == count
    path = tmp_path / "rec.jsonl"
    record(path, answer([("text", f"the service token is {new_value} ok")], 4))
    assert_no_piece(new_value, path)
