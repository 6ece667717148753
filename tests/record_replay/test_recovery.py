"""Recovering a recording whose writer died: a torn last line is dropped, unfinished calls are
closed as abandoned, every call that had ended replays as recorded, anything else is refused."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import textwrap

import pytest

from openprogram.providers.faux import FauxProvider, faux_text
from openprogram.providers.recording import RecordingFileError, RecordingProvider
from openprogram.providers.replay import RecordedCallInterrupted, read_recording_file
from openprogram.recordings.store.recovery import apply_recovery, plan_recovery
from tests.conftest import PYTHON, REPO_ROOT

from .test_recording_support import MODEL, collect, context_of

ANSWERS = [f"answer number {n} " + "with several words in it " * 8 for n in range(6)]


async def record_reference(path) -> None:
    provider = RecordingProvider(
        FauxProvider([faux_text(text) for text in ANSWERS], timestamp=5), path
    )
    for n in range(len(ANSWERS)):
        await collect(provider.stream(MODEL, context_of(f"question {n}")))
    provider.sink.close()


def ended_calls(recording) -> dict[int, list[dict]]:
    return {
        call.call_index: list(call.event_dumps())
        for call in recording.calls
        if call.outcome == "complete"
    }


async def test_every_cut_of_a_recording_recovers_and_keeps_every_ended_call(tmp_path):
    reference_path = tmp_path / "reference.jsonl"
    await record_reference(reference_path)
    reference = ended_calls(read_recording_file(reference_path))
    data = reference_path.read_bytes()
    header_end = data.index(b"\n") + 1
    rng = random.Random(20261201)
    cuts = sorted(rng.sample(range(header_end + 1, len(data)), 45))
    for cut in cuts:  # a writer killed anywhere: at a line end, or mid-line (a torn line)
        path = tmp_path / f"cut-{cut}.jsonl"
        path.write_bytes(data[:cut])
        os.chmod(path, 0o640)
        plan = plan_recovery(path)
        apply_recovery(plan)
        recovered = read_recording_file(path)
        assert oct(os.stat(path).st_mode & 0o777) == oct(0o640)
        kept = ended_calls(recovered)
        assert kept == {index: reference[index] for index in kept}
        whole_lines = data[: data.rindex(b"\n", 0, cut) + 1]  # a torn call_end ended nothing
        ended_before_cut = whole_lines.count(b'"type":"call_end"')
        assert len(kept) == ended_before_cut
        for call in recovered.calls:
            if call.outcome == "abandoned":
                assert call.event_count == len(list(call.event_dumps()))


def test_a_sound_file_needs_nothing_and_is_left_alone(tmp_path):
    path = tmp_path / "sound.jsonl"
    path.write_text('{"type":"header","format_version":1}\n')
    plan = plan_recovery(path)
    assert not plan.needed and plan.describe() == []
    before = path.read_bytes()
    apply_recovery(plan)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        (
            '{"type":"header","format_version":1}\nnot json\n{"type":"header"}\n',
            2,
            "not valid JSON",
        ),
        ('{"type":"header","format_version":3}\n', 1, "format_version"),
        (
            '{"type":"header","format_version":1}\n{"type":"event","call_index":0,"event_index":0,"event":{}}\n',
            2,
            "no request",
        ),
    ],
)
def test_any_other_defect_is_refused_naming_the_line_and_changes_nothing(
    tmp_path, content, line, reason
):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    before = path.read_bytes()
    with pytest.raises(RecordingFileError, match=reason) as caught:
        plan_recovery(path)
    assert caught.value.line_number == line
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]  # no temporary left


def test_a_symlink_fifo_or_missing_file_is_refused(tmp_path):
    target = tmp_path / "real.jsonl"
    target.write_text('{"type":"header","format_version":1}\n')
    (tmp_path / "link.jsonl").symlink_to(target)
    with pytest.raises(RecordingFileError, match="symbolic link"):
        plan_recovery(tmp_path / "link.jsonl")
    os.mkfifo(tmp_path / "pipe.jsonl")
    with pytest.raises(RecordingFileError, match="not a regular file"):
        plan_recovery(tmp_path / "pipe.jsonl")
    with pytest.raises(RecordingFileError, match="cannot read"):
        plan_recovery(tmp_path / "missing.jsonl")


RECORDER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from openprogram.providers.faux import FauxProvider, faux_text
    from openprogram.providers.recording import RecordingProvider
    from openprogram.providers.types import Context, Model, UserMessage

    kill_at = int(sys.argv[2])
    provider = FauxProvider([faux_text("word " * 40) for _ in range(20)], timestamp=5)
    recorder = RecordingProvider(provider, sys.argv[1])

    async def main():
        seen = 0
        for n in range(20):
            context = Context(messages=[UserMessage(content=f"q{n}", timestamp=1)])
            async for _ in recorder.stream(Model(id="m", api="faux", provider="faux"), context):
                seen += 1
                if seen == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("kill_at", [1, 37, 150, 401, 777])
def test_a_recorder_killed_with_sigkill_recovers(tmp_path, kill_at):
    path = tmp_path / "killed.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run([PYTHON, "-c", RECORDER, str(path), str(kill_at)], env=env, timeout=120)
    assert result.returncode == -signal.SIGKILL
    with pytest.raises(RecordingFileError):
        read_recording_file(path)  # the call in flight has no call_end
    apply_recovery(plan_recovery(path))
    recording = read_recording_file(path)
    per_call = recording.calls[0].event_count if recording.calls[0].outcome == "complete" else None
    complete = [call for call in recording.calls if call.outcome == "complete"]
    if per_call is not None:  # the kill came after the first answer: whole answers before it
        assert len(complete) == kill_at // per_call
    assert recording.calls[-1].outcome == "abandoned"  # the kill points avoid an answer's end
    assert recording.calls[:-1] == complete


async def test_an_abandoned_call_replays_its_events_then_says_it_was_interrupted(tmp_path):
    from openprogram.providers.replay import ReplayProvider

    path = tmp_path / "reference.jsonl"
    await record_reference(path)
    data = path.read_bytes()
    second_request = data.index(b'"type":"request","call_index":1')
    cut = data.index(b"\n", second_request + 2000)  # a few events into call 1
    path.write_bytes(data[: cut + 1])
    apply_recovery(plan_recovery(path))
    replay = ReplayProvider(path)
    await collect(replay.stream(MODEL, context_of("question 0")))
    events = []
    with pytest.raises(RecordedCallInterrupted, match="abandoned"):
        async for event in replay.stream(MODEL, context_of("question 1")):
            events.append(event)
    assert events and events[0].type == "start"
