"""How this process ends, learnt while it runs: an ``update`` run of a whole process keeps its
rewrite only when the process ends normally, with exit status 0 (docs/recordings-cli.md,
"Where things live").

An ``atexit`` handler runs after the interpreter has consumed the ``SystemExit`` that carries
the exit status, and nothing of it is left to read then. So :class:`ProcessEnd` notes the end
as it happens:

- it holds the outermost frame of the main thread (the main module's, or ``runpy``'s) from the
  moment it starts watching; at the end that frame has either returned (a normal end: status
  0) or been left by an exception, at the instruction it was left at;
- an uncaught exception other than ``SystemExit`` is printed, which sets ``sys.last_type``
  (the caller checks that first);
- a ``SystemExit`` counts when it is the one that left that frame, and is seen when
  ``sys.exit()`` or the builtin ``exit()`` / ``quit()`` raised it (each is replaced by a wrapper
  that notes the exception) or, on Python 3.12 and later, when it leaves that frame
  (``sys.monitoring``, event ``PY_UNWIND``);
- anything else cannot be seen. On Python 3.11: ``raise SystemExit(main())``, an ``exit``
  imported from ``sys`` before the watch began, and an exit that passed through a ``with`` or
  ``finally`` block (or an asyncio task) on its way out, since 3.11 keeps no trace of an
  exception's way past the last handler it entered (see :func:`_left_by`). Its status is
  unknown, and an unknown status is taken as an end that was not normal.
"""

from __future__ import annotations

import builtins
import dis
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, NoReturn

__all__ = ["UNSEEN_EXIT", "ProcessEnd", "exit_status_of"]

#: How a run whose end could not be seen ended, in the words of its report.
UNSEEN_EXIT = (
    "an exit whose status could not be seen (before Python 3.12: 'raise SystemExit(...)', an exit "
    "imported before the first model call, or an exit through a 'with' or 'finally' block); end "
    "the program by returning, or by sys.exit(STATUS) outside such blocks, for an update to be kept"
)

#: The instructions a frame that returned was left at.
_RETURNS = frozenset(name for name in ("RETURN_VALUE", "RETURN_CONST") if name in dis.opmap)
#: ``sys.monitoring`` tool ids no well-known tool claims (0 debugger, 1 coverage, 2 profiler,
#: 5 optimizer).
_FREE_TOOL_IDS = (3, 4)


def exit_status_of(ending: BaseException) -> int:
    """The exit status a ``SystemExit`` ends the process with, as the interpreter computes it:
    no code is 0, an integer is itself, anything else (a message) is printed and is 1."""
    code = getattr(ending, "code", None)
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code)
    return 1


class ProcessEnd:
    """Watches how this process ends (see the module docstring). Made once per process, by
    the first ``update`` run of the whole process."""

    def __init__(self) -> None:
        self._outermost = _outermost_frame_of_main_thread()
        self._ending: BaseException | None = None

    def watch(self) -> None:
        """Start noting the ``SystemExit`` exceptions that may end the process."""
        sys.exit = _noting(sys.exit, self._note)
        for name in ("exit", "quit"):
            quitter = getattr(builtins, name, None)
            if quitter is not None:  # the site module adds them
                setattr(builtins, name, _NotingQuitter(quitter, self._note))
        self._watch_unwinding()

    def exit_status(self) -> int | None:
        """The status the process ends with; None when it could not be seen (or the main
        module is still running). Meant for the end of the process (an ``atexit`` handler)."""
        frame = self._outermost
        if frame is None or _running(frame):
            return None
        if _returned(frame):
            return 0
        ending = self._ending
        if ending is None or not _left_by(ending, frame):
            return None  # left by a SystemExit this watch did not see
        return exit_status_of(ending)

    def _note(self, ending: BaseException) -> None:
        if threading.current_thread() is threading.main_thread():  # elsewhere it ends a thread
            self._ending = ending

    def _watch_unwinding(self) -> None:
        """Python 3.12 and later: note a ``SystemExit`` leaving the outermost frame, however it
        was raised. The callback runs for every exception that leaves any Python function, and
        only compares two references before returning."""
        monitoring: Any = getattr(sys, "monitoring", None)
        frame = self._outermost
        if monitoring is None or frame is None:
            return
        code, note = frame.f_code, self._note

        def unwound(unwound_code: Any, _offset: int, exception: BaseException) -> None:
            if unwound_code is code and isinstance(exception, SystemExit):
                note(exception)

        for tool in _FREE_TOOL_IDS:
            if monitoring.get_tool(tool) is None:
                monitoring.use_tool_id(tool, "openprogram update")
                monitoring.register_callback(tool, monitoring.events.PY_UNWIND, unwound)
                monitoring.set_events(tool, monitoring.events.PY_UNWIND)
                return


def _noting(
    exit_function: Callable[..., NoReturn], note: Callable[[BaseException], None]
) -> Callable[..., NoReturn]:
    """``exit_function`` noting the ``SystemExit`` it raises."""

    def exit(status: object = None) -> NoReturn:  # noqa: A001 - it stands in for sys.exit
        try:
            exit_function(status)
        except SystemExit as ending:
            note(ending)
            raise
        raise SystemExit(status)  # an exit function returns only if replaced by a stub

    exit.__doc__ = exit_function.__doc__
    return exit


class _NotingQuitter:
    """The builtin ``exit`` or ``quit`` (an object of the site module), noting the
    ``SystemExit`` it raises; it shows as the original does in the interactive shell."""

    def __init__(self, quitter: Any, note: Callable[[BaseException], None]) -> None:
        self._quitter = quitter
        self._note = note

    def __repr__(self) -> str:
        return repr(self._quitter)

    def __call__(self, code: object = None) -> NoReturn:
        try:
            self._quitter(code)
        except SystemExit as ending:
            self._note(ending)
            raise
        raise SystemExit(code)


def _left_by(ending: BaseException, frame: FrameType) -> bool:
    """Whether ``ending``, a ``SystemExit`` this watch noted, is the exception that left the
    outermost ``frame``: its traceback starts there, at the instruction the frame was left at.
    On Python 3.11 an exception's ``__traceback__`` is brought up to date only when it enters
    a handler (an ``except``, a ``finally``, a ``with`` block's exit), so there it may still
    start in the exit function that raised it: then it entered no handler after that, so
    nothing caught it, and it ended the process."""
    traceback = ending.__traceback__
    if traceback is None:
        return False
    if traceback.tb_frame is frame:
        return traceback.tb_lasti == frame.f_lasti
    return traceback.tb_frame.f_code in _EXIT_CODES


def _outermost_frame_of_main_thread() -> FrameType | None:
    main = threading.main_thread()
    frame: FrameType | None
    if threading.current_thread() is main:
        frame = sys._getframe()
    else:
        frame = sys._current_frames().get(main.ident) if main.ident is not None else None
    if frame is None:
        return None
    while frame.f_back is not None:
        frame = frame.f_back
    return frame


#: The code of the functions that raise the exceptions :func:`_noting` and
#: :class:`_NotingQuitter` note, as a traceback names them.
_EXIT_CODES = frozenset(
    {_noting(sys.exit, lambda ending: None).__code__, _NotingQuitter.__call__.__code__}
)


def _running(frame: FrameType) -> bool:
    """Whether ``frame`` is still on the calling thread's stack."""
    current: FrameType | None = sys._getframe()
    while current is not None:
        if current is frame:
            return True
        current = current.f_back
    return False


def _returned(frame: FrameType) -> bool:
    """Whether a frame that finished returned, rather than being left by an exception."""
    code = frame.f_code.co_code
    position = frame.f_lasti
    return 0 <= position < len(code) and dis.opname[code[position]] in _RETURNS
