"""What the ``record_replay`` settings will do at the next start: one answer, in one place.

:func:`plan_activation` turns a configuration dict into an :class:`ActivationPlan`: off,
record into a file, replay a file, or blocked (with a stable problem code, the exact reason
and the commands that fix it). Three places need that answer and all take it from here:

- the provider runtime builds the recording sink or the replay provider from the plan, or
  installs the fail-closed provider when it is blocked;
- ``config set`` (the whole-configuration check) refuses a ``record_replay`` change whose
  plan is blocked;
- ``openprogram recordings status`` prints the plan.

Planning reads files strictly but never creates or writes anything. It is light to import
(the strict reader and the sink, which bring pydantic, are imported only when a file has to
be read). ``docs/recordings-cli.md`` documents the problem codes.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...project import (
    secret_env_problem as secret_env_problem,  # re-exported: config.py checks with it
)
from ...state import ConfigError, load_config
from ..store.store import (
    CMD as CMD,  # re-exported: the commands and the plugin name it from here
)
from ..store.store import (
    FILE_MODES,
    MISSING,
    VALID_MODES,
    SelectorError,
    absence_of,
    is_managed_id,
    managed_id_of,
    record_replay_settings,
    resolve_selector,
)
from ..store.store import (
    FIX_OFF as FIX_OFF,
)
from .vocabulary import BLOCKED, OFF, RECORD, REPLAY, UPDATE, WRITING_MODES

if TYPE_CHECKING:
    from ..file.format import RecordingFileError

FIX_RECORD = f"{CMD} record --name NAME"
FIX_REPLAY = f"{CMD} replay ID"
FIX_LIST_THEN_REPLAY = f"{CMD} list, then {FIX_REPLAY}"

#: The problem code of each :class:`~.format.RecordingFileError` kind.
PROBLEM_OF_KIND = {
    "corrupt": "corrupt_file",
    "interrupted": "interrupted_file",
    "wrong_version": "wrong_version",
    "unreadable": "unreadable_file",
    "missing": "missing_file",
    "symlink": "symlink",
    "not_a_file": "not_a_file",
}


@dataclass(frozen=True)
class ActivationPlan:
    """What the next start does with record/replay.

    ``mode`` is what happens (off, record, replay or blocked); ``configured_mode`` is what
    the configuration says (which may be a mode that does not exist). ``file_usable`` is None
    when no file is used or none was checked, else whether the file works. A blocked plan has
    a stable ``problem`` code, the exact ``reason`` and the ``fixes`` (commands, ``recordings
    off`` always among them). ``calls``/``events`` count a checked replay file.
    """

    mode: str
    configured_mode: str
    selector: Any = None
    path: Path | None = None
    managed_id: str | None = None
    file_usable: bool | None = None
    problem: str | None = None
    reason: str | None = None
    fixes: tuple[str, ...] = ()
    calls: int | None = None
    events: int | None = None
    #: ``record_replay.ignore`` and ``record_replay.normalize``, checked: what a replay
    #: overlooks in requests (see :mod:`.volatile`).
    ignore: tuple[str, ...] = ()
    normalize: tuple[tuple[str, str], ...] = ()
    #: ``record_replay.secret_env``: environment variables whose values are secrets, whatever
    #: they look like (redaction removes them wherever they occur).
    secret_env: tuple[str, ...] = ()
    #: Something about a usable file the user should know (none is set today: a record target
    #: whose writer died mid-call is blocked until it is recovered).
    warning: str | None = None

    @property
    def blocked(self) -> bool:
        return self.mode == BLOCKED

    @property
    def active_path(self) -> Path | None:
        """The recording the next start records into, replays or updates (blocked or not):
        the one file ``delete`` and ``prune`` must not remove and ``list`` marks active. Off
        mode keeps a selector but uses no file."""
        return self.path if self.configured_mode in FILE_MODES else None

    def blocked_by(self, problem: str, reason: str, *fixes: str) -> ActivationPlan:
        """This plan, blocked: ``recordings off`` is always among the fixes (last unless given)."""
        return dataclasses.replace(
            self,
            mode=BLOCKED,
            file_usable=False if self.configured_mode in FILE_MODES else None,
            problem=problem,
            reason=reason,
            fixes=tuple(dict.fromkeys([*fixes, FIX_OFF])),
        )

    def blocked_by_file(self, error: RecordingFileError) -> ActivationPlan:
        """This plan, blocked by what opening or reading its file raised (by the error's
        ``kind``, never by its wording). The runtime uses it for a file that fails when it
        opens it, so it reports exactly what ``recordings status`` would."""
        from ..file.writer_lock import RecordingBusyError

        if isinstance(error, RecordingBusyError):
            return self.blocked_by("busy_file", str(error), f"{CMD} status")
        if error.kind in ("unreadable", "missing"):
            fixes = [f"chmod 600 {self.path}", FIX_RECORD]
        elif error.kind == "interrupted":
            fixes = [recover_command(error), FIX_RECORD]
        else:
            fixes = [FIX_RECORD, FIX_LIST_THEN_REPLAY]
        return self.blocked_by(PROBLEM_OF_KIND.get(error.kind, "corrupt_file"), str(error), *fixes)


def recover_command(error: RecordingFileError) -> str:
    """The command that repairs the file of an ``interrupted`` error (its writer died)."""
    return f"{CMD} recover {shlex.quote(error.path)}"


def recover_hint(error: RecordingFileError) -> str:
    """What to add to the message of a file that cannot be read: how to recover it when its
    writer died (``kind == "interrupted"``), else nothing."""
    if error.kind != "interrupted":
        return ""
    return f"; to keep the calls that ended before the writer died, run '{recover_command(error)}'"


def replay_note(plan: ActivationPlan) -> str:
    """The line that ends every mismatch of the runtime's replay: replay is on for every model
    call of the profile, which a user who ran ``recordings replay`` days ago has forgotten."""
    return (
        f"(replay is on: the record_replay configuration replays '{plan.selector}' for every model "
        f"call; '{CMD} off' calls models live again, '{CMD} status' shows the settings)"
    )


def plan_activation(
    config: dict[str, Any], profile: str | None = None, *, check_file: bool = True
) -> ActivationPlan:
    """The plan for ``config`` (of ``profile``, for managed IDs).

    With ``check_file`` (the default) a replay file is read by the strict reader and an
    existing record target has its header checked by the sink itself. Without it, only the
    settings and the file's existence are checked: for a caller that opens the file right
    away and reports its failure through :meth:`ActivationPlan.blocked_by_file`, so that the
    file is read once, not twice.
    """
    mode, selector = record_replay_settings(config)
    plan = ActivationPlan(mode=mode, configured_mode=mode, selector=selector)
    if mode not in VALID_MODES:
        return plan.blocked_by(
            "unknown_mode",
            f"unknown record_replay.mode '{mode}' (expected one of {', '.join(VALID_MODES)})",
            FIX_OFF,
            FIX_RECORD,
            FIX_REPLAY,
        )
    if mode == OFF:
        return _off_plan(plan, selector, profile)
    if selector is not None and not isinstance(selector, str):
        return plan.blocked_by(
            "invalid_id",
            f"record_replay.file must be a recording ID or a path (a JSON string), not {selector!r}",
            FIX_RECORD,
            FIX_REPLAY,
        )
    if not isinstance(selector, str) or not selector.strip():
        return plan.blocked_by(
            "empty_selector",
            f"record_replay.mode is {mode} but record_replay.file is empty",
            FIX_RECORD,
            FIX_REPLAY,
        )
    if mode in WRITING_MODES and not is_managed_id(selector):
        return plan.blocked_by(
            "path_selector_in_record_mode",
            f"{mode} mode needs a managed recording ID, not a path ('{selector}')",
            FIX_RECORD,
            f"{CMD} replay {selector}",
        )
    try:
        path = resolve_selector(selector, mode=mode, profile=profile)
    except SelectorError as error:
        return plan.blocked_by("invalid_id", str(error), FIX_RECORD, FIX_REPLAY)
    # The file is known from here on, so a plan blocked below still names it (its
    # ``active_path`` keeps ``delete`` away from it).
    plan = dataclasses.replace(plan, path=path, managed_id=managed_id_of(path, profile))
    # Replay's volatile-value settings (unused when off).
    subtree = config.get("record_replay")
    if isinstance(subtree, dict) and ("ignore" in subtree or "normalize" in subtree):
        from ..replay.volatile import RequestFilter

        ignore, normalize = subtree.get("ignore") or [], subtree.get("normalize") or []
        for key, settings in (
            ("ignore", {"ignore": ignore}),
            ("normalize", {"normalize": normalize}),
        ):
            try:
                RequestFilter(**settings)
            except (TypeError, ValueError) as error:
                return plan.blocked_by(
                    "invalid_volatile",
                    f"record_replay.{key}: {error}",
                    f"openprogram config unset record_replay.{key}",
                )
        plan = dataclasses.replace(
            plan, ignore=tuple(ignore), normalize=tuple(tuple(rule) for rule in normalize)
        )
    if isinstance(subtree, dict) and "secret_env" in subtree:
        names = subtree.get("secret_env") or []
        problem = secret_env_problem(names)
        if problem is not None:
            return plan.blocked_by(
                "invalid_secret_env",
                f"record_replay.secret_env: {problem}",
                "openprogram config unset record_replay.secret_env",
            )
        plan = dataclasses.replace(plan, secret_env=tuple(names))
    plan = _with_project_rules(plan)
    if plan.problem is not None:
        return plan
    if mode == RECORD:
        return _check_record_target(plan, check_file)
    absence = absence_of(path) if mode == UPDATE else None
    if absence is not None and absence[0] == MISSING:
        return dataclasses.replace(plan, file_usable=True)  # update records it from scratch
    return _check_replay_file(plan, check_file)


def _with_project_rules(plan: ActivationPlan) -> ActivationPlan:
    """The plan with the project's ``record_replay`` rules (docs/project.md) before the user's:
    the project commits what its recordings need, the user may add to it."""
    from ...project import project_config

    try:
        rules = project_config().record_replay
    except ConfigError as error:
        return plan.blocked_by(
            "invalid_project", str(error), "fix the project file the message names"
        )
    if not rules:
        return plan
    return dataclasses.replace(
        plan,
        ignore=(*rules.get("ignore", ()), *plan.ignore),
        normalize=(*(tuple(rule) for rule in rules.get("normalize", ())), *plan.normalize),
        secret_env=tuple(dict.fromkeys((*rules.get("secret_env", ()), *plan.secret_env))),
    )


def active_recording(config: dict[str, Any], profile: str | None = None) -> Path | None:
    """The recording the configuration makes active (see :attr:`ActivationPlan.active_path`):
    the runtime, ``status``, ``list`` and ``delete`` all take it from here."""
    return plan_activation(config, profile, check_file=False).active_path


def load_activation_plan(profile: str | None = None, *, check_file: bool = True) -> ActivationPlan:
    """The plan for the saved configuration of ``profile`` (the active one by default).

    Raises :class:`~openprogram.state.ConfigError` when the configuration file itself cannot
    be read."""
    return plan_activation(load_config(profile), profile, check_file=check_file)


def _off_plan(plan: ActivationPlan, selector: Any, profile: str | None) -> ActivationPlan:
    """Off keeps the last selector; show which file it names, if it names one."""
    if not isinstance(selector, str) or not selector.strip():
        return plan
    try:
        path = resolve_selector(selector, mode=REPLAY, profile=profile)
    except SelectorError:
        return plan
    return dataclasses.replace(plan, path=path, managed_id=managed_id_of(path, profile))


def _check_replay_file(plan: ActivationPlan, check_file: bool) -> ActivationPlan:
    from ..file.format import RecordingFileError

    assert plan.path is not None
    absence = absence_of(plan.path)
    if absence is not None:
        kind, reason = absence
        return plan.blocked_by(
            "missing_file" if kind == MISSING else "unreadable_file",
            f"recording file {plan.path}: {reason}",
            FIX_LIST_THEN_REPLAY,
            FIX_RECORD,
        )
    if not check_file:
        return plan
    from ..file.reader import read_recording_file

    try:
        recording = read_recording_file(plan.path, summary_only=True)  # counts only
    except RecordingFileError as error:
        return plan.blocked_by_file(error)
    return dataclasses.replace(
        plan, file_usable=True, calls=len(recording.calls), events=recording.event_count
    )


def _check_record_target(plan: ActivationPlan, check_file: bool) -> ActivationPlan:
    """Record mode creates the file at the next start, or appends to it after checking its
    header: ask the sink itself (the one place that knows), but only when the file exists
    and is not empty, so that nothing is created or written here."""
    from ..file.format import RecordingFileError

    assert plan.path is not None
    if not check_file:
        return plan
    try:
        info = os.lstat(plan.path)
    except FileNotFoundError:
        return dataclasses.replace(plan, file_usable=True)
    except OSError as error:
        return plan.blocked_by(
            "unreadable_file",
            f"recording file {plan.path}: cannot inspect: {error.strerror}",
            FIX_RECORD,
        )
    if not (stat.S_ISREG(info.st_mode) and info.st_size == 0):
        from ..file.sink import RecordingSink

        try:
            RecordingSink(plan.path).close()
        except RecordingFileError as error:
            return plan.blocked_by_file(error)
        unended = unended_call_error(plan.path)
        if unended is not None:
            return plan.blocked_by_file(unended)
    return dataclasses.replace(plan, file_usable=True)


def unended_call_error(path: Path) -> RecordingFileError | None:
    """The error that refuses recording into ``path`` when a call in it has no ``call_end``
    and nobody writes it (its writer died mid-call: no replay reads the file, nor the calls
    appended after it), else None. The sink refuses such a call at the file's end when it
    opens it; this reads the whole file (one pass over its bytes), so ``status`` and the
    runtime also refuse a call left open further up."""
    from ..file.format import RecordingFileError
    from ..store.listing import INTERRUPTED, describe

    listed = describe(path, path.name)
    if listed.state != INTERRUPTED:
        return None
    died = (
        listed.reason.split(";")[0] if listed.reason else "a call has no call_end (its writer died)"
    )
    return RecordingFileError(
        path,
        f"{died}: no replay reads the file, nor calls appended after it. Run "
        f"'{CMD} recover {shlex.quote(str(path))}' to close the call (its events are kept), then record again",
        kind="interrupted",
    )
