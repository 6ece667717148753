"""``openprogram demo``: record an agent session, replay it offline, show a drift report, and
end with the page of the recording (``openprogram recordings view``), which is kept.

Everything runs on the built-in ``faux/echo`` model and the real calculator tool, so it needs
no key and no network; during the replay step sockets are disabled to prove it.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

DEMO_PROMPT = "/calculator 6*7"
DRIFTED_PROMPT = "/calculator 6*8"
PAGE_NAME = "demo.html"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="record an agent session, replay it offline, and show a drift report (no key needed)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the demo recording and print where it is"
    )
    parser.set_defaults(handler=run)


@contextlib.contextmanager
def network_disabled() -> Iterator[None]:
    """Make any attempt to open a connection fail loudly for the duration of the block."""
    import socket

    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise OSError("network disabled during the replay step of the demo")

    saved = socket.socket.connect, socket.create_connection
    socket.socket.connect, socket.create_connection = refuse, refuse  # type: ignore[method-assign]  # patched on purpose, restored below
    try:
        yield
    finally:
        socket.socket.connect, socket.create_connection = saved  # type: ignore[method-assign]  # the originals back


async def run_agent(prompt: str, indent: str = "    ") -> str:
    """One agent run on faux/echo with the calculator; returns what was printed."""
    from openprogram.agent import AgentContext, AgentLoopConfig, agent_loop
    from openprogram.providers.models import get_model
    from openprogram.providers.types import UserMessage
    from openprogram.tools import builtin_tools

    from .run_render import TextRenderer

    renderer = TextRenderer(indent=indent)
    context = AgentContext(
        system_prompt="You are a careful calculator.", tools=builtin_tools(["calculator"])
    )
    config = AgentLoopConfig(model=get_model("faux/echo", include_configured=False))
    async for event in agent_loop([UserMessage(content=prompt)], context, config):
        renderer.handle(event)
    return renderer.text


def run(args: argparse.Namespace) -> int:
    # Imported here: every command module is loaded to build the parser, and
    # ``openprogram recordings`` must start fast.
    import asyncio
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="openprogram-demo-"))
    try:
        return asyncio.run(_demo(folder / "demo.jsonl", keep=args.keep))
    finally:
        if not args.keep:  # the page stays: it is what the demo ends by pointing at
            for entry in folder.iterdir():
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                elif entry.name != PAGE_NAME:
                    entry.unlink(missing_ok=True)


def write_demo_page(path: Path) -> Path:
    """The page of the demo recording (``openprogram recordings view``), beside it."""
    from openprogram.recordings.views import view
    from openprogram.recordings.views.inspection import read_recording

    page = path.with_name(PAGE_NAME)
    view.write_page(view.render_recording_page(read_recording(path)), page)
    return page


async def _demo(path: Path, *, keep: bool) -> int:
    from openprogram.recordings.file.reader import read_recording_file
    from openprogram.recordings.modes.scoped import use_recording
    from openprogram.recordings.replay.differences import ReplayMismatch

    print(f"1. Record: an agent with a calculator tool answers {DEMO_PROMPT!r} (faux/echo model)")
    with use_recording(path, "record"):
        recorded = await run_agent(DEMO_PROMPT)
    recording = read_recording_file(path)
    print(
        f"   recorded {len(recording.calls)} model calls, {recording.event_count} streamed events, "
        f"{path.stat().st_size} bytes (secrets redacted, file mode 0600)"
    )

    print("\n2. Replay the same run offline (sockets disabled, no provider called):")
    with network_disabled(), use_recording(path, "replay") as scope:
        replayed = await run_agent(DEMO_PROMPT)
        scope.assert_consumed()
    print(f"   same output as the recorded run: {'yes' if replayed == recorded else 'NO'}")

    print(f"\n3. Change the prompt to {DRIFTED_PROMPT!r} and replay again:")
    try:
        with network_disabled(), use_recording(path, "replay"):
            await run_agent(DRIFTED_PROMPT)
        print("   (no mismatch was reported: unexpected)")
        drift_reported = False
    except ReplayMismatch as mismatch:
        print("   the replay stops at the first field that differs:")
        for line in str(mismatch).splitlines():
            print(f"     {line}")
        drift_reported = True

    if keep:
        print(f"\nThe demo recording is kept at {path}")
    page = write_demo_page(path)
    print(f"\n4. The recorded session as a page (open it in a browser): {page}")
    print(
        "\nDo the same with your own agent and a real model:\n"
        "  openprogram recordings record --name my-session\n"
        '  OPENAI_API_KEY=... openprogram run --model openai/gpt-4o-mini "What is 6*7? Use the calculator."\n'
        "  openprogram recordings replay my-session   # the same run command now replays offline\n"
        "In pytest: mark a test with @pytest.mark.llm_recording and run it once with "
        "--llm-record-mode=record (see docs/tutorial.md)."
    )
    return 0 if replayed == recorded and drift_reported else 1
