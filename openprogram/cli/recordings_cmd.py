"""``openprogram recordings VERB``: record and replay model calls, and manage recordings.

Every verb is one handler registered together with its arguments by :func:`verb`
(``openprogram recordings --help`` lists them). The handlers parse and print; what is active,
what may be deleted, what a folder holds and how a file is repaired are the library's
(:mod:`openprogram.recordings.store`). These commands manage files and configuration directly
and never initialise the provider runtime, so they work whatever the configuration holds: they
are how a user recovers from a record/replay setting that blocks every provider call. They also
start fast: at load time this module imports only the standard library and the light state,
store and activation modules, and pydantic (through the strict reader) only when a command has
to read a recording.

Every change is all-or-nothing: configuration changes go through one locked transaction, and a
file created for that change is removed again if the transaction fails.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openprogram.recordings.modes.activation import CMD, recover_hint

from .errors import EXIT_FAILURE, EXIT_USAGE, CliError
from .recordings_render import NEXT_START
from .terminal import terminal_safe

if TYPE_CHECKING:  # imported where used, so that these commands start fast
    from openprogram.recordings.file.reader import Recording
    from openprogram.recordings.store.recovery import RecoveryPlan

FIX_LIST = f"{CMD} list"

Handler = Callable[[argparse.Namespace], int]
Arguments = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Verb:
    """One ``recordings`` verb: its help, its arguments, its handler, and whether it changes
    files or configuration (then a failure says that nothing was changed)."""

    name: str
    help: str
    handler: Handler
    arguments: Arguments
    mutating: bool = False


#: The verbs, in the order ``--help`` lists them.
VERBS: dict[str, Verb] = {}


def verb(name: str, help: str, *, arguments: Arguments | None = None, mutating: bool = False) -> Callable[[Handler], Handler]:
    """Register the decorated handler as the verb ``name``, with its arguments."""

    def register(handler: Handler) -> Handler:
        VERBS[name] = Verb(name, help, handler, arguments or (lambda parser: None), mutating)
        return handler

    return register


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "recordings",
        help="record model calls, replay them offline, and manage recordings",
        description=(
            "Manage record/replay of model calls. Configuration changes take effect at the next "
            "start. Recordings hold prompts and outputs (credentials are redacted)."
        ),
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    for entry in VERBS.values():
        entry.arguments(verbs.add_parser(entry.name, help=entry.help))
    parser.set_defaults(handler=run)


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the stable JSON schema")


def _confirm_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", action="store_true", help="do not ask (needed when stdin is not a terminal)")


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of days") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more days")
    return value


def run(args: argparse.Namespace) -> int:
    from openprogram.config import ConfigError

    entry = VERBS[args.verb]
    try:
        return entry.handler(args)
    except ConfigError as error:
        usage = "invalid profile name" in str(error)
        suffix = "; nothing was changed" if entry.mutating else ""
        raise CliError(f"{error}{suffix}", EXIT_USAGE if usage else EXIT_FAILURE) from None


def _check_id_argument(recording_id: str) -> str:
    """A malformed ID typed on the command line is a usage error (exit 2)."""
    from openprogram.recordings.store.store import SelectorError, check_recording_id

    try:
        return check_recording_id(recording_id)
    except SelectorError as error:
        raise CliError(str(error), EXIT_USAGE) from None


# ============================================================================ status


@verb("status", "show the record/replay setting and whether it works", arguments=_json_flag)
def run_status(args: argparse.Namespace) -> int:
    """Print the activation plan: the same one the runtime and ``config set`` act on."""
    from openprogram import state
    from openprogram.recordings.modes.activation import load_activation_plan

    from . import recordings_render as render

    plan = load_activation_plan()
    project = render.project_status()
    if args.json:
        _print_json(render.status_json(plan, state.config_path(), project))
    else:
        print(render.render_status(plan, state.config_path(), project))
    return EXIT_FAILURE if plan.blocked or project.problem is not None else 0


# ============================================================================ record / replay / off


def _record_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", metavar="NAME", help="recording ID (default: rec-YYYYmmdd-HHMMSS)")


@verb("record", "create a recording and record into it from the next start", arguments=_record_arguments, mutating=True)
def run_record(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.store.store import (
        checked_recordings_dir,
        ensure_recordings_dir,
        managed_path,
    )

    if args.name is not None:
        _check_id_argument(args.name)  # before anything is created
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
    _say(f"created recording '{recording_id}' at {path}")
    _say(f"record_replay.mode=record, record_replay.file={recording_id}; {NEXT_START}")
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


def _selector_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("selector", metavar="ID-or-PATH")


@verb("replay", "replay a recording from the next start (validated first)", arguments=_selector_argument, mutating=True)
def run_replay(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.store.store import absence_of, is_managed_id, resolve_selector

    selector = args.selector
    if is_managed_id(selector):
        _check_id_argument(selector)
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
    if _safe_live(path):
        _say(f"warning: {path} is still being recorded into; the replay uses what it holds now", file=sys.stderr)
    with config.config_transaction() as current:
        _set_record_replay(current, mode="replay", file=selector)
    _say(f"replaying {path}: {len(recording.calls)} calls, {recording.event_count} events")
    _say(f"record_replay.mode=replay, record_replay.file={selector}; {NEXT_START}")
    return 0


@verb("off", "turn record/replay off (the last recording stays selected)", mutating=True)
def run_off(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.store.store import record_replay_settings

    with config.config_transaction() as current:
        previous, selector = record_replay_settings(current)
        _set_record_replay(current, mode="off")
    kept = f" (record_replay.file={selector} is kept)" if isinstance(selector, str) and selector else ""
    was = "was already off" if previous == "off" else f"is now off (was {previous})"
    _say(f"record/replay {was}{kept}; {NEXT_START}")
    return 0


def _set_record_replay(current: dict[str, Any], *, mode: str, file: str | None = None) -> None:
    subtree = current.get("record_replay")
    if not isinstance(subtree, dict):
        subtree = {}
    subtree["mode"] = mode
    if file is not None:
        subtree["file"] = file
    current["record_replay"] = subtree


# ============================================================================ list / show


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "folder",
        metavar="FOLDER",
        nargs="?",
        help="list the recordings below this folder (a test suite's recordings/) instead of the managed ones",
    )
    _json_flag(parser)


@verb("list", "list the managed recordings, or those below a folder", arguments=_list_arguments)
def run_list(args: argparse.Namespace) -> int:
    if args.folder is not None:
        return _list_folder(Path(args.folder), args.json)
    from openprogram import config
    from openprogram.recordings.modes.activation import active_recording
    from openprogram.recordings.store.managed import managed_entries, same_file
    from openprogram.recordings.store.store import record_replay_settings, recordings_dir
    from openprogram.recordings.views import inspection

    from . import recordings_render as render

    current = config.load_config()
    mode, selector = record_replay_settings(current)
    active = active_recording(current)
    folder = recordings_dir()
    try:
        entries = managed_entries(folder)
    except OSError as error:
        raise CliError(f"cannot list {folder}: {error.strerror}") from None
    infos = [
        inspection.inspect_recording(path, recording_id, managed=recording_id is not None, active=same_file(path, active))
        for path, recording_id in entries
    ]
    if active is not None and not any(info.active for info in infos) and os.path.lexists(active):
        infos.append(inspection.inspect_recording(active, None, managed=False, active=True))
    now = render.now()
    if args.json:
        _print_json(inspection.list_json(folder, mode, selector, infos, now))
    elif not infos:
        _say(f"no recordings in {folder}")
    else:
        print(render.render_list(infos, now))
    return 0


def _list_folder(folder: Path, as_json: bool) -> int:
    """``list FOLDER``: every recording below it (:mod:`openprogram.recordings.store.listing`)."""
    from openprogram.recordings.store.listing import list_folder

    from . import recordings_render as render

    try:
        rows = list_folder(folder)
    except OSError as error:
        usage = isinstance(error, FileNotFoundError | NotADirectoryError)
        raise CliError(f"cannot list {folder}: {error.strerror or error}", EXIT_USAGE if usage else EXIT_FAILURE) from None
    now = render.now()
    if as_json:
        _print_json(render.folder_json(folder, rows, now))
    elif not rows:
        _say(f"no recordings below {folder}")
    else:
        print(render.render_folder(rows, now))
    return 0


def _show_arguments(parser: argparse.ArgumentParser) -> None:
    _selector_argument(parser)
    _json_flag(parser)
    parser.add_argument("--content", action="store_true", help="print the redacted JSONL (prompts and outputs!)")
    parser.add_argument(
        "--conversation", action="store_true", help="render the recorded session as a conversation (prompts and outputs!)"
    )
    parser.add_argument(
        "--cache",
        action="store_true",
        help="how much of each request the prompt cache could reuse: the share of the previous call's request kept "
        "as a prefix, where it breaks, and the cached tokens the vendor reported",
    )


@verb("show", "describe a recording call by call (no content)", arguments=_show_arguments)
def run_show(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.redaction import remove_secret_values
    from openprogram.recordings.store.store import is_managed_id, managed_id_of
    from openprogram.recordings.views import inspection

    from . import recordings_render as render

    selector = args.selector
    if is_managed_id(selector) and not _names_local_file(selector):
        _check_id_argument(selector)
    path = _resolve_for_reading(selector)
    try:
        recording = inspection.read_recording(path)
    except RecordingFileError as error:
        raise CliError(f"{error}{recover_hint(error)}") from None
    active = _is_active(path, config.load_config())
    if args.conversation:
        from openprogram.recordings.views.conversation import render_conversation

        _warn_content()
        print(terminal_safe(render_conversation(recording), multiline=True))
        return 0
    if args.content:
        _warn_content()
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
        _print_json(data)
    elif args.content:
        for row in _redacted_rows(path):
            _print_json(row, indent=False)
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


def _warn_content() -> None:
    print(
        "warning: recordings hold prompts, model outputs, tool results and personal data "
        "(credentials are redacted); treat this output as confidential",
        file=sys.stderr,
    )


def _diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="recording ID or path")
    parser.add_argument("b", metavar="B", help="recording ID or path")
    _json_flag(parser)


@verb("diff", "compare two recordings call by call (exit 0 same, 1 different, 2 invalid)", arguments=_diff_arguments)
def run_diff(args: argparse.Namespace) -> int:
    """Exit 0 when the recordings agree (apart from non-deterministic fields), 1 when they
    differ, 2 when either is missing or invalid."""
    from openprogram.config import ConfigError
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.views.comparison import diff_recordings
    from openprogram.recordings.views.inspection import read_recording

    from . import recordings_render as render

    recordings = []
    for selector in (args.a, args.b):
        try:
            recordings.append(read_recording(_resolve_for_reading(selector)))
        except RecordingFileError as error:
            raise CliError(str(error), EXIT_USAGE) from None
        except (CliError, ConfigError) as error:
            raise CliError(str(error), EXIT_USAGE) from None
    result = diff_recordings(*recordings)
    if args.json:
        _print_json(render.diff_json(result))
    else:
        print(render.render_diff(result))
    return 0 if result.identical else 1


@verb(
    "doctor",
    "propose ignore/normalize rules for what two recordings of one run differ in only because it is "
    "volatile (exit 0 nothing else differs, 1 something does, 2 invalid)",
    arguments=_diff_arguments,
)
def run_doctor(args: argparse.Namespace) -> int:
    """Exit 0 when the recordings differ only in volatile values (the rules cover it all), 1
    when something else differs too, 2 when either is missing or invalid."""
    from openprogram.config import ConfigError
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.insight.doctor import diagnose, render_report
    from openprogram.recordings.views.inspection import read_recording

    recordings = []
    for selector in (args.a, args.b):
        try:
            recordings.append(read_recording(_resolve_for_reading(selector)))
        except (RecordingFileError, CliError, ConfigError) as error:
            raise CliError(str(error), EXIT_USAGE) from None
    report = diagnose(recordings[0].calls, recordings[1].calls)
    _warn_content()
    if args.json:
        _print_json({**report.to_json(), "a": str(recordings[0].path), "b": str(recordings[1].path)})
    else:
        print(terminal_safe(render_report(report, recordings[0].path, recordings[1].path), multiline=True))
    return 0 if report.clean else 1


def _names_local_file(selector: str) -> bool:
    """A bare name that is not a valid recording ID but is a file in this folder."""
    from openprogram.recordings.store.store import SelectorError, check_recording_id, is_managed_id

    if not is_managed_id(selector) or not os.path.isfile(selector):
        return False
    try:
        check_recording_id(selector)
    except SelectorError:
        return True
    return False


def _resolve_for_reading(selector: str) -> Path:
    """A managed ID, or a path. A bare name that is not a valid ID but names a file here
    (``before.jsonl``) is read as that file: reading cannot harm anything."""
    from openprogram.recordings.store.store import absence_of, resolve_selector

    if _names_local_file(selector):
        return Path(selector).absolute()
    path = resolve_selector(selector, mode="replay")
    absence = absence_of(path)
    if absence is not None:
        raise CliError(f"recording file {path}: {absence[1]}; {_where_to_look(selector)}")
    return path


def _where_to_look(selector: str) -> str:
    """The hint for a recording that is not there: a test's recording by its path (found below
    this folder), or the two listings."""
    import shlex

    from openprogram.recordings.store.listing import recordings_named
    from openprogram.recordings.store.store import is_managed_id

    if is_managed_id(selector):
        named = recordings_named(selector, Path.cwd())
        if named:
            paths = " or ".join(shlex.quote(os.path.relpath(path)) for path in named)
            return f"a test's recording is named by its path: {paths}"
    return f"see '{FIX_LIST}' (managed recordings) or '{FIX_LIST} FOLDER' (a test suite's recordings/)"


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


# ============================================================================ view


def _view_arguments(parser: argparse.ArgumentParser) -> None:
    _selector_argument(parser)
    parser.add_argument("--against", metavar="ID-or-PATH", help="compare with this recording, call by call")
    parser.add_argument(
        "--output",
        metavar="FILE",
        help="the .html file to write (default: the profile's reports folder, never beside the recording)",
    )


@verb("view", "write the recording as one self-contained HTML page (prompts and outputs!)", arguments=_view_arguments)
def run_view(args: argparse.Namespace) -> int:
    """Write the page (docs/recordings-cli.md, ``view``) and print its path."""
    from openprogram.recordings.store.store import ensure_reports_dir
    from openprogram.recordings.views import view

    output = Path(args.output) if args.output else None
    recording = _read_for_view(args.selector)
    against = _read_for_view(args.against) if args.against is not None else None
    reading = [recording.path] + ([against.path] if against is not None else [])
    if output is None:
        output = view.page_path(recording.path, None if against is None else against.path, ensure_reports_dir())
    try:
        view.check_output(output, reading)
    except view.PageOutputError as error:
        raise CliError(f"{error}; nothing was written", EXIT_USAGE if error.usage else EXIT_FAILURE) from None
    page = view.render_recording_page(recording) if against is None else view.render_comparison_page(recording, against)
    try:
        view.write_page(page, output)
    except OSError as error:
        raise CliError(f"--output {output}: cannot write: {error.strerror or error}; nothing was written") from None
    _warn_content()
    _say(str(output))
    return 0


def _read_for_view(selector: str) -> Recording:
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.store.store import is_managed_id
    from openprogram.recordings.views.inspection import read_recording

    if is_managed_id(selector) and not _names_local_file(selector):
        _check_id_argument(selector)
    try:
        return read_recording(_resolve_for_reading(selector))
    except RecordingFileError as error:
        raise CliError(str(error)) from None


# ============================================================================ delete / prune


def _delete_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID")
    _confirm_flag(parser)


@verb("delete", "delete a managed recording", arguments=_delete_arguments, mutating=True)
def run_delete(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.modes.activation import active_recording
    from openprogram.recordings.store.managed import deletion_refusal

    path = _managed_target(args.id)
    refusal = deletion_refusal(path, active_recording(config.load_config()))
    if refusal:
        raise CliError(f"recording file {path}: {refusal}")
    _confirm(args.yes, args.id, f"delete recording '{args.id}' ({path})? type its ID to confirm: ", "delete")
    with config.config_transaction() as current:  # the lock: nothing can activate it meanwhile
        refusal = deletion_refusal(path, active_recording(current))
        if refusal:
            raise CliError(f"recording file {path}: {refusal}")
        _unlink(path)
    _say(f"deleted recording '{args.id}' ({path})")
    return 0


def _managed_target(recording_id: str) -> Path:
    from openprogram.recordings.store.store import (
        absence_of,
        checked_recordings_dir,
        is_managed_id,
        managed_path,
    )

    if not is_managed_id(recording_id):
        raise CliError(
            f"'{recording_id}' is a path; delete acts only on managed recordings, by ID (see '{FIX_LIST}')",
            EXIT_USAGE,
        )
    _check_id_argument(recording_id)
    checked_recordings_dir()
    path = managed_path(recording_id)
    absence = absence_of(path)
    if absence is not None:
        raise CliError(f"recording file {path}: {absence[1]}; see '{FIX_LIST}'")
    return path


def _prune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--older-than-days", type=_non_negative_int, required=True, metavar="N")
    parser.add_argument("--dry-run", action="store_true", help="only show what would be deleted")
    _confirm_flag(parser)


@verb("prune", "delete managed recordings not modified for N days", arguments=_prune_arguments, mutating=True)
def run_prune(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.modes.activation import active_recording
    from openprogram.recordings.store.managed import deletion_refusal, plan_prune
    from openprogram.recordings.store.store import checked_recordings_dir

    from .recordings_render import human_age, now

    folder = checked_recordings_dir()
    try:
        plan = plan_prune(folder, now() - args.older_than_days * 86400, active_recording(config.load_config()))
    except OSError as error:
        raise CliError(f"cannot list {folder}: {error.strerror}") from None
    for path, why in plan.skipped:
        _say(f"skipping {path}: {why}", file=sys.stderr)
    if not plan.old:
        _say(f"nothing to prune: no deletable recording in {folder} is older than {args.older_than_days} days")
        return 0
    verb_text = "would delete" if args.dry_run else "deleting"
    print(f"{verb_text} {len(plan.old)} recording(s) not modified for more than {args.older_than_days} days:")
    for _path, recording_id, mtime in plan.old:
        print(f"  {recording_id}  ({human_age(now() - mtime)} old)")
    if args.dry_run:
        return 0
    count = len(plan.old)
    _confirm(args.yes, str(count), f"type {count} (the number of recordings) to delete them: ", "prune")
    deleted: list[str] = []
    with config.config_transaction() as current:
        for path, recording_id, _ in plan.old:
            refusal = deletion_refusal(path, active_recording(current))
            if refusal:
                _say(f"skipping {path}: {refusal}", file=sys.stderr)
                continue
            try:
                _unlink(path)
            except CliError as error:
                raise CliError(f"{error} (deleted before it: {', '.join(deleted) or 'nothing'})") from None
            deleted.append(recording_id)
    print(f"deleted {len(deleted)} recording(s)")
    return 0


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError as error:
        raise CliError(f"recording file {path}: cannot delete: {error.strerror}") from None


def _confirm(
    assume_yes: bool, expected: str, prompt: str, action: str, unchanged: str = "nothing was deleted"
) -> None:
    """Ask on a terminal; never guess on a pipe (exit 2 without --yes)."""
    if assume_yes:
        return
    stdin = sys.stdin
    if stdin is None or not stdin.isatty():
        raise CliError(
            f"refusing to {action} without confirmation: stdin is not a terminal; add --yes",
            EXIT_USAGE,
        )
    print(prompt, end="", file=sys.stderr, flush=True)
    answer = stdin.readline()
    if answer.strip() != expected:
        raise CliError(f"not confirmed (expected '{expected}'); {unchanged}", EXIT_USAGE)


# ============================================================================ recover


def _recover_arguments(parser: argparse.ArgumentParser) -> None:
    _selector_argument(parser)
    parser.add_argument("--dry-run", action="store_true", help="only show what would change")
    _confirm_flag(parser)


@verb(
    "recover",
    "repair a recording whose writer died (torn last line, calls without a call_end)",
    arguments=_recover_arguments,
    mutating=True,
)
def run_recover(args: argparse.Namespace) -> int:
    """Repair a recording whose writer died (see :mod:`openprogram.recordings.store.recovery`):
    show the repair, then apply it only when confirmed; anything else is refused unchanged."""
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.store.recovery import apply_recovery

    path = _recover_target(args.selector)
    plan = _recovery_plan(path)
    if not plan.needed:
        _say(f"recording file {path}: nothing needs recovering (it is a complete recording)")
        return 0
    _say(f"recording file {path}: {'would recover' if args.dry_run else 'recovering'}:")
    for change in plan.describe():
        _say(f"  {change}")
    if args.dry_run:
        _say("dry run: nothing was changed")
        return 0
    _confirm(args.yes, "yes", f"rewrite {path}? type yes to confirm: ", "recover", "nothing was changed")
    if _recovery_plan(path).repaired != plan.repaired:  # a writer appeared, or the file changed
        raise CliError(f"recording file {path}: changed while recover was asking; nothing was changed, run recover again")
    try:
        apply_recovery(plan)
    except RecordingFileError as error:
        raise CliError(f"{error}; nothing was changed") from None
    _say(f"recovered {path}: the strict reader now accepts it")
    return 0


def _recover_target(selector: str) -> Path:
    """The file to repair; a symbolic link is refused (recover the file it points to)."""
    from openprogram.recordings.store.store import is_managed_id

    if is_managed_id(selector) and not _names_local_file(selector):
        _check_id_argument(selector)
    path = _resolve_for_reading(selector)
    if path.is_symlink():
        raise CliError(
            f"recording file {path}: is a symbolic link; recover the file it points to "
            f"({os.path.realpath(path)}); nothing was changed"
        )
    return path


def _recovery_plan(path: Path) -> RecoveryPlan:
    """The repair of ``path``, refusing a file a live process is recording into (its calls
    are unfinished, not abandoned) and every defect recovery does not repair."""
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.file.writer_lock import is_being_recorded
    from openprogram.recordings.store.recovery import plan_recovery

    try:
        live = is_being_recorded(path)
    except OSError as error:
        raise CliError(f"recording file {path}: cannot check for a live writer: {error.strerror}") from None
    if live:
        raise CliError(
            f"recording file {path}: is being recorded into by a running process; stop that "
            "process first, then run recover again; nothing was changed"
        )
    try:
        return plan_recovery(path)
    except RecordingFileError as error:
        raise CliError(f"{error}; nothing was changed") from None


# ============================================================================ shared


def _is_active(path: Path, current: dict[str, Any]) -> bool:
    """Whether ``path`` is the recording the configuration makes active (the one rule:
    :func:`openprogram.recordings.modes.activation.active_recording`)."""
    from openprogram.recordings.modes.activation import active_recording
    from openprogram.recordings.store.managed import same_file

    return same_file(path, active_recording(current))


def _safe_live(path: Path) -> bool:
    from openprogram.recordings.file.writer_lock import is_being_recorded

    try:
        return is_being_recorded(path)
    except OSError:
        return False


def _say(text: str, file: Any = None) -> None:
    """Print a line that may hold a file name or text from a recording, escaped for the
    terminal (see :mod:`.terminal`)."""
    print(terminal_safe(text), file=file or sys.stdout)


def _print_json(data: Any, indent: bool = True) -> None:
    import orjson

    option = orjson.OPT_INDENT_2 if indent else 0
    sys.stdout.write(orjson.dumps(data, option=option).decode() + "\n")


