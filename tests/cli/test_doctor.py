"""The doctor: two recordings of one test whose prompt holds the time, a uuid and a port get the
rules that make the second replay green, as a project table and as marker keywords, and
nothing meaningful among them; a real content change is listed apart; a drift report names
the rule; ``pytest --llm-doctor`` does the same from two live runs. The volatile shapes
themselves are held to examples that must and must not be covered."""

from __future__ import annotations

import json
import re
import shutil
import tomllib

import pytest

from openprogram.cli.main import main as cli_main
from openprogram.recordings.replay.volatile import RequestFilter
from openprogram.recordings.replay.volatile_shapes import SHAPES, covering_shapes, volatile_hint

SESSION_TEST = """
import datetime
import os
import socket
import uuid

import pytest
from openprogram.providers.models import get_model
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, UserMessage

MODEL = get_model("faux/echo")


@pytest.mark.llm_recording{marker}
async def test_session_prompt():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        system = (
            f"Session {{uuid.uuid4()}} started at {{datetime.datetime.now().isoformat()}}. "
            f"The tools listen on http://127.0.0.1:{{port}}/v1."
        )
        task = os.environ.get("TASK", "count the tides")
        reply = await complete(MODEL, Context(system_prompt=system, messages=[UserMessage(content=task)]))
    assert reply.content[0].text == f"echo: {{task}}"
"""


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p",
        "asyncio",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-p",
        "no:randomly",
        "-q",
        *args,
    )


@pytest.fixture
def two_records(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_session=SESSION_TEST.format(marker=""))
    recording = pytester.path / "recordings" / "test_session" / "test_session_prompt.jsonl"
    run_inner(pytester, "--llm-record-mode=rewrite").assert_outcomes(passed=1)
    shutil.copy(recording, pytester.path / "a.jsonl")
    run_inner(pytester, "--llm-record-mode=rewrite").assert_outcomes(passed=1)
    shutil.copy(recording, pytester.path / "b.jsonl")
    return pytester


def doctor(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()  # what the inner runs printed
    status = cli_main(["recordings", "doctor", *args])
    out = capsys.readouterr().out
    return status, out


def test_doctor_proposes_the_rules_that_make_the_second_replay_green(two_records, capsys):
    folder = two_records.path
    status, out = doctor(capsys, str(folder / "a.jsonl"), str(folder / "b.jsonl"), "--json")
    assert status == 0
    report = json.loads(out)
    assert report["schema_version"] == 1 and report["calls_compared"] == 1
    assert report["meaningful"] == [] and report["notes"] == []
    shapes = {rule["shape"]: rule for rule in report["rules"]}
    assert set(shapes) == {"uuid", "datetime", "port"}
    for rule in report["rules"]:
        assert rule["kind"] == "normalize" and rule["fields"] == ["context.system_prompt"]
        assert rule["example"]["a"] != rule["example"]["b"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+", shapes["datetime"]["example"]["a"])
    assert re.fullmatch(r"[0-9a-f-]{36}", shapes["uuid"]["example"]["b"])
    rules = report["record_replay"]
    RequestFilter(rules["ignore"], rules["normalize"])

    # Replayed as recorded, the test drifts on the time, the uuid and the port, and the report
    # says so, naming the rule.
    drifted = run_inner(two_records)
    drifted.assert_outcomes(failed=1)
    drifted.stdout.fnmatch_lines(
        [
            "replay mismatch at call 0, field context.system_prompt:*",
            "note: the two values differ only in a uuid, a datetime and a port (*); a replay overlooks them with "
            "these rules in [[]tool.openprogram.record_replay[]] (or the marker's normalize=):",
            "  normalize = [[]*'<uuid>'], [[]*'<datetime>'], [[]*'\\1<port>'][]]",
        ]
    )

    # The rules in the project file: green.
    status, text = doctor(capsys, str(folder / "a.jsonl"), str(folder / "b.jsonl"))
    assert status == 0
    snippet = text[text.index("[tool.openprogram.record_replay]") :].split("\n\n")[0]
    assert tomllib.loads(snippet)["tool"]["openprogram"]["record_replay"] == {
        "normalize": rules["normalize"]
    }
    assert "# uuid in context.system_prompt; e.g. '" in snippet
    (folder / "pyproject.toml").write_text(snippet + "\n")
    (folder / "pyproject.toml").chmod(0o644)
    run_inner(two_records).assert_outcomes(passed=1)
    run_inner(two_records).assert_outcomes(passed=1)

    # The same rules as the marker's keywords: green too.
    (folder / "pyproject.toml").unlink()
    marker = next(
        line for line in text.splitlines() if line.startswith("@pytest.mark.llm_recording(")
    )
    keywords = marker.removeprefix("@pytest.mark.llm_recording")
    two_records.makepyfile(test_session=SESSION_TEST.format(marker=keywords))
    run_inner(two_records).assert_outcomes(passed=1)


def test_a_real_content_change_is_listed_apart(two_records, capsys):
    folder = two_records.path
    recording = folder / "recordings" / "test_session" / "test_session_prompt.jsonl"
    two_records._monkeypatch.setenv("TASK", "count the moons")
    run_inner(two_records, "--llm-record-mode=rewrite").assert_outcomes(passed=1)
    status, out = doctor(capsys, str(folder / "a.jsonl"), str(recording), "--json")
    assert status == 1
    report = json.loads(out)
    assert {rule["shape"] for rule in report["rules"]} == {"uuid", "datetime", "port"}
    assert all(rule["fields"] == ["context.system_prompt"] for rule in report["rules"])
    (difference,) = report["meaningful"]
    assert (difference["field"], difference["a"], difference["b"]) == (
        "context.messages[0].content",
        "count the tides",
        "count the moons",
    )
    status, text = doctor(capsys, str(folder / "a.jsonl"), str(recording))
    assert status == 1
    assert "Differences that do not look volatile (no rule hides them;" in text
    assert (
        "  call 0 (A) / 0 (B): context.messages[0].content\n    A: 'count the tides'\n    B: 'count the moons'"
        in text
    )


def test_pytest_llm_doctor_runs_each_test_twice_and_leaves_its_recording_alone(pytester):
    pytester.makepyfile(test_session=SESSION_TEST.format(marker=""))
    result = run_inner(pytester, "--llm-doctor")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*openprogram doctor*",
            "test_session.py::test_session_prompt: two live runs compared",
            "  A: *llm-reports/recordings/test_session/test_session_prompt.doctor-1.jsonl",
            "  B: *llm-reports/recordings/test_session/test_session_prompt.doctor-2.jsonl",
            "  1 call(s) compared",
            "*",
            "  [[]tool.openprogram.record_replay[]]",
            "  normalize = [[]",
        ]
    )
    assert "uuid in context.system_prompt" in result.stdout.str()
    assert not (pytester.path / "recordings").exists()
    assert len(list((pytester.path / "llm-reports").rglob("*.doctor-*.jsonl"))) == 2
    refused = run_inner(pytester, "--llm-doctor", "--llm-record-mode=record")
    assert refused.ret != 0
    refused.stderr.fnmatch_lines(
        [
            "*--llm-doctor runs each test twice live and leaves its recording alone; drop --llm-record-mode=record"
        ]
    )


# ============================================================================ the shapes

VOLATILE = [
    (
        "uuid",
        "id 1b4e28ba-2fa1-11d2-883f-0016d3cca427.",
        "id 6fa459ea-ee8a-3ca4-894e-db77e160355e.",
    ),
    ("datetime", "at 2025-06-03T10:00:00.123456+02:00 now", "at 2025-06-04T09:30:12.5Z now"),
    ("date", "on 2025-06-03, then", "on 2026-01-17, then"),
    ("time", "at 10:00:00 sharp", "at 9:30:12.25 sharp"),
    ("epoch", "since 1749000000 s", "since 1749003600 s"),
    ("temporary path", "write /tmp/tmpab12_cd/out.txt", "write /tmp/tmpzz99x1/out.txt"),
    (
        "temporary path",
        "in /tmp/pytest-of-ana/pytest-12/test_x0/a",
        "in /tmp/pytest-of-ana/pytest-13/test_x0/a",
    ),
    ("port", "GET http://127.0.0.1:51234/v1", "GET http://127.0.0.1:40001/v1"),
    ("port", "on localhost:8080.", "on localhost:9090."),
    ("hex id", "trace req_8f3a2b1c9d0e", "trace req_77a1b2c3d4e5"),
    ("counter", "run 3 of the suite", "run 12 of the suite"),
    ("counter", "Attempt=2;", "Attempt=3;"),
]


@pytest.mark.parametrize(("shape", "a", "b"), VOLATILE)
def test_each_volatile_shape_covers_its_values_alone(shape, a, b):
    assert [covering.name for covering in covering_shapes(a, b) or ()] == [shape]


MEANINGFUL = [
    ("/calculator 6*7", "/calculator 6*8"),
    ("count the tides", "count the moons"),
    ("step 3 of 5", "step 4 of 5"),
    ("version 2025-06-03 of the plan, 1 item", "version 2025-06-04 of the plan, 2 items"),
    ("deadbeef", "cafebabe"),  # words of hex letters, no digit: not an id
    ("/tmp/tmpab12cd/out.txt", "/tmp/tmpab12cd/in.txt"),  # the folder is the same; the file is not
]


@pytest.mark.parametrize(("a", "b"), MEANINGFUL)
def test_a_meaningful_change_is_not_covered(a, b):
    assert covering_shapes(a, b) is None
    assert volatile_hint("context.system_prompt", a, b) is None


def test_every_shape_is_a_rule_a_replay_accepts_and_one_datetime_rule_wins_over_its_parts():
    RequestFilter(normalize=[shape.rule for shape in SHAPES])
    shapes = covering_shapes("2025-06-03T10:00:00", "2025-06-04T11:00:00")
    assert [shape.name for shape in shapes or ()] == ["datetime"]


def test_a_unix_timestamp_field_is_ignored_whole():
    hint = volatile_hint("options.metadata.sent_at", 1749000000, 1749000123)
    assert hint is not None and 'ignore = ["options.metadata.sent_at"]' in hint
    assert volatile_hint("options.max_tokens", 100, 200) is None
