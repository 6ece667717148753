"""``status``, ``record``, ``replay``, ``off``: what the next start records into or replays.

``status`` prints the activation plan, the one the runtime and ``config set`` act on
(:func:`openprogram.recordings.modes.activation.plan_activation`); the others change the
configuration in one locked transaction, and a file created for that change is removed again
if the transaction fails: all or nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from openprogram.recordings.modes.activation import CMD, recover_hint

from ..errors import EXIT_FAILURE, CliError
from . import render
from .console import print_json, say
from .render import NEXT_START
from .selecting import FIX_LIST, check_id_argument, safe_live
from .verb import VerbGroup, json_flag, selector_argument

VERBS = VerbGroup()


@VERBS.verb("status", "show the record/replay setting and whether it works", arguments=json_flag)
def run_status(args: argparse.Namespace) -> int:
    """Print the activation plan: the same one the runtime and ``config set`` act on."""
    from openprogram import state
    from openprogram.recordings.modes.activation import load_activation_plan

    plan = load_activation_plan()
    project = render.project_status()
    if args.json:
        print_json(render.status_json(plan, state.config_path(), project))
    else:
        print(render.render_status(plan, state.config_path(), project))
    return EXIT_FAILURE if plan.blocked or project.problem is not None else 0


def _record_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--name", metavar="NAME", help="recording ID (default: rec-YYYYmmdd-HHMMSS)"
    )


@VERBS.verb(
    "record",
    "create a recording and record into it from the next start",
    arguments=_record_arguments,
    mutating=True,
)
def run_record(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.store.store import (
        checked_recordings_dir,
        ensure_recordings_dir,
        managed_path,
    )

    if args.name is not None:
        check_id_argument(args.name)  # before anything is created
    folder = checked_recordings_dir()
    folder_existed = folder.exists()
    created: Path | None = None
    try:
        with config.config_transaction() as current:
            ensure_recordings_dir()
            recording_id = args.name or _generated_id(folder)
            path = managed_path(recording_id)
            _create_header_only(path, recording_id)
            created = path
            _set_record_replay(current, mode="record", file=recording_id)
    except BaseException:
        if created is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(created)
        if not folder_existed:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    say(f"created recording '{recording_id}' at {path}")
    say(f"record_replay.mode=record, record_replay.file={recording_id}; {NEXT_START}")
    return 0


def _generated_id(folder: Path) -> str:
    base = time.strftime("rec-%Y%m%d-%H%M%S")
    candidate, number = base, 1
    while os.path.lexists(folder / f"{candidate}.jsonl"):
        number += 1
        candidate = f"{base}-{number}"
    return candidate


def _create_header_only(path: Path, recording_id: str) -> None:
    """Create the recording holding only its header (:func:`~openprogram.recordings.store.managed.create_empty_recording`)."""
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.store.managed import create_empty_recording

    try:
        create_empty_recording(path)
    except FileExistsError:
        raise CliError(
            f"recording file {path}: already exists; choose another --name, or delete it first "
            f"with '{CMD} delete {recording_id}'"
        ) from None
    except RecordingFileError as error:
        raise CliError(str(error)) from None


@VERBS.verb(
    "replay",
    "replay a recording from the next start (validated first)",
    arguments=selector_argument,
    mutating=True,
)
def run_replay(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.store.store import absence_of, is_managed_id, resolve_selector

    selector = args.selector
    if is_managed_id(selector):
        check_id_argument(selector)
    else:
        selector = str(Path(selector).expanduser().absolute())  # the next start may run elsewhere
    path = resolve_selector(selector, mode="replay")
    absence = absence_of(path)
    if absence is not None:
        hint = f"; see '{FIX_LIST}'" if is_managed_id(selector) else ""
        raise CliError(f"recording file {path}: {absence[1]}{hint}; nothing was changed")
    from openprogram.recordings.views.inspection import read_recording

    try:
        recording = read_recording(path)
    except RecordingFileError as error:
        raise CliError(f"{error}{recover_hint(error)}; nothing was changed") from None
    if safe_live(path):
        say(
            f"warning: {path} is still being recorded into; the replay uses what it holds now",
            file=sys.stderr,
        )
    with config.config_transaction() as current:
        _set_record_replay(current, mode="replay", file=selector)
    say(f"replaying {path}: {len(recording.calls)} calls, {recording.event_count} events")
    say(f"record_replay.mode=replay, record_replay.file={selector}; {NEXT_START}")
    return 0


@VERBS.verb("off", "turn record/replay off (the last recording stays selected)", mutating=True)
def run_off(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.store.store import record_replay_settings

    with config.config_transaction() as current:
        previous, selector = record_replay_settings(current)
        _set_record_replay(current, mode="off")
    kept = (
        f" (record_replay.file={selector} is kept)"
        if isinstance(selector, str) and selector
        else ""
    )
    was = "was already off" if previous == "off" else f"is now off (was {previous})"
    say(f"record/replay {was}{kept}; {NEXT_START}")
    return 0


def _set_record_replay(current: dict[str, Any], *, mode: str, file: str | None = None) -> None:
    subtree = current.get("record_replay")
    if not isinstance(subtree, dict):
        subtree = {}
    subtree["mode"] = mode
    if file is not None:
        subtree["file"] = file
    current["record_replay"] = subtree
