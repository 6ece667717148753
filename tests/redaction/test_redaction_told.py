"""Redaction is told, not silent (docs/file-format.md, "Redaction"): when a rule replaces
something in the model's output, the recorder says so once per call, ``call_end`` counts it,
``show`` shows it, and a drift that follows names it. Values the user declares secret are
removed whatever they look like: ``use_recording(..., secrets=...)``, the plugin marker's
``secrets=`` and the configuration's ``record_replay.secret_env``."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
from pathlib import Path

import pytest

from openprogram import config
from openprogram.providers import use_recording
from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.replay import ReplayMismatch, read_recording_file
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage
from tests.conftest import PYTHON, cli_env
from tests.record_replay.test_recording_support import (
    MODEL,
    ScriptedProvider,
    collect,
    context_of,
    rows_of,
)

from .test_stream_redaction import streamed

KEY = "sk-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"
FAUX = Model(id="echo", api="faux", provider="faux")


def _record(path: Path, blocks: list[tuple[str, str]], size: int = 4) -> list:
    recorder = RecordingProvider(ScriptedProvider(streamed(blocks, size)), path)
    live = asyncio.run(collect(recorder.stream(MODEL, context_of("go"))))
    recorder.sink.close()
    return live


def test_a_call_whose_answer_lost_a_value_warns_once_and_counts_it(tmp_path, caplog):
    path = tmp_path / "rec.jsonl"
    with caplog.at_level(logging.WARNING, logger="openprogram.recordings"):
        _record(
            path,
            [
                ("text", f"your key is {KEY} ok"),
                ("tool", json.dumps({"password": "hunter2hunter2", "q": KEY})),
            ],
        )
    warnings = [record for record in caplog.records if record.name == "openprogram.recordings"]
    assert len(warnings) == 1  # one per call, naming every field
    message = warnings[0].getMessage()
    assert "call 0" in message and str(path) in message
    assert "content[0].text (rule: sk-key)" in message
    assert "content[1].arguments.password (rule: secret-field-name)" in message
    assert "content[1].arguments.q (rule: sk-key)" in message
    assert KEY[3:11] not in message
    (end,) = [row for row in rows_of(path) if row["type"] == "call_end"]
    assert end["redactions"] == [
        {"path": "content[0].text", "rules": ["sk-key"]},
        {"path": "content[1].arguments.password", "rules": ["secret-field-name"]},
        {"path": "content[1].arguments.q", "rules": ["sk-key"]},
    ]
    assert read_recording_file(path).calls[0].redactions == end["redactions"]


@pytest.mark.parametrize("valid", [True, False], ids=["valid JSON", "no closing brace"])
def test_a_tool_argument_is_named_by_its_key_path(tmp_path, caplog, valid):
    """The warning names the key inside the arguments, nested keys and list items included;
    a key that itself held a secret is named as stored."""
    arguments = json.dumps(
        {
            "user": "bob",
            "auth": {"client_secret": "s3cr3t-value-99"},
            "items": [{"note": "ok"}, {"note": f"use {KEY}"}],
            KEY: "x",
        }
    )
    if not valid:
        arguments = arguments[:-1]
    path = tmp_path / "rec.jsonl"
    with caplog.at_level(logging.WARNING, logger="openprogram.recordings"):
        _record(path, [("tool", arguments)])
    (end,) = [row for row in rows_of(path) if row["type"] == "call_end"]
    assert end["redactions"] == [
        {"path": "content[0].arguments.auth.client_secret", "rules": ["secret-field-name"]},
        {"path": "content[0].arguments.items[1].note", "rules": ["sk-key"]},
        {"path": 'content[0].arguments["[secret removed]"]', "rules": ["sk-key"]},
    ]
    (warning,) = [
        record.getMessage() for record in caplog.records if record.name == "openprogram.recordings"
    ]
    assert "content[0].arguments.auth.client_secret (rule: secret-field-name)" in warning
    assert KEY[3:11] not in warning and "s3cr3t-value-99" not in warning


def test_an_answer_that_lost_nothing_says_nothing(tmp_path, caplog):
    path = tmp_path / "rec.jsonl"
    with caplog.at_level(logging.WARNING, logger="openprogram.recordings"):
        _record(
            path,
            [
                ("text", "the key point is basic stuff, sk-learn is a library"),
                ("tool", '{"next_page_token": "CiAKGjBp"}'),
            ],
        )
    assert not [record for record in caplog.records if record.name == "openprogram.recordings"]
    (end,) = [row for row in rows_of(path) if row["type"] == "call_end"]
    assert "redactions" not in end


def test_a_run_value_is_no_loss(tmp_path, caplog):
    """``{{name}}`` stands for a value the replay gives back: nothing was lost, nothing told."""
    from openprogram.recordings.redaction import use_run_values

    path = tmp_path / "rec.jsonl"
    with (
        caplog.at_level(logging.WARNING, logger="openprogram.recordings"),
        use_run_values({"port": "8080"}),
    ):
        recorder = RecordingProvider(FauxProvider([faux_text("listening on 8080 now")]), path)
        asyncio.run(collect(recorder.stream(FAUX, context_of("port?"))))
        recorder.sink.close()
    assert not [record for record in caplog.records if record.name == "openprogram.recordings"]
    assert "listening on {{port}} now" in path.read_text()


def _show(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "openprogram", "recordings", "show", *args],
        env=cli_env(home), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip


def test_show_counts_what_redaction_replaced(tmp_path, isolated_home):
    path = tmp_path / "rec.jsonl"
    _record(path, [("text", f"use {KEY} here")])
    shown = _show(isolated_home, str(path))
    assert shown.returncode == 0, shown.stderr
    assert "REDACTED" in shown.stdout
    assert "redaction replaced part of the model's output in 1 call(s)" in shown.stdout
    assert "call 0: content[0].text (sk-key)" in shown.stdout
    as_json = _show(isolated_home, str(path), "--json")
    assert json.loads(as_json.stdout)["calls"][0]["redactions"] == [
        {"path": "content[0].text", "rules": ["sk-key"]}
    ]


def test_show_of_a_clean_recording_has_no_redacted_column(tmp_path, isolated_home):
    path = tmp_path / "rec.jsonl"
    _record(path, [("text", "nothing secret here")])
    shown = _show(isolated_home, str(path))
    assert shown.returncode == 0, shown.stderr
    assert "REDACTED" not in shown.stdout and "redaction replaced" not in shown.stdout


def test_a_drift_after_a_redacted_answer_names_it(tmp_path):
    """The agent sent back what the replay served (the placeholder); the live run sent the
    key. The mismatch says where the placeholder came from."""
    path = tmp_path / "rec.jsonl"
    first = FauxProvider([faux_text(f"the key is {KEY}"), faux_text("done")])
    recorder = RecordingProvider(first, path)

    async def conversation(provider, second_prompt: str) -> None:
        await collect(provider.stream(FAUX, context_of("key?")))
        await collect(
            provider.stream(
                FAUX, Context(messages=[UserMessage(content=second_prompt, timestamp=1)])
            )
        )

    # The agent's next request depends on the value it was given: here, its length.
    asyncio.run(conversation(recorder, f"the key has {len(KEY)} characters"))
    recorder.sink.close()
    from openprogram.providers.replay import ReplayProvider

    with pytest.raises(ReplayMismatch) as raised:
        asyncio.run(conversation(ReplayProvider(path), "the key has 16 characters"))
    text = str(raised.value)
    assert (
        "note: the recorded answer of call 0 lost a value to redaction at content[0].text (sk-key)"
        in text
    )
    assert KEY[3:11] not in text


# ============================================================================ declared secrets

CUSTOMER = "acme-7731"  # no shape of its own: secret because the user says so


def test_use_recording_secrets_are_removed_wherever_they_occur(tmp_path):
    path = tmp_path / "rec.jsonl"
    with use_recording(path, "record", secrets=[CUSTOMER]):
        message = asyncio.run(
            complete(
                FAUX, Context(messages=[UserMessage(content=f"check {CUSTOMER}", timestamp=1)])
            )
        )
    assert message.content[0].text == f"echo: check {CUSTOMER}"  # live: untouched
    text = path.read_text()
    assert CUSTOMER not in text and "acme-77" not in text
    assert "echo: check [secret removed]" in text
    with use_recording(path, "replay", secrets=[CUSTOMER]):  # the request matches as redacted
        replayed = asyncio.run(
            complete(
                FAUX, Context(messages=[UserMessage(content=f"check {CUSTOMER}", timestamp=1)])
            )
        )
    assert replayed.content[0].text == "echo: check [secret removed]"


@pytest.mark.parametrize("secrets", ["acme-7731", ["abc"], [7731]])
def test_use_recording_refuses_a_bad_secrets_value(tmp_path, secrets):
    with pytest.raises(ValueError, match="secret"):
        with use_recording(tmp_path / "rec.jsonl", "record", secrets=secrets):
            pass
    assert not (tmp_path / "rec.jsonl").exists()


def test_the_configuration_names_secret_environment_variables():
    assert config.validate_value("record_replay.secret_env", ["INTERNAL_HOST", "DB_URL"]) == [
        "INTERNAL_HOST",
        "DB_URL",
    ]
    with pytest.raises(
        config.ConfigError,
        match="record_replay.secret_env: 'db-url' is not an environment variable name",
    ):
        config.validate_value("record_replay.secret_env", ["db-url"])
    with pytest.raises(
        config.ConfigError, match="must be a JSON list of environment variable names"
    ):
        config.validate_value("record_replay.secret_env", "DB_URL")


def test_a_configured_secret_env_value_never_reaches_the_recording(tmp_path, isolated_home):
    """``config set record_replay.secret_env`` then ``run`` in record mode: the value of the
    named variable (an ordinary-looking host name) is not in the file."""
    host = "db7.corp.internal"
    env = cli_env(isolated_home, INTERNAL_HOST=host)

    def openprogram(*args: str) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [PYTHON, "-m", "openprogram", *args], env=env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    openprogram("config", "set", "record_replay.secret_env", '["INTERNAL_HOST"]')
    openprogram("recordings", "record", "--name", "hosts")
    answer = openprogram("run", f"connect to {host} please")
    assert host in answer.stdout  # the user sees the live answer
    (recording,) = (isolated_home / "recordings").rglob("hosts*.jsonl")
    text = recording.read_text()
    assert host not in text and "db7.corp" not in text
    assert "connect to [secret removed] please" in text


PLUGIN_TEST = """
import pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

ECHO = Model(id="echo", api="faux", provider="faux")

@pytest.mark.llm_recording(secrets=["acme-7731"])
async def test_customer():
    message = await complete(ECHO, Context(messages=[UserMessage(content="customer acme-7731", timestamp=0)]))
    # Live, the answer holds the customer; replayed, what the file holds: the placeholder.
    assert message.content[0].text in ("echo: customer acme-7731", "echo: customer [secret removed]")
"""


def test_the_marker_declares_secrets(pytester: pytest.Pytester):
    pytester.makepyfile(test_customer=PLUGIN_TEST)
    args = (
        "-p",
        "asyncio",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-q",
    )
    pytester.runpytest_subprocess(*args, "--llm-record-mode=record").assert_outcomes(passed=1)
    recording = pytester.path / "recordings" / "test_customer" / "test_customer.jsonl"
    text = recording.read_text()
    assert "acme-7731" not in text and "customer [secret removed]" in text
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)  # and it replays
