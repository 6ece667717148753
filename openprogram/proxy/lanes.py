"""The lane of a proxied call: which conversation it belongs to.

A client of the proxy cannot enter ``lane(...)``: its calls arrive as HTTP requests, and two
conversations it runs at once arrive interleaved in whatever order timing gives. A request's
lane is therefore derived from the start of its conversation (the api, the model, the system
prompt and the first user message, redacted as the recording stores them and rewritten by the
``normalize`` rules as replay compares them), which every later turn of the same conversation
repeats: each conversation keeps one strict order in the recording, and
independent conversations replay in any interleaving. A client names a lane itself with the
``X-OpenProgram-Lane`` header (``a/b`` for a nested one). See docs/proxy.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from ..providers.lanes import lane
from ..providers.types import Context, UserMessage
from ..providers.vendors.common import text_of

LANE_HEADER = "x-openprogram-lane"

#: The prefix of a derived lane's name; the rest is a digest of the conversation's start.
CONVERSATION_PREFIX = "conversation-"


def conversation_lane(
    context: Context,
    extra_body: dict[str, Any] | None = None,
    *,
    api: str = "",
    model_id: str = "",
    normalize: Callable[[Any], Any] | None = None,
) -> str | None:
    """The derived lane of a request, or None (the root lane) for a request with no user
    message. A Responses request's ``instructions`` (carried in ``extra_body``) count as its
    system prompt; the api and the model count too, so two vendors' conversations that open
    with the same words do not share a lane. The texts are redacted first, so a run value (a
    temporary folder declared with ``values=``) gives the same lane at every run, and then
    rewritten by ``normalize`` (the session's rules), so a conversation that opens with a
    value a rule rewrites (today's date) has one lane at every run."""
    from ..providers.recording import remove_secret_values

    first = next((m for m in context.messages if isinstance(m, UserMessage)), None)
    if first is None:
        return None
    instructions = (extra_body or {}).get("instructions")
    start = remove_secret_values(
        [api, model_id, context.system_prompt, instructions, text_of(first.content)]
    )
    if normalize is not None:
        start = normalize(start)
    digest = hashlib.sha256(orjson.dumps(start)).hexdigest()[:16]
    return CONVERSATION_PREFIX + digest


def lane_segments(header: str | None, derived: str | None) -> list[str]:
    """The lane path to make the call in: the header's (``a/b``), else the derived one."""
    if header is not None and header.strip():
        segments = [segment.strip() for segment in header.split("/")]
        if not all(segments):
            from ..providers.recording import redact_lane

            shown = redact_lane(header)  # the client's text: it may hold a key
            raise ValueError(f"the {LANE_HEADER} header names a lane path like a/b, not {shown!r}")
        return segments
    return [derived] if derived else []


@contextlib.contextmanager
def in_lane(segments: list[str]) -> Iterator[None]:
    """Make the calls inside in the lane path ``segments`` (the root lane when empty)."""
    with contextlib.ExitStack() as stack:
        for segment in segments:
            stack.enter_context(lane(segment))
        yield


class LaneBook:
    """Derived lanes as a replay finds them.

    A conversation whose start changed since it was recorded (the drift a replay exists to
    report) derives a lane the recording does not have, and a replay could only say that
    there is no call in that lane. The book lends such a lane the first recorded conversation
    lane no request has used yet, in the order the recording met them, so the replay compares
    the request with that conversation's call and names the field that changed. An unchanged
    conversation keeps its own lane, so interleavings never depend on this."""

    def __init__(self, recorded: Iterable[str] = ()) -> None:
        self.recorded = [
            name for name in dict.fromkeys(recorded) if name.startswith(CONVERSATION_PREFIX)
        ]
        self._known = set(self.recorded)
        self._used: set[str] = set()
        self._lent: dict[str, str] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_replay(cls, path: str | os.PathLike[str]) -> LaneBook:
        """The book of a replay of ``path``: its conversation lanes, in call order."""
        from ..providers.replay import read_recording_file

        return cls(call.lane for call in read_recording_file(path, summary_only=True).calls)

    def lane_for(self, derived: str) -> str:
        with self._lock:
            if derived in self._known or not self.recorded:
                self._used.add(derived)
                return derived
            lent = self._lent.get(derived)
            if lent is None:
                lent = next((name for name in self.recorded if name not in self._used), derived)
                self._lent[derived] = lent
                self._used.add(lent)
            return lent


__all__ = [
    "CONVERSATION_PREFIX",
    "LANE_HEADER",
    "LaneBook",
    "conversation_lane",
    "in_lane",
    "lane_segments",
]
