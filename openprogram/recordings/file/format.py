"""The recording file's one owner: the version rules, every line shape (built and read), the
error, and what "the request" of a call is (:func:`request_payloads`), as recorded and as
compared on replay. The writer (:mod:`.sink`, the recorder, update's rewrite, recovery) builds
lines only through the functions here, and every reader (the strict :mod:`.reader`, and
:func:`iter_rows` for recovery, update and ``show --content``) reads them through it. The
format itself is described in ``docs/file-format.md``.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import orjson

# Re-exported: the reader and the replayer take it from here.
from ...providers.types import ANSWER_ONLY_FIELDS
from ...providers.types import EVENT_CLASSES as EVENT_CLASSES
from .patches import apply_patch, growth_only_patch, strictly_equal

if TYPE_CHECKING:
    from ...providers.types import Context, Model, StreamOptions
    from ..redaction import Redactor

#: The version new files are written in. Readers read every version in
#: :data:`READABLE_FORMAT_VERSIONS`; appending to a file keeps the file's own version.
RECORDING_FORMAT_VERSION = 2
READABLE_FORMAT_VERSIONS = (1, 2)
#: The first version whose request lines may carry ``context_patch``.
CONTEXT_PATCH_VERSION = 2
#: How deeply a line may nest objects and arrays, and a context or a ``partial`` rebuilt
#: from patches the line that would hold it whole: readers walk values (redaction, the
#: comparison of requests, the views), and a deeper value is refused when the file is opened,
#: naming its line, rather than exhausting a walk later (docs/file-format.md).
MAX_NESTING = 100
#: The reason a line deeper than :data:`MAX_NESTING` is refused with.
TOO_DEEP = f"nests objects and arrays deeper than {MAX_NESTING} levels (the format's limit)"

#: The line types, by name: other modules use these, never the strings.
HEADER, REQUEST, EVENT, CALL_END = "header", "request", "event", "call_end"
LINE_TYPES = frozenset({HEADER, REQUEST, EVENT, CALL_END})
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

    def __reduce__(
        self,
    ) -> tuple[
        type[RecordingFileError], tuple[str, str, int | None, int | None, str]
    ]:  # keep the fields across pickling (multiprocessing, xdist)
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


#: How a context is dumped as a request: each assistant message without what it says about the
#: answer (its id, model version and reasoning count), which reaches no vendor.
_CONTEXT_AS_REQUEST = {"messages": {"__all__": ANSWER_ONLY_FIELDS}}


def raw_request_payloads(
    model: Model, context: Context, options: StreamOptions | None
) -> dict[str, Any]:
    """The request's payloads before redaction: what replay compares first, redacting only
    what differs (:mod:`.lazy_redaction`). Never written anywhere as they are. An assistant
    message of the context is dumped without :data:`ANSWER_ONLY_FIELDS`: they are answers,
    never sent to a vendor, so a recording made before messages had them still matches, and
    two runs whose answers differ only in their ids do."""
    return {
        "model": model.model_dump(mode="json"),
        "context": context.model_dump(mode="json", exclude=_CONTEXT_AS_REQUEST),
        "options": None if options is None else options.model_dump(mode="json"),
    }


def message_as_request(message: Any) -> Any:
    """A message's dump as a request carries it: an answer's dump (a ``done`` event's
    message) without :data:`ANSWER_ONLY_FIELDS`, so that it can be told the same as the message
    the next request resends. Any other value is returned as it is."""
    return (
        _without(message, ANSWER_ONLY_FIELDS)
        if type(message) is dict and message.get("role") == "assistant"
        else message
    )


def _without(value: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    kept = {}
    for key, item in value.items():
        spec = fields.get(key)
        if spec is True:
            continue
        kept[key] = _without(item, spec) if type(spec) is dict and type(item) is dict else item
    return kept


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
    return cast(
        "dict[str, Any]", redactor.remove_secret_values(payloads)
    )  # the redaction of a dict is a dict


def recorded_request_payloads(
    model: Model, context: Context, options: StreamOptions | None, redactor: Redactor
) -> dict[str, Any]:
    """:func:`request_payloads` as the recorder writes them: each context message redacted
    once per process (``Redactor.remove_from_request``), so a message the agent resends is the
    same (read-only) object at every turn. Nothing may change what this returns."""
    return redactor.remove_from_request(raw_request_payloads(model, context, options))


# ============================================================================ versions


def version_problem(version: Any) -> str | None:
    """Why a file whose header says ``format_version: version`` cannot be read, or None."""
    if not is_plain_int(version):
        return f"format_version must be an integer, not {short_repr(version)}"
    if version in READABLE_FORMAT_VERSIONS:
        return None
    readable = " and ".join(str(number) for number in READABLE_FORMAT_VERSIONS)
    if version > RECORDING_FORMAT_VERSION:
        return (
            f"format_version {version} is newer than this openprogram reads ({readable}); "
            "a newer openprogram is needed: upgrade it from its repository (docs/install.md)"
        )
    return f"format_version {version} is not supported (this program reads {readable})"


def short_repr(value: Any) -> str:
    """A value for an error message, cut short: messages never quote a line's content."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ============================================================================ building lines


def header_row(version: int = RECORDING_FORMAT_VERSION) -> dict[str, Any]:
    """A new file's header."""
    from ... import __version__
    from ..redaction import REDACTION_VERSION

    return {
        "type": "header",
        "format_version": version,
        "recording_id": uuid.uuid4().hex,
        "created_at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "redaction_version": REDACTION_VERSION,
        "openprogram_version": __version__,
    }


#: How every request line this program writes starts; the sink reads a file's last call_index
#: from a line of this form without parsing it (see :func:`request_line_index`).
REQUEST_LINE_PREFIX = b'{"type":"request","call_index":'


def request_line(call_index: int, body: bytes) -> bytes:
    """The request line of call ``call_index`` from :meth:`ContextBases.request_body`'s body:
    the index is spliced in last, so the sink encodes a large context before taking its locks."""
    return b"%s%d,%s\n" % (REQUEST_LINE_PREFIX, call_index, body[1:])


#: In every request line: a line without it is no request (a fast test on raw bytes).
REQUEST_MARKER = b'"request"'


def header_of_line(line: bytes) -> dict[str, Any] | None:
    """The header row a file's first line holds, or None when it is not a header."""
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return row if type(row) is dict and row.get("type") == HEADER else None


def request_index_of_row(row: Any) -> int | None:
    """The ``call_index`` of a request row, or None for any other row (or a bad index)."""
    if type(row) is not dict or row.get("type") != REQUEST:
        return None
    index = row.get("call_index")
    return index if is_plain_int(index) else None


def request_line_index(line: bytes) -> int | None:
    """The ``call_index`` of a request line of :func:`request_line`'s form, else None."""
    if not line.startswith(REQUEST_LINE_PREFIX):
        return None
    start = len(REQUEST_LINE_PREFIX)
    digits = line[start : line.find(b",", start)]
    return int(digits) if digits.isdigit() else None


def event_line_head(call_index: int) -> bytes:
    """The start of every event line of call ``call_index``, to fill in with ``%`` and the event
    index and ``t`` (ms); the encoder appends the event's JSON and ``}\\n``."""
    return b'{"type":"event","call_index":%d,"event_index":%%d,"t":%%d,"event":' % call_index


def call_end_row(
    call_index: int,
    event_count: int,
    outcome: str = "complete",
    redactions: list[dict[str, Any]] | None = None,
    answer: dict[str, Any] | None = None,
    answer_withheld: str | None = None,
) -> dict[str, Any]:
    """A call's ``call_end`` (``outcome`` written only when it is not ``complete``); ``answer``
    is the vendor's own answer as :func:`answer_field` stores it, or ``answer_withheld`` says
    why a call that had one does not keep it (docs/file-format.md, "The vendor's answer")."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}")
    row: dict[str, Any] = {"type": "call_end", "call_index": call_index, "event_count": event_count}
    if outcome != "complete":
        row["outcome"] = outcome
    if redactions:
        row["redactions"] = redactions
    if answer is not None:
        row[ANSWER] = answer
    elif answer_withheld is not None:
        row[ANSWER_WITHHELD] = answer_withheld
    return row


# ============================================================================ the vendor's answer

#: The ``call_end`` fields of a call's own answer as the vendor sent it (optional: a reader
#: that does not know them replays the call from its events, as every call of a file written
#: before them).
ANSWER, ANSWER_WITHHELD = "vendor_answer", "vendor_answer_withheld"


def answer_field(
    status: int, content_type: str, chunks: list[bytes], complete: bool = True
) -> dict[str, Any] | None:
    """The stored form of a vendor's answer: ``status``, ``content_type``, the ``body`` as text
    (SSE lines in their order, or the JSON body) and ``chunks``, the byte length of each piece
    it arrived in, so a replay streams it with the same chunking; ``broke_off: true`` when the
    connection broke after them. None for a body that is not UTF-8 (it cannot be stored as
    text; the call replays from its events)."""
    body = b"".join(chunks)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    stored = {
        "status": status,
        "content_type": content_type,
        "body": text,
        "chunks": [len(c) for c in chunks if c],
    }
    if not complete:
        stored["broke_off"] = True
    return stored


def answer_problem(value: Any) -> str | None:
    """Why a stored answer is not valid, or None (the strict reader's check)."""
    if type(value) is not dict:
        return f"{ANSWER} must be a JSON object"
    status, content_type, body, chunks = (
        value.get(name) for name in ("status", "content_type", "body", "chunks")
    )
    if not is_plain_int(status) or not 100 <= status < 600:
        return f"{ANSWER} status must be an HTTP status, not {short_repr(status)}"
    if type(content_type) is not str or type(body) is not str:
        return f"{ANSWER} content_type and body must be strings"
    if type(chunks) is not list or not all(is_plain_int(size) and size > 0 for size in chunks):
        return f"{ANSWER} chunks must be a list of positive byte counts"
    if sum(chunks) != len(body.encode("utf-8")):
        return f"{ANSWER} chunks add up to {sum(chunks)} bytes but the body has {len(body.encode('utf-8'))}"
    if value.get("broke_off", False) not in (True, False):
        return f"{ANSWER} broke_off must be true or false"
    return None


def answer_chunks(value: dict[str, Any]) -> tuple[int, str, list[bytes], bool]:
    """A stored answer (checked by :func:`answer_problem`) as ``(status, content_type, chunks,
    complete)``: the body cut into the pieces it arrived in."""
    body = value["body"].encode("utf-8")
    pieces, start = [], 0
    for size in value["chunks"]:
        pieces.append(body[start : start + size])
        start += size
    return value["status"], value["content_type"], pieces, not value.get("broke_off", False)


class ContextBases:
    """What a writer needs to write a request's context as its growth from an earlier call
    (``context_patch``, format version 2): the last context it wrote in each lane.

    The base of a call is the previous call the same writer made in the same lane (an agent's
    next turn); a patch is used only when the context only grew from it and applying the patch
    to the base gives the context exactly (checked on the redacted values, the ones written);
    otherwise the context is written whole. A writer of a version 1 file writes every context
    whole. Only the most recent :data:`MAX_BASES` lanes are remembered, so a writer's memory
    does not grow with the number of lanes it has seen.
    """

    MAX_BASES = 64

    def __init__(self, version: int) -> None:
        self.patches = version >= CONTEXT_PATCH_VERSION
        self._last: OrderedDict[Any, tuple[int, Any]] = OrderedDict()

    def request_fields(self, key: Any, payloads: dict[str, Any]) -> dict[str, Any]:
        """``payloads`` (``model``, ``context``, ``options``) as a request line stores them:
        ``context`` replaced by ``context_patch`` when the base of ``key`` allows."""
        base = self._last.get(key) if self.patches else None
        if base is None:
            return payloads
        base_index, base_context = base
        context = payloads["context"]
        ops = growth_only_patch(base_context, context)
        if ops is None or not strictly_equal(apply_patch(base_context, ops), context):
            return payloads
        fields = {name: value for name, value in payloads.items() if name != "context"}
        fields["context_patch"] = {"from": base_index, "ops": ops}
        return fields

    def request_body(self, key: Any, payloads: dict[str, Any], where: dict[str, Any]) -> bytes:
        """The JSON object of a request line but for ``type`` and ``call_index`` (see
        :func:`request_line`): ``where`` (``session``, ``lane``) first, then the payloads."""
        return orjson.dumps({**where, **self.request_fields(key, payloads)})

    def wrote(self, key: Any, call_index: int, context: Any) -> None:
        """Call ``call_index`` of lane ``key`` is in the file with ``context``: the next call of
        the lane may be written as its growth."""
        if not self.patches:
            return
        last = self._last
        last[key] = (call_index, context)
        last.move_to_end(key)
        if len(last) > self.MAX_BASES:
            last.popitem(last=False)


def rewrite_rows(
    header: dict[str, Any],
    calls: Iterable[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]],
) -> bytes:
    """A whole file from ``header`` and each call's request row, resolved context and other rows
    (events, call_end), renumbered from 0 in the order given: update's rewrite. Contexts are
    patched again against the new numbering (or written whole in a version 1 file)."""
    bases = ContextBases(header["format_version"])
    lines = [encode_line(header)]
    for number, (request, context, rows) in enumerate(calls):
        where: dict[str, Any] = {
            name: request[name] for name in ("session", "lane") if name in request
        }
        payloads = {
            "model": request["model"],
            "context": context,
            "options": request.get("options"),
        }
        key = (where.get("session"), where.get("lane", ""))
        lines.append(request_line(number, bases.request_body(key, payloads, where)))
        bases.wrote(key, number, context)
        lines.extend(encode_line({**row, "call_index": number}) for row in rows)
    return b"".join(lines)


# ============================================================================ reading lines


def context_source(
    row: dict[str, Any], version: int, call_index: int
) -> tuple[Any, int | None, Any]:
    """What a request row stores of its context: ``(context, None, None)`` for a whole
    ``context``, ``(None, BASE, OPS)`` for a ``context_patch`` (the operations to apply to the
    resolved context of the earlier call BASE; :mod:`.contexts` applies them). Raises
    ``ValueError`` with the reason when the row holds neither in a valid shape."""
    patch = row.get("context_patch")
    if patch is None:
        if "context" not in row:
            raise ValueError("the request has neither context nor context_patch")
        return row["context"], None, None
    if "context" in row:
        raise ValueError("the request carries both context and context_patch")
    if version < CONTEXT_PATCH_VERSION:
        raise ValueError(
            f"context_patch needs format_version {CONTEXT_PATCH_VERSION}, the file is version {version}"
        )
    if type(patch) is not dict or set(patch) != {"from", "ops"}:
        raise ValueError('context_patch must be {"from": CALL_INDEX, "ops": [...]}')
    base_index = patch["from"]
    if not is_plain_int(base_index) or not 0 <= base_index < call_index:
        raise ValueError(not_an_earlier_call(base_index))
    return None, base_index, patch["ops"]


def not_an_earlier_call(base_index: Any) -> str:
    """The reason for a ``context_patch`` whose ``from`` names no earlier call."""
    return f"context_patch from {short_repr(base_index)} does not name an earlier call of the file"


def iter_rows(path: str | Path, lines: Iterable[bytes]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` of each non-blank line, for the lenient readers (recovery,
    update's rewrite, ``show --content``) that need the rows as they stand, not a validated
    file; a line that is not a JSON object raises :class:`RecordingFileError` naming it."""
    loads = orjson.loads
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = loads(line)
        except orjson.JSONDecodeError:
            raise RecordingFileError(path, "is not valid JSON", number) from None
        if type(row) is not dict:
            raise RecordingFileError(path, "a line must be a JSON object", number)
        yield number, row
