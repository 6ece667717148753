"""``delete``, ``prune``, ``recover``: removing and repairing recordings.

Each acts only after the library's refusals (:func:`openprogram.recordings.store.managed.deletion_refusal`,
:mod:`openprogram.recordings.store.recovery`) and a confirmation, and repeats the checks under
the configuration lock, or on the file again, just before it changes anything.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import EXIT_USAGE, CliError
from .console import confirm, say
from .selecting import FIX_LIST, check_id_argument, names_local_file, resolve_for_reading
from .verb import VerbGroup, confirm_flag, selector_argument

if TYPE_CHECKING:  # imported where used, so that these commands start fast
    from openprogram.recordings.store.recovery import RecoveryPlan

VERBS = VerbGroup()


# ============================================================================ delete


def _delete_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID")
    confirm_flag(parser)


@VERBS.verb("delete", "delete a managed recording", arguments=_delete_arguments, mutating=True)
def run_delete(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.modes.activation import active_recording
    from openprogram.recordings.store.managed import deletion_refusal

    path = _managed_target(args.id)
    refusal = deletion_refusal(path, active_recording(config.load_config()))
    if refusal:
        raise CliError(f"recording file {path}: {refusal}")
    confirm(
        args.yes,
        args.id,
        f"delete recording '{args.id}' ({path})? type its ID to confirm: ",
        "delete",
    )
    with config.config_transaction() as current:  # the lock: nothing can activate it meanwhile
        refusal = deletion_refusal(path, active_recording(current))
        if refusal:
            raise CliError(f"recording file {path}: {refusal}")
        _unlink(path)
    say(f"deleted recording '{args.id}' ({path})")
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
    check_id_argument(recording_id)
    checked_recordings_dir()
    path = managed_path(recording_id)
    absence = absence_of(path)
    if absence is not None:
        raise CliError(f"recording file {path}: {absence[1]}; see '{FIX_LIST}'")
    return path


# ============================================================================ prune


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of days") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more days")
    return value


def _prune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--older-than-days", type=_non_negative_int, required=True, metavar="N")
    parser.add_argument("--dry-run", action="store_true", help="only show what would be deleted")
    confirm_flag(parser)


@VERBS.verb(
    "prune",
    "delete managed recordings not modified for N days",
    arguments=_prune_arguments,
    mutating=True,
)
def run_prune(args: argparse.Namespace) -> int:
    from openprogram import config
    from openprogram.recordings.modes.activation import active_recording
    from openprogram.recordings.store.managed import deletion_refusal, plan_prune
    from openprogram.recordings.store.store import checked_recordings_dir

    from .render import human_age, now

    folder = checked_recordings_dir()
    try:
        plan = plan_prune(
            folder, now() - args.older_than_days * 86400, active_recording(config.load_config())
        )
    except OSError as error:
        raise CliError(f"cannot list {folder}: {error.strerror}") from None
    for path, why in plan.skipped:
        say(f"skipping {path}: {why}", file=sys.stderr)
    if not plan.old:
        say(
            f"nothing to prune: no deletable recording in {folder} is older than {args.older_than_days} days"
        )
        return 0
    verb_text = "would delete" if args.dry_run else "deleting"
    print(
        f"{verb_text} {len(plan.old)} recording(s) not modified for more than {args.older_than_days} days:"
    )
    for _path, recording_id, mtime in plan.old:
        print(f"  {recording_id}  ({human_age(now() - mtime)} old)")
    if args.dry_run:
        return 0
    count = len(plan.old)
    confirm(
        args.yes, str(count), f"type {count} (the number of recordings) to delete them: ", "prune"
    )
    deleted: list[str] = []
    with config.config_transaction() as current:
        for path, recording_id, _ in plan.old:
            refusal = deletion_refusal(path, active_recording(current))
            if refusal:
                say(f"skipping {path}: {refusal}", file=sys.stderr)
                continue
            try:
                _unlink(path)
            except CliError as error:
                raise CliError(
                    f"{error} (deleted before it: {', '.join(deleted) or 'nothing'})"
                ) from None
            deleted.append(recording_id)
    print(f"deleted {len(deleted)} recording(s)")
    return 0


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError as error:
        raise CliError(f"recording file {path}: cannot delete: {error.strerror}") from None


# ============================================================================ recover


def _recover_arguments(parser: argparse.ArgumentParser) -> None:
    selector_argument(parser)
    parser.add_argument("--dry-run", action="store_true", help="only show what would change")
    confirm_flag(parser)


@VERBS.verb(
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
        say(f"recording file {path}: nothing needs recovering (it is a complete recording)")
        return 0
    say(f"recording file {path}: {'would recover' if args.dry_run else 'recovering'}:")
    for change in plan.describe():
        say(f"  {change}")
    if args.dry_run:
        say("dry run: nothing was changed")
        return 0
    confirm(
        args.yes, "yes", f"rewrite {path}? type yes to confirm: ", "recover", "nothing was changed"
    )
    if _recovery_plan(path).repaired != plan.repaired:  # a writer appeared, or the file changed
        raise CliError(
            f"recording file {path}: changed while recover was asking; nothing was changed, run recover again"
        )
    try:
        apply_recovery(plan)
    except RecordingFileError as error:
        raise CliError(f"{error}; nothing was changed") from None
    say(f"recovered {path}: the strict reader now accepts it")
    return 0


def _recover_target(selector: str) -> Path:
    """The file to repair; a symbolic link is refused (recover the file it points to)."""
    from openprogram.recordings.store.store import is_managed_id

    if is_managed_id(selector) and not names_local_file(selector):
        check_id_argument(selector)
    path = resolve_for_reading(selector)
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
        raise CliError(
            f"recording file {path}: cannot check for a live writer: {error.strerror}"
        ) from None
    if live:
        raise CliError(
            f"recording file {path}: is being recorded into by a running process; stop that "
            "process first, then run recover again; nothing was changed"
        )
    try:
        return plan_recovery(path)
    except RecordingFileError as error:
        raise CliError(f"{error}; nothing was changed") from None
