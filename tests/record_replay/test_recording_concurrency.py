"""Many threads and many processes recording into one file, and recorders killed at random
moments: whole lines, unique contiguous call indexes, nothing lost but the line in flight."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import orjson
import pytest

from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.recording import RecordingFileError, RecordingProvider, RecordingSink
from openprogram.providers.replay import read_recording_file

from .test_recording_support import MODEL, collect, context_of

REPO = Path(__file__).resolve().parents[2]

# A child process that records calls whose prompt and answer name (process, thread, call).
CHILD = textwrap.dedent(
    """
    import asyncio, sys, threading
    from openprogram.providers.faux import FauxProvider, faux_text
    from openprogram.providers.recording import RecordingProvider, RecordingSink
    from openprogram.providers.types import Context, Model, UserMessage

    path, name, threads, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    model = Model(id="m", api="faux", provider="faux")

    def answer(model, context, options):
        prompt = context.messages[0].content
        return faux_text(f"answer to {prompt} " + "word " * 30)

    def worker(thread):
        provider = RecordingProvider(FauxProvider([answer] * max(calls, 1) if calls else []), sink)
        async def run():
            number = 0
            while calls == 0 or number < calls:
                if calls == 0:
                    provider.wrapped_provider.queue(answer)
                prompt = f"{name}/{thread}/{number}"
                context = Context(messages=[UserMessage(content=prompt, timestamp=1)])
                async for _ in provider.stream(model, context):
                    pass
                number += 1
        asyncio.run(run())

    sink = RecordingSink(path)
    print("ready", flush=True)
    workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for w in workers: w.start()
    for w in workers: w.join()
    """
)


def _spawn(path: Path, name: str, threads: int, calls: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), name, str(threads), str(calls)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _check_calls(recording) -> set[str]:
    """Every call's answer belongs to its own prompt (no lines mixed between calls)."""
    prompts = set()
    for call in recording.calls:
        prompt = call.request["context"]["messages"][0]["content"]
        events = list(call.events())
        assert events[-1].type == "done"
        assert events[-1].message.content[0].text.startswith(f"answer to {prompt} ")
        assert prompt not in prompts
        prompts.add(prompt)
    return prompts


def test_threads_share_one_sink(tmp_path):
    path = tmp_path / "rec.jsonl"
    sink = RecordingSink(path)
    errors = []

    def worker(thread: int) -> None:
        def answer(model, context, options):
            return faux_text(f"answer to {context.messages[0].content} " + "word " * 30)

        provider = RecordingProvider(FauxProvider([answer] * 10), sink)

        async def run():
            for number in range(10):
                await collect(provider.stream(MODEL, context_of(f"t/{thread}/{number}")))

        try:
            asyncio.run(run())
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    workers = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    recording = read_recording_file(path)
    assert _check_calls(recording) == {f"t/{t}/{n}" for t in range(6) for n in range(10)}


def test_many_processes_with_threads_record_into_one_file(tmp_path):
    path = tmp_path / "shared" / "rec.jsonl"
    children = [_spawn(path, f"p{p}", 2, 5) for p in range(5)]
    for child in children:
        _, stderr = child.communicate(timeout=120)
        assert child.returncode == 0, stderr.decode()
    recording = read_recording_file(path)
    assert [call.call_index for call in recording.calls] == list(range(50))
    assert _check_calls(recording) == {
        f"p{p}/{t}/{n}" for p in range(5) for t in range(2) for n in range(5)
    }
    headers = [line for line in path.read_bytes().split(b"\n") if b'"header"' in line]
    assert len(headers) == 1


def test_a_writer_that_starts_a_call_while_another_opens_is_seen_live(tmp_path, monkeypatch):
    """A sink opening a file asks, under the file's lock, whether another writer is live: a
    writer that marked the file and began a call just before that lock is taken (here, at the
    moment it is taken) is live, and its open call no crash's leftover."""
    import fcntl

    from openprogram.recordings.file import sink as sink_module
    from openprogram.recordings.file.format import recorded_request_payloads
    from openprogram.recordings.redaction import current_redactor

    path = tmp_path / "rec.jsonl"
    RecordingSink(path).close()  # a file with its header
    payloads = recorded_request_payloads(MODEL, context_of("go"), None, current_redactor())
    started: list[RecordingSink] = []
    real_flock = fcntl.flock
    interposed = []

    def flock_after_another_writer_begins(fd, operation):
        if operation == fcntl.LOCK_EX and not interposed:
            interposed.append(fd)
            other = RecordingSink(path)  # its own descriptor: a writer of its own
            started.append(other)
            other.begin_call(payloads)  # a call it has not ended yet
        return real_flock(fd, operation)

    monkeypatch.setattr(sink_module.fcntl, "flock", flock_after_another_writer_begins)
    opened = RecordingSink(path)  # refused the other writer's open call as a dead one's before
    assert started and opened.begin_call(payloads) == 1
    opened.close()
    started[0].close()


def test_a_forked_child_gets_its_own_file_description(tmp_path):
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    path = tmp_path / "rec.jsonl"
    provider = RecordingProvider(FauxProvider([faux_text("parent")] * 2), path)
    asyncio.run(collect(provider.stream(MODEL, context_of("before"))))
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        status = 1
        try:
            child = RecordingProvider(FauxProvider([faux_text("child")]), provider.sink)
            asyncio.run(collect(child.stream(MODEL, context_of("child"))))
            status = 0
        finally:
            os.write(write_fd, b"x")
            os._exit(status)
    os.read(read_fd, 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    asyncio.run(collect(provider.stream(MODEL, context_of("after"))))
    recording = read_recording_file(path)
    prompts = [call.request["context"]["messages"][0]["content"] for call in recording.calls]
    assert prompts == ["before", "child", "after"]


# ----------------------------------------------------------------------------- kill -9


def _complete_lines(data: bytes) -> tuple[list[dict], bytes]:
    """The complete lines (each must be a JSON object) and the unfinished tail, if any."""
    *lines, tail = data.split(b"\n")
    return [orjson.loads(line) for line in lines], tail


def _check_killed_file(path: Path, threads: int) -> None:
    data = path.read_bytes()
    rows, tail = _complete_lines(data)  # raises if any complete line is corrupt
    assert rows[0]["type"] == "header"
    requests = [row for row in rows if row["type"] == "request"]
    assert [row["call_index"] for row in requests] == list(range(len(requests)))
    events: dict[int, list[int]] = {row["call_index"]: [] for row in requests}
    ended: dict[int, int] = {}
    for row in rows:
        if row["type"] == "event":
            assert row["call_index"] not in ended
            events[row["call_index"]].append(row["event_index"])
        elif row["type"] == "call_end":
            ended[row["call_index"]] = row["event_count"]
    for index, seen in events.items():
        assert seen == list(range(len(seen))), f"lost event line in call {index}"
        if index in ended:
            assert ended[index] == len(seen)
    open_calls = sorted(set(events) - set(ended))
    assert len(open_calls) <= threads, "only calls in flight at the kill may be unfinished"
    try:
        recording = read_recording_file(path)
    except RecordingFileError as error:
        if tail:
            assert error.line_number == len(rows) + 1 and "incomplete" in error.reason
        else:
            assert (
                open_calls and error.call_index == open_calls[0] and "no call_end" in error.reason
            )
            assert error.line_number == 1 + next(
                i for i, r in enumerate(rows) if r.get("call_index") == open_calls[0]
            )
    else:
        assert not tail and not open_calls
        _check_calls(recording)


def test_a_recorder_killed_at_random_moments_loses_only_the_line_in_flight(tmp_path):
    generator = random.Random(20240611)
    for attempt in range(10):
        path = tmp_path / f"killed-{attempt}.jsonl"
        child = _spawn(path, f"k{attempt}", 2, 0)
        try:
            assert child.stdout.readline() == b"ready\n"
            time.sleep(generator.uniform(0.0, 0.08))  # the kill point: a random moment
        finally:
            child.send_signal(signal.SIGKILL)
            child.communicate(timeout=60)
        _check_killed_file(path, threads=2)
