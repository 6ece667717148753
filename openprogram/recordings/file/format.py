"""Vocabulary of the recording file shared by the writer (:mod:`.sink`, :mod:`.recorder`) and
the one strict reader (:mod:`.reader`): the version, the line types, the error, line encoding,
and what "the request" of a call is (:func:`request_payloads`), as recorded and as compared on
replay. The format itself is described in ``docs/file-format.md``.

Keeping these in one module means the writer and the reader cannot drift apart on what a line
looks like.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import orjson

# Re-exported: the reader and the replayer take it from here.
from ...providers.types import EVENT_CLASSES as EVENT_CLASSES

if TYPE_CHECKING:
    from ...providers.types import Context, Model, StreamOptions
    from ..redaction import Redactor

RECORDING_FORMAT_VERSION = 1

LINE_TYPES = frozenset({"header", "request", "event", "call_end"})
OUTCOMES = frozenset({"complete", "error", "cancelled", "abandoned"})

#: Event types that carry a ``partial`` snapshot (and may therefore carry ``partial_patch``).
PARTIAL_EVENT_TYPES = frozenset(
    name for name, cls in EVENT_CLASSES.items() if "partial" in cls.model_fields
)


#: What went wrong with a recording file, for code that must act on it (the activation plan
#: turns it into a problem code) without reading the English message. ``interrupted``: the
#: writer died (a torn last line, a call without a call_end), which ``recordings recover``
#: repairs.
FILE_ERROR_KINDS = frozenset(
    {"corrupt", "interrupted", "wrong_version", "unreadable", "symlink", "not_a_file", "missing"}
)


class RecordingFileError(Exception):
    """A recording file that cannot be read or written, naming where and why.

    The message is ``recording file PATH[ at line N][ for call C]: REASON``; it never quotes
    the content of a line, which may hold prompts and outputs. ``kind`` (one of
    :data:`FILE_ERROR_KINDS`) says what kind of failure it is, so that nobody has to search
    the message to find out.
    """

    def __init__(
        self,
        path: str | Path,
        reason: str,
        line_number: int | None = None,
        call_index: int | None = None,
        kind: str = "corrupt",
    ) -> None:
        if kind not in FILE_ERROR_KINDS:
            raise ValueError(f"unknown recording file error kind {kind!r}")
        self.path = str(path)
        self.reason = reason
        self.line_number = line_number
        self.call_index = call_index
        self.kind = kind
        where = f" at line {line_number}" if line_number is not None else ""
        call = f" for call {call_index}" if call_index is not None else ""
        super().__init__(f"recording file {self.path}{where}{call}: {reason}")

    def __reduce__(self) -> tuple[type[RecordingFileError], tuple[str, str, int | None, int | None, str]]:  # keep the fields across pickling (multiprocessing, xdist)
        return (type(self), (self.path, self.reason, self.line_number, self.call_index, self.kind))


def encode_line(row: dict[str, Any]) -> bytes:
    """One whole line, newline included, ready for a single ``os.write``.

    orjson escapes every control character, so the only ``\\n`` byte is the terminator;
    U+2028, U+2029 and U+0085 are written as plain UTF-8 and survive because readers split on
    ``\\n`` alone.
    """
    return orjson.dumps(row) + b"\n"


def is_plain_int(value: Any) -> TypeGuard[int]:
    """An int that is not a bool: JSON ``true`` must never pass for ``1``."""
    return type(value) is int


def raw_request_payloads(
    model: Model, context: Context, options: StreamOptions | None
) -> dict[str, Any]:
    """The request's payloads before redaction: what replay compares first, redacting only
    what differs (:mod:`.lazy_redaction`). Never written anywhere as they are."""
    return {
        "model": model.model_dump(mode="json"),
        "context": context.model_dump(mode="json"),
        "options": None if options is None else options.model_dump(mode="json"),
    }


def request_payloads(
    model: Model,
    context: Context,
    options: StreamOptions | None,
    redactor: Redactor | None = None,
) -> dict[str, Any]:
    """The redacted ``model``, ``context`` and ``options`` of a request, as recorded and as
    compared on replay (runtime-only options are excluded by the types themselves)."""
    payloads = raw_request_payloads(model, context, options)
    if redactor is None:
        from ..redaction import current_redactor

        redactor = current_redactor()
    return cast("dict[str, Any]", redactor.remove_secret_values(payloads))  # the redaction of a dict is a dict
