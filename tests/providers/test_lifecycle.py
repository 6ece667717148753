"""The provider runtime lifecycle, each case in a fresh process with its own OPENPROGRAM_HOME."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from tests.conftest import PYTHON, cli_env

PRELUDE = """
import json, socket, sys, threading
from openprogram.providers import credentials

touched = []
def _refuse_socket(*args, **kwargs):
    touched.append("socket")
    raise OSError("network disabled in this test")
socket.socket.connect = _refuse_socket
socket.create_connection = _refuse_socket
def _refuse_key(provider):
    touched.append("credentials")
    raise AssertionError("credential resolver called")
credentials.resolve_provider_key = _refuse_key

from openprogram.providers.types import Context, Model, UserMessage
from openprogram.providers import initialization, api_registry
from openprogram.providers.stream import stream_simple

def call(api="faux", model_id="echo", provider="faux"):
    import asyncio
    async def go():
        events = [e async for e in stream_simple(Model(id=model_id, api=api, provider=provider), Context(messages=[UserMessage(content="hi", timestamp=0)]))]
        return events[-1].type
    try:
        return asyncio.run(go())
    except Exception as error:
        return f"{type(error).__name__}: {error}"

def report(**values):
    values["touched"] = touched
    print(json.dumps(values))
"""


def run_probe(home, body: str, config: dict | None = None) -> dict:
    if config is not None:
        (home / "config.json").write_text(json.dumps(config))
    script = PRELUDE + textwrap.dedent(body)
    completed = subprocess.run(
        [PYTHON, "-c", script], env=cli_env(home), capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_off_mode_registers_builtins_and_serves_vendors_directly(isolated_home):
    result = run_probe(
        isolated_home,
        """
        snapshot = initialization.initialize_provider_runtime()
        report(mode=snapshot.mode, apis=api_registry.registered_apis(),
               served=type(api_registry.lookup_registered_provider("openai-completions")).__name__,
               state=initialization.runtime_state(), result=call())
        """,
    )
    assert result["mode"] == "off" and result["state"] == "READY"
    assert result["apis"] == sorted(
        [
            "anthropic-messages",
            "faux",
            "google-generative-ai",
            "openai-completions",
            "openai-responses",
        ]
    )
    assert result["served"] == "OpenAICompletionsProvider"
    assert result["result"] == "done"


def test_concurrent_first_lookups_share_one_initialisation(isolated_home):
    result = run_probe(
        isolated_home,
        """
        from openprogram.providers import register
        calls = []
        original = register.register_builtins
        def counting():
            calls.append(threading.get_ident())
            original()
        register.register_builtins = counting
        barrier = threading.Barrier(16)
        seen = []
        def worker():
            barrier.wait()
            seen.append(id(api_registry.get_api_provider("faux")))
        threads = [threading.Thread(target=worker) for _ in range(16)]
        for t in threads: t.start()
        for t in threads: t.join()
        report(initialisations=len(calls), distinct=len(set(seen)), lookups=len(seen))
        """,
    )
    assert result["initialisations"] == 1
    assert result["lookups"] == 16 and result["distinct"] == 1


def test_builtin_registration_failure_is_stable_fresh_and_redacted(isolated_home):
    result = run_probe(
        isolated_home,
        """
        from openprogram.providers import register
        def broken():
            raise ImportError("cannot load vendor with key sk-abcdefghijklmnopqrstuvwxyz123456")
        register.register_builtins = broken
        errors = []
        for _ in range(3):
            try:
                api_registry.get_api_provider("faux")
            except initialization.ProviderRuntimeInitializationError as error:
                errors.append(error)
        report(count=len(errors), distinct=len({id(e) for e in errors}),
               stages={e.stage for e in errors} == {errors[0].stage},
               cause_type=errors[0].cause_type, message=str(errors[0]),
               causes=[e.__cause__ is None and e.__context__ is None for e in errors],
               state=initialization.runtime_state(), apis=api_registry.registered_apis())
        """,
    )
    assert result["count"] == 3 and result["distinct"] == 3 and result["stages"]
    assert result["cause_type"] == "ImportError"
    assert "sk-abcdefghijklmnopqrstuvwxyz123456" not in result["message"]
    assert "[secret removed]" in result["message"]
    assert all(result["causes"])
    assert result["state"] == "FAILED" and result["apis"] == []


def test_keyboard_interrupt_during_initialisation_fails_others_instead_of_hanging(isolated_home):
    result = run_probe(
        isolated_home,
        """
        from openprogram.providers import register
        entered = threading.Event()
        release = threading.Event()
        def interrupted():
            entered.set()
            release.wait(30)
            raise KeyboardInterrupt
        register.register_builtins = interrupted
        outcome = {}
        def first():
            try:
                initialization.initialize_provider_runtime()
            except KeyboardInterrupt:
                outcome["first"] = "KeyboardInterrupt"
        def other(name):
            try:
                initialization.initialize_provider_runtime()
                outcome[name] = "ok"
            except initialization.ProviderRuntimeInitializationError as error:
                outcome[name] = error.cause_type
        t1 = threading.Thread(target=first); t1.start(); entered.wait(30)
        others = [threading.Thread(target=other, args=(f"other{i}",)) for i in range(3)]
        for t in others: t.start()
        while len(initialization._condition._waiters) < 3:  # all three are waiting
            threading.Event().wait(0.001)
        release.set()
        for t in [t1, *others]: t.join(30)
        report(outcome=outcome, alive=any(t.is_alive() for t in [t1, *others]))
        """,
    )
    assert result["alive"] is False
    assert result["outcome"] == {
        "first": "KeyboardInterrupt",
        "other0": "KeyboardInterrupt",
        "other1": "KeyboardInterrupt",
        "other2": "KeyboardInterrupt",
    }


BLOCKED_PROBE = """
snapshot = initialization.initialize_provider_runtime()
report(mode=snapshot.mode, diagnosis=snapshot.diagnosis, state=initialization.runtime_state(),
       faux=call(), vendor=call("openai-completions", "gpt-4o-mini", "openai"),
       late=(api_registry.register_api_provider("late-api", object()) or call("late-api")))
"""


@pytest.mark.parametrize(
    ("config", "cause"),
    [
        ({"record_replay": {"mode": "rewind", "file": "x"}}, "unknown record_replay.mode 'rewind'"),
        ({"record_replay": {"mode": "replay", "file": ""}}, "record_replay.file is empty"),
        ({"record_replay": {"mode": "record"}}, "record_replay.file is empty"),
        (
            {"record_replay": {"mode": "record", "file": "/tmp/x.jsonl"}},
            "record mode needs a managed recording ID",
        ),
        ({"record_replay": {"mode": "replay", "file": "missing-one"}}, "missing-one.jsonl"),
    ],
    ids=[
        "unknown-mode",
        "empty-replay-selector",
        "no-record-selector",
        "record-path",
        "missing-file",
    ],
)
def test_activation_failure_blocks_every_call_without_credentials_or_network(
    isolated_home, config, cause
):
    result = run_probe(isolated_home, BLOCKED_PROBE, config)
    assert result["mode"] == "blocked" and result["state"] == "READY"
    assert cause in result["diagnosis"]
    for outcome in (result["faux"], result["vendor"], result["late"]):
        assert outcome.startswith("ProviderBlockedError: record/replay could not be activated")
        assert cause in outcome
        assert (
            "openprogram recordings status" in outcome and "openprogram recordings off" in outcome
        )
    assert result["touched"] == []


def test_corrupt_and_wrong_version_replay_files_block(isolated_home):
    folder = isolated_home / "recordings"
    folder.mkdir(mode=0o700)
    (folder / "corrupt.jsonl").write_text(
        '{"type": "header", "format_version": 1}\n{"type": "request", "call_'
    )
    (folder / "future.jsonl").write_text('{"type": "header", "format_version": 3}\n')
    corrupt = run_probe(
        isolated_home, BLOCKED_PROBE, {"record_replay": {"mode": "replay", "file": "corrupt"}}
    )
    assert corrupt["mode"] == "blocked" and "corrupt.jsonl at line 2" in corrupt["diagnosis"]
    future = run_probe(
        isolated_home, BLOCKED_PROBE, {"record_replay": {"mode": "replay", "file": "future"}}
    )
    assert future["mode"] == "blocked" and "future.jsonl" in future["diagnosis"]
    assert corrupt["touched"] == [] and future["touched"] == []


def test_configuration_is_read_once_per_process(isolated_home):
    result = run_probe(
        isolated_home,
        """
        first = initialization.initialize_provider_runtime()
        import os
        with open(os.environ["OPENPROGRAM_HOME"] + "/config.json", "w") as f:
            f.write('{"record_replay": {"mode": "rewind"}}')
        second = initialization.initialize_provider_runtime()
        report(first=first.mode, second=second.mode, same=first is second, result=call())
        """,
        {"record_replay": {"mode": "off"}},
    )
    assert result == {
        "first": "off",
        "second": "off",
        "same": True,
        "result": "done",
        "touched": [],
    }
