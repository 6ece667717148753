"""How long a 1,000-call page of ``openprogram recordings view`` takes to build and to open.

The recording is written by the real recorder (faux provider): 100 conversations of 10 calls
each, every call a tool call with arguments or an answer with thinking and text, so the page
holds about 2,000 messages. Opening is measured in headless Chromium (``--dump-dom``, which
returns once the page has loaded and its script has run) against a 2-call page opened in the
same run: the difference is what the 1,000 calls cost the browser, without Chromium's own
start-up. Target: under 2 s. Skipped (reported, not failed) when no chromium is installed.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import Row

CONVERSATIONS, TURNS = 100, 10
TARGET_SECONDS = 2.0


def write_recording(path: Path, conversations: int, turns: int) -> None:
    from openprogram.providers import types
    from openprogram.providers.faux import FauxProvider, faux_thinking, faux_tool_call
    from openprogram.providers.recording import RecordingProvider

    faux = FauxProvider(timestamp=0)
    provider = RecordingProvider(faux, path)
    model = types.Model(id="echo", api="faux", provider="faux")

    async def go() -> None:
        for number in range(conversations):
            messages: list = [
                types.UserMessage(
                    content=f"Question {number}: add the numbers up. " * 5, timestamp=0
                )
            ]
            for turn in range(turns):
                if turn < turns - 1:
                    faux.queue(
                        faux_tool_call(
                            "calculator", {"expression": f"{turn}+{number}"}, id=f"c{turn}"
                        )
                    )
                else:
                    faux.queue(
                        faux_thinking("Adding them all. " * 20, f"The sum is {number}. " * 10)
                    )
                answer = None
                async for event in provider.stream_simple(
                    model, types.Context(messages=list(messages))
                ):
                    answer = getattr(event, "message", answer)
                messages.append(answer)
                result = types.TextContent(text=str(turn + number))
                messages.append(
                    types.ToolResultMessage(
                        tool_call_id=f"c{turn}",
                        tool_name="calculator",
                        content=[result],
                        timestamp=0,
                    )
                )

    asyncio.run(go())
    provider.sink.close()


def open_seconds(chromium: str, page: Path, profile: Path, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                f"--user-data-dir={profile}",
                "--dump-dom",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        best = min(best, time.perf_counter() - start)
    return best


def run() -> list[Row]:
    from openprogram.recordings.views import view
    from openprogram.recordings.views.inspection import read_recording

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        write_recording(root / "big.jsonl", CONVERSATIONS, TURNS)
        write_recording(root / "small.jsonl", 1, 2)
        start = time.perf_counter()
        big_page = view.render_recording_page(read_recording(root / "big.jsonl"))
        build = time.perf_counter() - start
        view.write_page(big_page, root / "big.html")
        view.write_page(
            view.render_recording_page(read_recording(root / "small.jsonl")), root / "small.html"
        )
        detail = f"page of {CONVERSATIONS * TURNS} calls: {len(big_page) / 1e6:.1f} MB, built in {build:.2f} s"
        if chromium is None:
            return [
                Row(
                    "view: open a 1,000-call page",
                    "skipped: no chromium",
                    f"< {TARGET_SECONDS:g} s",
                    True,
                    detail,
                )
            ]
        small = open_seconds(chromium, root / "small.html", root / "profile")
        big = open_seconds(chromium, root / "big.html", root / "profile")
        extra = big - small
        return [
            Row(
                "view: open a 1,000-call page",
                f"{extra:.2f} s more than a 2-call page ({big:.2f} s vs {small:.2f} s)",
                f"< {TARGET_SECONDS:g} s",
                extra < TARGET_SECONDS,
                detail,
            )
        ]
