"""Nothing secret is echoed (docs/file-format.md, "Redaction"): a lane name quoted by a message
and a recording's file name made from a test id are redacted by the rules of the file, so no
run of 8 characters of a secret reaches a log, an HTTP answer or a committed file name."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.lanes import lane
from openprogram.providers.recording import RecordingProvider
from openprogram.providers.replay import ReplayMismatch, ReplayProvider
from openprogram.providers.types import Context, Model, UserMessage
from openprogram.proxy import ProxySettings, start_proxy
from openprogram.testing import file_stem
from tests.plugin.test_pytest_plugin import run_inner
from tests.transcripts import openai_completions_streams as c
from tests.vendor_server import ScriptedResponse, VendorServer

ENV_KEY = "oaK7Qm2Zr9Xv4Lp8Wn3Bt6Yc1Hd5Fg0Js2Ty7"  # OPENAI_API_KEY
SHAPED_KEY = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eFxyzw"  # a value shape, not a known value
DECLARED = "acme-customer-77f3a9c2"
FAUX = Model(id="echo", api="faux", provider="faux")


def runs_in(secret: str, text: str) -> list[str]:
    """Every 8-character run of ``secret`` found in ``text``."""
    return [secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8] in text]


def secret_runs(text: str) -> list[str]:
    return runs_in(ENV_KEY, text) + runs_in(SHAPED_KEY[8:], text) + runs_in(DECLARED, text)


# ============================================================================ lane names


def context(text: str) -> Context:
    return Context(messages=[UserMessage(content=text, timestamp=1)])


async def ask(provider, text: str, name: str) -> None:
    with lane(name):
        async for _ in provider.stream(FAUX, context(text)):
            pass


@pytest.mark.parametrize(
    "name",
    [SHAPED_KEY, f"worker {ENV_KEY}", f"w={ENV_KEY}"],
    ids=["shaped", "env key", "env key glued"],
)
def test_a_replay_mismatch_quotes_a_lane_name_redacted(tmp_path, monkeypatch, name):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    path = tmp_path / "rec.jsonl"
    recorder = RecordingProvider(FauxProvider([faux_text("ok")]), path)
    asyncio.run(ask(recorder, "hi", name))
    recorder.sink.close()
    assert secret_runs(path.read_text()) == []
    messages = []
    for text, other in (
        ("changed", name),
        ("hi", f"{name} 2"),
    ):  # a drift in the lane; a lane not recorded
        with pytest.raises(ReplayMismatch) as failure:
            asyncio.run(ask(ReplayProvider(path), text, other))
        messages.append(str(failure.value))
    assert "lane '" in messages[0] and "lane '" in messages[1]
    assert secret_runs("\n".join(messages)) == []


def test_a_refused_lane_name_is_described_not_quoted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    for name in (f"a/{SHAPED_KEY}", f"team/{ENV_KEY}"):
        with pytest.raises(
            ValueError, match="a lane name must be a non-empty string without '/'"
        ) as failure:
            with lane(name):
                pass
        assert f"a name of {len(name)} characters with '/' at character" in str(failure.value)
        assert secret_runs(str(failure.value)) == []


@pytest.mark.parametrize("segments", [("a", SHAPED_KEY), ("team", f"{ENV_KEY}"), (SHAPED_KEY, "b")])
def test_a_key_that_makes_up_a_lane_segment_reaches_neither_the_file_nor_a_message(
    tmp_path, monkeypatch, segments
):
    """``lane("a")`` then ``lane(key)`` make the path ``a/KEY``: the key is a whole segment, so
    a whole token, though a ``/`` before it reads as part of a base64 word in other text."""
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)

    async def ask_nested(provider, text: str) -> None:
        with lane(segments[0]), lane(segments[1]):
            async for _ in provider.stream(FAUX, context(text)):
                pass

    path = tmp_path / "rec.jsonl"
    recorder = RecordingProvider(FauxProvider([faux_text("ok")]), path)
    asyncio.run(ask_nested(recorder, "hi"))
    recorder.sink.close()
    assert secret_runs(path.read_text()) == []
    asyncio.run(ask_nested(ReplayProvider(path), "hi"))  # the replay finds the lane as stored
    with pytest.raises(ReplayMismatch) as failure:
        asyncio.run(ask_nested(ReplayProvider(path), "changed"))
    assert "[secret removed]" in str(failure.value) and secret_runs(str(failure.value)) == []


def test_the_proxy_quotes_a_refused_lane_header_redacted(tmp_path):
    path = tmp_path / "rec.jsonl"
    chunks = c.sse_frames(
        c.ROLE, c.chunk(json.dumps({"content": "ok"})), c.STOP, c.usage_chunk(10, 5), done=True
    )
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=chunks))
        settings = ProxySettings(
            upstreams={"openai-completions": server.url + "/v1"}, recording=path, mode="record"
        )
        with start_proxy(settings) as proxy:
            answer = httpx.post(
                proxy.url + "/v1/chat/completions",
                json=body,
                headers={"X-OpenProgram-Lane": f"team//{SHAPED_KEY}"},
            )
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert "x-openprogram-lane header names a lane path like a/b" in message
    assert "[secret removed]" in message and secret_runs(message) == []


# ============================================================================ file names from test ids


def test_a_file_stem_holds_no_secret_and_stays_unique():
    stems = {file_stem(f"test_x[{SHAPED_KEY}]"), file_stem(f"test_x[{SHAPED_KEY[:-1]}Q]")}
    assert len(stems) == 2  # the hash of each exact id keeps them apart
    for stem in stems:
        assert stem.startswith("test_x_secret_removed-") and secret_runs(stem) == []
    assert secret_runs(file_stem(f"test_x[{DECLARED}]", (DECLARED,))) == []
    assert (
        file_stem(f"test_x[{DECLARED}]") == f"test_x_{DECLARED}"
    )  # declared elsewhere: not a secret here
    assert file_stem("test_x[3-abc]") == "test_x_3-abc"  # ordinary ids keep their names


INNER_SUITE = f"""
import asyncio, os, pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

ECHO = Model(id="echo", api="faux", provider="faux")
IDS = [{SHAPED_KEY!r}, os.environ["OPENAI_API_KEY"], "key-" + os.environ["OPENAI_API_KEY"], {DECLARED!r}, "plain"]


@pytest.mark.llm_recording(secrets=[{DECLARED!r}])
@pytest.mark.parametrize("token", IDS)
def test_agent(token):
    message = asyncio.run(complete(ECHO, Context(messages=[UserMessage(content=f"case {{IDS.index(token)}}", timestamp=0)])))
    assert message.content[0].text == f"echo: case {{IDS.index(token)}}"
"""


def test_a_parametrised_id_holding_a_key_never_becomes_a_file_name(pytester):
    pytester.makepyfile(test_agent_suite=INNER_SUITE)
    run_inner(pytester, "--llm-record-mode=record", OPENAI_API_KEY=ENV_KEY).assert_outcomes(
        passed=5
    )
    folder = pytester.path / "recordings" / "test_agent_suite"
    names = sorted(path.name for path in folder.iterdir())
    recordings = [name for name in names if name.endswith(".jsonl")]
    assert len(recordings) == 5, names  # one file per id, none shared
    assert "test_agent_plain.jsonl" in recordings
    assert secret_runs("\n".join(names)) == []
    for name in recordings:
        assert secret_runs((folder / name).read_text()) == []
    # The names are the same at the next run: the replay finds every recording.
    run_inner(pytester, OPENAI_API_KEY=ENV_KEY).assert_outcomes(passed=5)
    assert sorted(path.name for path in folder.iterdir()) == names
