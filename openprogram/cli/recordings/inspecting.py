"""``list`` and ``show``: what the managed folder or a suite's folder holds, and one recording
call by call (a table, JSON, its redacted lines, its conversation, its prompt-cache prefixes).

The files are read by :mod:`openprogram.recordings.views.inspection` and
:mod:`openprogram.recordings.store.listing`; :mod:`.render` formats for people.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openprogram.recordings.modes.activation import recover_hint

from ..errors import EXIT_FAILURE, EXIT_USAGE, CliError
from ..terminal import terminal_safe
from . import render
from .console import print_json, say, warn_content
from .selecting import check_id_argument, is_active, names_local_file, resolve_for_reading
from .verb import VerbGroup, json_flag, selector_argument

if TYPE_CHECKING:  # imported where used, so that these commands start fast
    from openprogram.recordings.file.reader import Recording

VERBS = VerbGroup()


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "folder",
        metavar="FOLDER",
        nargs="?",
        help="list the recordings below this folder (a test suite's recordings/) instead of the managed ones",
    )
    json_flag(parser)


@VERBS.verb(
    "list", "list the managed recordings, or those below a folder", arguments=_list_arguments
)
def run_list(args: argparse.Namespace) -> int:
    if args.folder is not None:
        return _list_folder(Path(args.folder), args.json)
    from openprogram import config
    from openprogram.recordings.modes.activation import active_recording
    from openprogram.recordings.store.managed import managed_entries, same_file
    from openprogram.recordings.store.store import record_replay_settings, recordings_dir
    from openprogram.recordings.views import inspection

    current = config.load_config()
    mode, selector = record_replay_settings(current)
    active = active_recording(current)
    folder = recordings_dir()
    try:
        entries = managed_entries(folder)
    except OSError as error:
        raise CliError(f"cannot list {folder}: {error.strerror}") from None
    infos = [
        inspection.inspect_recording(
            path, recording_id, managed=recording_id is not None, active=same_file(path, active)
        )
        for path, recording_id in entries
    ]
    if active is not None and not any(info.active for info in infos) and os.path.lexists(active):
        infos.append(inspection.inspect_recording(active, None, managed=False, active=True))
    now = render.now()
    if args.json:
        print_json(inspection.list_json(folder, mode, selector, infos, now))
    elif not infos:
        say(f"no recordings in {folder}")
    else:
        print(render.render_list(infos, now))
    return 0


def _list_folder(folder: Path, as_json: bool) -> int:
    """``list FOLDER``: every recording below it (:mod:`openprogram.recordings.store.listing`)."""
    from openprogram.recordings.store.listing import list_folder

    try:
        rows = list_folder(folder)
    except OSError as error:
        usage = isinstance(error, FileNotFoundError | NotADirectoryError)
        raise CliError(
            f"cannot list {folder}: {error.strerror or error}",
            EXIT_USAGE if usage else EXIT_FAILURE,
        ) from None
    now = render.now()
    if as_json:
        print_json(render.folder_json(folder, rows, now))
    elif not rows:
        say(f"no recordings below {folder}")
    else:
        print(render.render_folder(rows, now))
    return 0


def _show_arguments(parser: argparse.ArgumentParser) -> None:
    selector_argument(parser)
    json_flag(parser)
    parser.add_argument(
        "--content", action="store_true", help="print the redacted JSONL (prompts and outputs!)"
    )
    parser.add_argument(
        "--conversation",
        action="store_true",
        help="render the recorded session as a conversation (prompts and outputs!)",
    )
    parser.add_argument(
        "--cache",
        action="store_true",
        help="how much of each request the prompt cache could reuse: the share of the previous call's request kept "
        "as a prefix, where it breaks, and the cached tokens the vendor reported",
    )


@VERBS.verb("show", "describe a recording call by call (no content)", arguments=_show_arguments)
def run_show(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.redaction import remove_secret_values
    from openprogram.recordings.store.store import is_managed_id, managed_id_of
    from openprogram.recordings.views import inspection

    selector = args.selector
    if is_managed_id(selector) and not names_local_file(selector):
        check_id_argument(selector)
    path = resolve_for_reading(selector)
    try:
        recording = inspection.read_recording(path)
    except RecordingFileError as error:
        raise CliError(f"{error}{recover_hint(error)}") from None
    active = is_active(path, config.load_config())
    if args.conversation:
        from openprogram.recordings.views.conversation import render_conversation

        warn_content()
        print(terminal_safe(render_conversation(recording), multiline=True))
        return 0
    if args.content:
        warn_content()
    info = path.stat()
    report = inspection.ShowReport(
        path=path,
        id=managed_id_of(path),
        active=active,
        size=info.st_size,
        mtime=info.st_mtime,
        header=remove_secret_values(recording.header),
        calls=inspection.summarize_calls(recording.calls),
    )
    now = render.now()
    steps = _cache_steps(recording) if args.cache else None
    if args.json:
        data = report.to_json(now)
        if args.content:
            data["content"] = list(_redacted_rows(path))
        if steps is not None:
            for call, step in zip(data["calls"], steps, strict=True):
                call["cache"] = step.to_json()
        print_json(data)
    elif args.content:
        for row in _redacted_rows(path):
            print_json(row, indent=False)
    else:
        print(render.render_show(report, now))
        if steps is not None:
            print()
            print(render.render_cache(steps))
    return 0


def _cache_steps(recording: Recording) -> list[Any]:
    """``show --cache``: each call's prompt-cache prefix against the call before it in its lane."""
    from openprogram.recordings.insight.cache_prefix import prefix_steps, recording_cache_calls

    return prefix_steps(recording_cache_calls(recording.calls))


def _redacted_rows(path: Path) -> Iterator[Any]:
    """The file's lines, redacted again on the way out: the file was redacted when written,
    but a file copied in from elsewhere may not have been."""
    from openprogram.recordings.file.format import RecordingFileError, iter_rows
    from openprogram.recordings.file.reader import MAX_RECORDING_BYTES
    from openprogram.recordings.redaction import remove_secret_values
    from openprogram.state import FileRefusal, open_regular_file

    try:
        fd = open_regular_file(path, MAX_RECORDING_BYTES)
    except (FileRefusal, OSError) as error:  # replaced since it was read
        raise CliError(f"recording file {path}: {error}") from None
    with os.fdopen(fd, "rb") as handle:
        try:
            for _number, row in iter_rows(path, handle):
                yield remove_secret_values(row)
        except RecordingFileError as error:  # replaced since it was read
            raise CliError(str(error)) from None
