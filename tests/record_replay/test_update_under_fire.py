"""``update`` killed at any point, and many writers on one file at once.

- 50 update runs of a 10-call recording, some drifting and some not, each ended by SIGKILL or
  SIGINT after a random number of calls (or not at all): after every run the file is byte for
  byte the old one, or (a run that got to end normally and drifted) a valid recording of exactly
  the run's calls; the strict reader accepts it every time, so ``recover`` is never needed.
- 4 processes of 3 threads each, recording and updating one file at once: every writer either
  finishes with all its calls in the file or is refused with a message naming the file's holder;
  nothing else goes wrong, and no call that was kept is lost.

The runs are forked from the test (same code, no interpreter start per run); the seeds are fixed.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading

import pytest

from openprogram.providers import api_registry
from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.replay import read_recording_file
from openprogram.providers.scoped import use_recording
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

MODEL = Model(id="counted", api="update-fire", provider="faux")

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="forks its runs")


@pytest.fixture
def live(fresh_registry) -> FauxProvider:
    def answer(model, context, options):
        return faux_text(f"live: {context.messages[-1].content}")

    provider = FauxProvider([answer] * 100_000)
    api_registry.register_api_provider("update-fire", provider)
    return provider


async def ask(prompt: str) -> str:
    message = await complete(MODEL, Context(messages=[UserMessage(content=prompt, timestamp=0)]))
    return message.content[0].text


def requests_in(path) -> list[str]:
    return [call.context["messages"][0]["content"] for call in read_recording_file(path).calls]


def forked(body) -> tuple[int, int]:
    """Run ``body(write_fd)`` in a child process; return (pid, read end of its pipe)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            # SIGINT raises KeyboardInterrupt, as in a terminal, even when the suite was
            # started with SIGINT ignored (in the background, under nohup).
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.close(read_fd)
            body(write_fd)
        except BaseException:  # noqa: BLE001 - a signal's KeyboardInterrupt, or a failure
            code = 3
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def read_exactly(fd: int, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = os.read(fd, count - len(data))
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.slow
def test_fifty_update_runs_killed_at_random_points_never_lose_a_call(tmp_path, live):
    path = tmp_path / "ten.jsonl"
    prompts = [f"step {index}" for index in range(10)]
    with use_recording(path, "record"):
        asyncio.run(_ask_all(prompts, None))
    chance = random.Random(24)
    outcomes = {"unchanged": 0, "updated": 0}
    for run in range(50):
        before = path.read_bytes()
        current = requests_in(path)
        drift = chance.choice([None, *range(10)])
        wanted = list(current)
        if drift is not None:
            wanted[drift] = f"changed {run} at {drift}"
        stop_after = chance.randint(0, 11)  # 11: let it finish
        how = chance.choice([signal.SIGKILL, signal.SIGINT])

        def body(write_fd: int, wanted: list[str] = wanted) -> None:
            with use_recording(path, "update"):
                asyncio.run(_ask_all(wanted, write_fd))
            os.write(write_fd, b"E")

        pid, read_fd = forked(body)
        try:
            read_exactly(read_fd, min(stop_after, 10))
            if stop_after <= 10:
                os.kill(pid, how)
            read_exactly(read_fd, 11)  # until the child is gone
        finally:
            os.close(read_fd)
            os.waitpid(pid, 0)
        after = path.read_bytes()
        requests = requests_in(path)  # the strict reader accepts the file: no recover needed
        if after == before:
            outcomes["unchanged"] += 1
            continue
        assert drift is not None, f"run {run}: a run that did not drift changed the file"
        assert requests == wanted, f"run {run}: the file holds {requests}, not the run's calls"
        outcomes["updated"] += 1
    assert outcomes["updated"] >= 3 and outcomes["unchanged"] >= 10, outcomes


async def _ask_all(prompts: list[str], progress: int | None) -> None:
    for prompt in prompts:
        await ask(prompt)
        if progress is not None:
            os.write(progress, b".")


def test_four_processes_of_three_threads_recording_and_updating_one_file(tmp_path, live):
    from openprogram.recordings.file.writer_lock import RecordingBusyError

    path = tmp_path / "shared.jsonl"
    for seed in ("first session", "second session"):  # a recording of several sessions
        with use_recording(path, "record"):
            asyncio.run(ask(seed))
    go_read, go_write = os.pipe()

    def body(write_fd: int, child: int) -> None:
        os.close(go_write)
        read_exactly(go_read, 1)
        results: list[str] = []
        lock = threading.Lock()

        def writer(thread: int) -> None:
            mine = [f"c{child} t{thread} call {number}" for number in range(2)]
            mode = "update" if (child + thread) % 3 == 0 else "record"
            try:
                with use_recording(path, mode):
                    asyncio.run(_ask_all(mine if mode == "record" else mine[:1], None))
                outcome = f"kept {mode} " + "|".join(mine if mode == "record" else mine[:1])
            except RecordingBusyError as error:
                outcome = "busy " + " ".join(str(error).split())
            except BaseException as error:  # noqa: BLE001 - reported to the test
                outcome = f"error {type(error).__name__}: {error}"
            with lock:
                results.append(outcome)

        threads = [threading.Thread(target=writer, args=(number,)) for number in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        os.write(write_fd, ("\n".join(results) + "\n").encode())

    children = [forked(lambda fd, child=child: body(fd, child)) for child in range(4)]
    os.close(go_read)
    os.write(go_write, b"gggg")
    os.close(go_write)
    lines: list[str] = []
    for pid, read_fd in children:
        output = b""
        while chunk := os.read(read_fd, 65536):
            output += chunk
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        lines.extend(output.decode().splitlines())
    assert len(lines) == 12
    errors = [line for line in lines if line.startswith("error")]
    assert errors == []
    busy = [line for line in lines if line.startswith("busy")]
    named = (
        "is being updated by process",
        "is being recorded into by process",
        "is being updated by this process",
        "is being recorded into by this process",
        "was replaced (by an update)",
    )
    assert all(any(words in line for words in named) for line in busy), busy
    final = set(requests_in(path))
    kept = [
        prompt
        for line in lines
        if line.startswith("kept")
        for prompt in line.split(" ", 2)[2].split("|")
    ]
    kept_updates = [line for line in lines if line.startswith("kept update")]
    assert kept, lines
    missing = [prompt for prompt in kept if prompt not in final]
    assert missing == [], (missing, lines)
    assert {"first session", "second session"} <= final or kept_updates == []


def test_update_files_of_killed_runs_are_removed_when_the_next_run_starts(tmp_path, live):
    path = tmp_path / "agent.jsonl"
    with use_recording(path, "record"):
        asyncio.run(_ask_all(["one", "two"], None))
    before = path.read_bytes()
    never_read, never_written = os.pipe()  # the killed runs wait on it after their live call

    def body(write_fd: int) -> None:
        with use_recording(path, "update"):
            asyncio.run(_ask_all(["changed"], write_fd))  # drifts: its update file exists now
            os.read(never_read, 1)

    for _kill in range(3):
        pid, read_fd = forked(body)
        try:
            assert read_exactly(read_fd, 1) == b"."
            os.kill(pid, signal.SIGKILL)
        finally:
            os.close(read_fd)
            os.waitpid(pid, 0)
    os.close(never_read)
    os.close(never_written)
    # Each run removed the file the run killed before it left: they do not pile up.
    (hidden,) = tmp_path.glob(".agent.jsonl.*.update")
    assert hidden.name.startswith(f".agent.jsonl.{pid}-") and path.read_bytes() == before
    starting = (
        tmp_path / f".agent.jsonl.{os.getpid()}-starting.update"
    )  # a live process, no mark yet
    starting.write_text("")

    with use_recording(path, "update") as scope:  # nothing drifts: the file is not even written
        asyncio.run(_ask_all(["one", "two"], None))
    assert scope.update.report.message.endswith(
        "left unchanged: nothing drifted (2 calls replayed)"
    )
    assert sorted(tmp_path.glob(".agent.jsonl.*.update")) == [starting]
    assert path.read_bytes() == before
