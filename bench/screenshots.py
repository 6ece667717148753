"""Regenerate the screenshots of ``openprogram recordings view`` shown in the README:
``python -m bench.screenshots`` (needs Debian's ``chromium``).

It records the demo's calculator session (faux/echo model, real calculator tool, no key, no
network), writes its page, replays it with a drifted prompt to get the mismatch the pytest
plugin would get, writes that drift page, and screenshots both in headless Chromium into
``docs/images/``.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"
WINDOW = "1200,860"


def screenshot(page: Path, image: Path, profile: Path) -> None:
    """A PNG of the page as headless Chromium shows it."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium on PATH: apt-get install chromium")
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={WINDOW}",
            f"--screenshot={image}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


async def make_pages(folder: Path) -> tuple[Path, Path]:
    """The page of a recorded calculator session and the drift page of a changed prompt."""
    from openprogram.cli.demo_cmd import DEMO_PROMPT, DRIFTED_PROMPT, run_agent
    from openprogram.recordings.modes.scoped import use_recording
    from openprogram.recordings.replay.differences import ReplayMismatch
    from openprogram.recordings.views import view
    from openprogram.recordings.views.inspection import read_recording

    path = folder / "calculator.jsonl"
    with use_recording(path, "record"):
        await run_agent(DEMO_PROMPT)
    recording = read_recording(path)
    session = folder / "calculator.html"
    view.write_page(view.render_recording_page(recording), session)
    try:
        with use_recording(path, "replay"):
            await run_agent(DRIFTED_PROMPT)
    except ReplayMismatch as mismatch:
        drift = view.drift_page_path(path)
        view.write_page(view.render_drift_page(recording, mismatch), drift)
        return session, drift
    raise SystemExit("the drifted prompt replayed without a mismatch: nothing to show")


def main() -> int:
    IMAGES.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="openprogram-screenshots-"))
    try:
        session, drift = asyncio.run(make_pages(folder))
        for page, name in ((session, "view-session.png"), (drift, "view-drift.png")):
            screenshot(page, IMAGES / name, folder / "profile")
            print(IMAGES / name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
