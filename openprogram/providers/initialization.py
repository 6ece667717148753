"""The provider runtime lifecycle: NEW -> INITIALIZING -> READY or FAILED, once per process.

``initialize_provider_runtime()`` runs before the first real provider lookup. It registers the
built-in providers (all at once or none), takes the activation plan of the ``record_replay``
configuration (:mod:`openprogram.recordings.modes.activation`, the one reader of those settings),
builds the recording sink or the replay provider, and installs the registry transform. Two
kinds of failure are kept apart on purpose:

- Built-in registration failing is a broken installation: the runtime stays FAILED and every
  caller, now and later, gets a fresh :class:`ProviderRuntimeInitializationError` with the same
  stage, cause type and redacted cause message.
- Record/replay activation failing is a configuration problem the user can fix: the runtime
  becomes READY in mode ``blocked``, and every provider call raises the same diagnosis naming
  the cause and the two commands that recover (the ``recordings`` commands never initialise
  the runtime, so they keep working).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from ..recordings.modes.activation import ActivationPlan
    from .api_registry import ApiProvider
    from .types import Context, Model, SimpleStreamOptions, StreamOptions

logger = logging.getLogger("openprogram.providers")

NEW, INITIALIZING, READY, FAILED = "NEW", "INITIALIZING", "READY", "FAILED"
RECOVERY_HINT = (
    "run 'openprogram recordings status' to see what is wrong, or "
    "'openprogram recordings off' to turn record/replay off (takes effect at the next start)"
)


class ProviderRuntimeInitializationError(RuntimeError):
    """The provider runtime could not be initialised. Carries no reference to the original
    exception (a fresh instance for every caller), only its redacted description."""

    def __init__(self, stage: str, cause_type: str, cause_message: str) -> None:
        self.stage = stage
        self.cause_type = cause_type
        self.cause_message = cause_message
        super().__init__(
            f"provider runtime initialization failed during {stage}: {cause_type}: {cause_message}"
        )


class ProviderBlockedError(RuntimeError):
    """Raised by every provider call while record/replay activation has failed."""

    def __init__(self, diagnosis: str) -> None:
        self.diagnosis = diagnosis
        super().__init__(diagnosis)


class BlockedProvider:
    """Fails closed: no credentials, no network, the same diagnosis on every call."""

    requires_credentials = False

    def __init__(self, diagnosis: str) -> None:
        self.diagnosis = diagnosis

    def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> NoReturn:
        raise ProviderBlockedError(self.diagnosis)

    def stream_simple(
        self, model: Model, context: Context, options: SimpleStreamOptions | None = None
    ) -> NoReturn:
        raise ProviderBlockedError(self.diagnosis)


@dataclass(frozen=True)
class RuntimeSnapshot:
    """What the runtime activated: ``mode`` is off, record, replay or blocked."""

    mode: str
    selector: str | None = None
    path: str | None = None
    diagnosis: str | None = None
    #: The :class:`~openprogram.recordings.modes.activation.ActivationPlan` it came from (None when
    #: the configuration could not even be read).
    plan: ActivationPlan | None = field(default=None, compare=False)


_condition = threading.Condition()
_state = NEW
_snapshot: RuntimeSnapshot | None = None
_failure: tuple[str, str, str] | None = None


def runtime_state() -> str:
    return _state


def initialize_provider_runtime() -> RuntimeSnapshot:
    """Initialise once; concurrent first callers wait for, and share, the same outcome."""
    global _state
    if _snapshot is not None:
        return _snapshot
    with _condition:
        while _state == INITIALIZING:
            _condition.wait()
        if _state == READY and _snapshot is not None:
            return _snapshot
        if _state == FAILED:
            raise _failure_error()
        _state = INITIALIZING
    return _run_initialization()


def _failure_error() -> ProviderRuntimeInitializationError:
    assert _failure is not None
    return ProviderRuntimeInitializationError(*_failure)


def _run_initialization() -> RuntimeSnapshot:
    global _state, _snapshot, _failure
    failed = False
    try:
        _register_builtins()
    except BaseException as error:  # KeyboardInterrupt too: others must not wait forever
        with _condition:
            _failure = (
                "built-in provider registration",
                type(error).__name__,
                _redacted(str(error)),
            )
            _state = FAILED
            _condition.notify_all()
        if not isinstance(error, Exception):
            raise
        failed = True
    if failed:
        # Raised outside the handler so the error keeps no reference to the original.
        raise _failure_error()
    try:
        snapshot = _activate_record_replay()
    except BaseException as error:
        snapshot = _block(error)
        if not isinstance(error, Exception):
            with _condition:
                _snapshot, _state = snapshot, READY
                _condition.notify_all()
            raise
    with _condition:
        _snapshot, _state = snapshot, READY
        _condition.notify_all()
    return snapshot


def _register_builtins() -> None:
    from .register import register_builtins

    register_builtins()


def _activate_record_replay() -> RuntimeSnapshot:
    """Read the configuration once, as the activation plan, and install what it asks for.

    The plan checks the settings and that the file exists; the file itself is read once, by
    the sink or the replay provider built here, and a failure there blocks with the plan's
    own mapping, so the diagnosis is the one ``recordings status`` prints."""
    from ..recordings.file.format import RecordingFileError
    from ..recordings.modes.activation import load_activation_plan
    from ..recordings.modes.vocabulary import FILE_MODES

    plan = load_activation_plan(check_file=False)
    if plan.mode in FILE_MODES:
        try:
            _install_for(plan)
        except RecordingFileError as error:
            plan = plan.blocked_by_file(error)
    if plan.blocked:
        return _block_plan(plan)
    return RuntimeSnapshot(
        mode=plan.mode,
        selector=plan.selector,
        path=None if plan.path is None else str(plan.path),
        plan=plan,
    )


def _install_for(plan: ActivationPlan) -> None:
    """Build the route of ``plan`` (the recording sink, the replay provider or the update
    session: :func:`~openprogram.recordings.modes.routes.route_for`) and install it as the
    process-wide transform."""
    from ..recordings.modes.activation import replay_note, unended_call_error
    from ..recordings.modes.routes import ReplayRules, route_for
    from ..recordings.modes.vocabulary import RECORD, REPLAY, UPDATE
    from ..recordings.redaction import declare_secret_env
    from .api_registry import configure_provider_transform

    declare_secret_env(plan.secret_env)
    path = plan.path
    assert path is not None  # a record, replay or update plan that is not blocked names its file
    if plan.mode == RECORD:
        unended = unended_call_error(path)  # a writer died mid-call: recover it first
        if unended is not None:
            raise unended
    note = replay_note(plan) if plan.mode == REPLAY else None
    # Update claims the file at once: a file another process records into or updates blocks
    # this one with a diagnosis naming that process.
    route = route_for(
        plan.mode, path, ReplayRules(ignore=plan.ignore, normalize=plan.normalize, note=note)
    )

    def transform(api: str, original: ApiProvider) -> ApiProvider | None:
        return route.route(api, original)

    try:
        configure_provider_transform(transform)
    except BaseException:
        route.close("no call (the runtime could not install it)")
        raise
    if plan.mode == UPDATE:
        from ..recordings.modes.updating import watch_process

        assert route.update is not None
        # The process is the run: the file is settled when the process ends, and only a
        # drifted run that ends normally (no exception, no signal, exit status 0) rewrites it
        # (docs/recordings-cli.md, "Where things live").
        watch_process(route.update)


def _block_plan(plan: ActivationPlan) -> RuntimeSnapshot:
    """Fail closed with the plan's reason."""
    return _install_blocked(plan.reason or plan.problem or "blocked", plan)


def _block(error: BaseException) -> RuntimeSnapshot:
    """Fail closed for an unexpected failure (an unreadable configuration file, say)."""
    return _install_blocked(str(error) or type(error).__name__, None)


def _install_blocked(cause: str, plan: ActivationPlan | None) -> RuntimeSnapshot:
    """Install the fail-closed provider for every api and describe why."""
    from .api_registry import configure_provider_transform

    cause = _redacted(cause)
    diagnosis = f"record/replay could not be activated: {cause}; {RECOVERY_HINT}"
    logger.error("record/replay activation failed: %s", cause)
    blocked = BlockedProvider(diagnosis)

    def blocked_transform(api: str, original: ApiProvider) -> ApiProvider:
        return blocked

    try:
        configure_provider_transform(blocked_transform)
    except RuntimeError:
        # Application code installed its own transform before the first lookup; it stays
        # in charge and the diagnosis is still logged above.
        logger.error("a provider transform was already installed; record/replay stays inactive")
    return RuntimeSnapshot(mode="blocked", diagnosis=diagnosis, plan=plan)


def _redacted(text: str) -> str:
    try:
        from ..recordings.redaction import redact_text
    except ImportError:  # pragma: no cover - redaction ships with the package
        return text
    return redact_text(text)


def finish_process_update(exit_status: int) -> int:
    """Settle the process's ``update`` run (if any) with the exit status the process is about
    to end with, and return the status to end with: 1 instead of 0 when the rewrite was due and
    failed (the old file is kept, and the message says where the new calls are). The
    ``openprogram`` command calls it before it returns; any other program is settled when it
    exits."""
    if _snapshot is None or _snapshot.mode != "update":
        return exit_status
    from ..recordings.modes.updating import finish_process_update as settle

    report = settle(exit_status)
    if report is not None and report.failed is not None and exit_status == 0:
        return 1
    return exit_status


def _reset_runtime_for_tests() -> None:
    global _state, _snapshot, _failure
    with _condition:
        _state, _snapshot, _failure = NEW, None, None
