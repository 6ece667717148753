"""A recording as one self-contained HTML page: ``openprogram recordings view``, the page the
demo ends with, and the drift page the pytest plugin writes when a replayed test drifts.

A recording is untrusted input (it can be edited by hand or copied in from anywhere), so the
page is built on three rules:

- Everything taken from a recording goes through :func:`html.escape` and lands in element
  text, never in an attribute name, a URL, a style or a script. Markup in a prompt shows as
  the characters it is made of.
- The page's own style and script are fixed files beside this module
  (``view_assets/``), inlined and allowed by their SHA-256 hash in a Content-Security-Policy
  that forbids everything else: no other script, style, image, font, frame or connection, so
  even a mistake in escaping could neither run code nor reach the network.
- What is shown is redacted again on the way out (:func:`.redaction.remove_secret_values`),
  as every view of a file is; and the page says at the top that it holds prompts and outputs.

The conversation walk is the one ``show --conversation`` uses (:mod:`.conversation`); the
comparison is ``recordings diff``'s (:mod:`.comparison`), so the page marks exactly the call
and field the command reports. Calls are ``<details>`` elements: a long recording opens folded,
one line per call, and needs no script to stay usable (the script only adds expand/fold all).
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
import stat
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from ..insight.cache_prefix import PrefixStep, prefix_steps, recording_cache_calls
from ..redaction import remove_secret_values
from .conversation import ConversationStep, call_cost, conversation_steps, raw_label
from .inspection import answered_by, reasoning_note

CONTENT_WARNING = (
    "This page holds prompts, model outputs and tool results copied from the recording "
    "(credentials are redacted). Treat it as confidential, like the recording itself."
)
#: Recordings up to this many calls open with every call unfolded.
OPEN_ALL_UP_TO = 20
PAGE_SUFFIX = ".html"
DRIFT_SUFFIX = ".drift.html"

_MESSAGE_INDEX = re.compile(r"^context\.messages\[(\d+)\]")


def esc(value: Any) -> str:
    """Text for element content: every ``<``, ``>``, ``&`` and quote escaped."""
    return html.escape(value if isinstance(value, str) else str(value), quote=True)


# ============================================================================ the page frame


@cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("view_assets", name).read_text(encoding="utf-8")


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def content_security_policy() -> str:
    """Only the page's own inline style and script (by hash) may take effect; no origin at
    all may be contacted."""
    return (
        "default-src 'none'; "
        f"style-src {_csp_hash(_asset('page.css'))}; script-src {_csp_hash(_asset('page.js'))}; "
        "img-src 'none'; font-src 'none'; connect-src 'none'; media-src 'none'; "
        "object-src 'none'; frame-src 'none'; base-uri 'none'; form-action 'none'"
    )


def _page(title: str, paths: Iterable[str], body: str) -> str:
    shown_paths = "".join(f'<div class="path">{esc(path)}</div>' for path in paths)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(content_security_policy())}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_asset('page.css')}</style></head><body>"
        f'<header class="page"><h1>{esc(title)}</h1>{shown_paths}</header>'
        f'<p class="warning" id="content-warning">{esc(CONTENT_WARNING)}</p>'
        f"<main>{body}</main><script>{_asset('page.js')}</script></body></html>\n"
    )


def _controls() -> str:
    return (
        '<p class="controls"><button type="button" data-open="1">expand all</button>'
        '<button type="button" data-open="0">fold all</button></p>'
    )


# ============================================================================ messages


def _json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "image":
            parts.append(f"[image {block.get('mime_type', '')}]")
        elif block.get("type") == "raw":
            parts.append(raw_label(block))
    return "\n".join(parts)


def _assistant_blocks(message: dict[str, Any]) -> str:
    parts = []
    for block in message.get("content") or []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(f'<pre class="text">{esc(block.get("text", ""))}</pre>')
        elif kind == "thinking":
            thinking = str(block.get("thinking", ""))
            parts.append(
                f'<details class="thinking"><summary>thinking ({len(thinking)} chars)</summary>'
                f"<pre>{esc(thinking)}</pre></details>"
            )
        elif kind == "toolCall":
            parts.append(
                f'<div class="toolcall">&#8594; <span class="name">{esc(block.get("name"))}</span>'
                f'<pre class="arguments">{esc(_json_text(block.get("arguments") or {}))}</pre></div>'
            )
        elif kind == "serverTool":
            parts.append(_server_tool_block(block))
    if message.get("stop_reason") in ("error", "aborted"):
        parts.append(
            f'<div class="error-text">{esc(message.get("stop_reason"))}: '
            f"{esc(message.get('error_message'))}</div>"
        )
    return "".join(parts)


def _server_tool_block(block: dict[str, Any]) -> str:
    """A tool the vendor ran (search, code execution, citations; docs/vendors.md): its kind,
    folded, with its readable text, or the vendor's item when it has none."""
    text = block.get("text")
    body = text if isinstance(text, str) and text else _json_text(block.get("payload") or {})
    return (
        f'<details class="servertool"><summary>server tool {esc(block.get("vendor"))} '
        f"{esc(block.get('kind'))}</summary><pre>{esc(body)}</pre></details>"
    )


def render_message(message: dict[str, Any], *, drift: bool = False) -> str:
    """One message as a block: user and tool-result text kept as text, assistant text,
    thinking folded, tool calls with their pretty-printed arguments."""
    role = message.get("role")
    classes = ["msg", role if role in ("user", "toolResult", "assistant") else "assistant"]
    if drift:
        classes.append("drift")
    if role == "user":
        label, inner = (
            "user",
            f'<pre class="text">{esc(_content_text(message.get("content")))}</pre>',
        )
    elif role == "toolResult":
        label = f"tool result: {message.get('tool_name')}"
        if message.get("is_error"):
            label += " (error)"
            classes.append("is-error")
        inner = f"<pre>{esc(_content_text(message.get('content')))}</pre>"
    else:
        label, inner = "assistant", _assistant_blocks(message)
    return f'<div class="{" ".join(classes)}"><div class="role">{esc(label)}</div>{inner}</div>'


def _system(text: str) -> str:
    return f'<div class="msg system"><div class="role">system</div><pre class="text">{esc(text)}</pre></div>'


def drift_message_index(field_path: str | None) -> int | None:
    """The index of the message a request field path lies in (``context.messages[3]...``)."""
    match = _MESSAGE_INDEX.match(field_path or "")
    return int(match.group(1)) if match else None


def render_step_body(step: ConversationStep, *, mark_message: int | None = None) -> str:
    """What one call added to its conversation, then its answer: a call that grew from an
    earlier one names it instead of repeating its messages, so the page grows with the
    conversation, not with its square."""
    parts = []
    if step.new_conversation:
        parts.append('<div class="newconv">new conversation</div>')
    if step.earlier_call is not None:
        parts.append(
            f'<div class="earlier">+ {esc(step.first_new_index)} earlier messages as in call '
            f"{esc(step.earlier_call)}</div>"
        )
    if step.system_prompt:
        parts.append(_system(step.system_prompt))
    for offset, message in enumerate(step.new_messages):
        parts.append(render_message(message, drift=step.first_new_index + offset == mark_message))
    if step.answer is not None:
        parts.append(render_message(step.answer))
    return "".join(parts)


# ============================================================================ call lines


def _usage(answer: dict[str, Any] | None) -> dict[str, Any]:
    usage = (answer or {}).get("usage")
    return usage if isinstance(usage, dict) else {}


def _timings(call: Any) -> str:
    """Time to first event and duration, when the recording has them (event lines with
    ``t``; older files do not)."""
    first, duration = call.first_event_ms, call.duration_ms
    parts = []
    if isinstance(first, int | float):
        parts.append(f"first event {first:g} ms")
    if isinstance(duration, int | float):
        parts.append(f"duration {duration:g} ms")
    return ", ".join(parts)


#: Between a call's header fields: in the page's text too (copied, read aloud, or laid out
#: without the style sheet), they read apart.
FIELD_SEPARATOR = '<span class="sep"> · </span>'


def call_meta(step: ConversationStep) -> str:
    """The one-line summary of a call: model, outcome, tokens, cost, timings."""
    call, model = step.call, step.model
    usage = _usage(step.answer)
    outcome = str(call.outcome)
    items = [
        f'<span class="n">call {esc(call.call_index)}</span>',
        f'<span class="model">{esc(model.get("provider"))}/{esc(model.get("id"))}</span>',
        f'<span class="outcome-{esc(outcome)}">{esc(outcome)}</span>',
        f'<span class="meta">{esc(usage.get("input", 0))} in / {esc(usage.get("output", 0))} out tokens{esc(reasoning_note(usage))}</span>',
        f'<span class="meta">${call_cost(step.answer):.6f}</span>',
        *(
            [f'<span class="meta">{esc(cached)} tokens read from the cache</span>']
            if (cached := usage.get("cache_read"))
            else []
        ),
        *(
            [f'<span class="meta">answered by {esc(named)}</span>']
            if (named := answered_by(step.answer))
            else []
        ),
    ]
    timings = _timings(call)
    if timings:
        items.append(f'<span class="meta">{esc(timings)}</span>')
    return FIELD_SEPARATOR.join(items)


def _call_details(
    step: ConversationStep, *, open_: bool, classes: str = "call", extra: str = ""
) -> str:
    attribute = " open" if open_ else ""
    return (
        f'<details class="{classes}" id="call-{esc(step.call.call_index)}"{attribute}>'
        f"<summary>{call_meta(step)}{extra}</summary>"
        f'<div class="body">{render_step_body(step)}</div></details>'
    )


# ============================================================================ one recording


def steps_by_call(calls: list[Any]) -> dict[int, ConversationStep]:
    """The conversation walk of every (session, lane), keyed by call index: a lane is one
    conversation, interleaved with its concurrent lanes in the file."""
    steps: dict[int, ConversationStep] = {}
    for lanes in _sessions(calls).values():
        for lane_calls in lanes.values():
            for step in conversation_steps(lane_calls):
                steps[step.call.call_index] = step
    return steps


def _sessions(calls: list[Any]) -> dict[str | None, dict[str, list[Any]]]:
    """Calls grouped by session, then lane, both in file order."""
    grouped: dict[str | None, dict[str, list[Any]]] = {}
    for call in calls:
        grouped.setdefault(call.session, {}).setdefault(call.lane, []).append(call)
    return grouped


def _totals(steps: Iterable[ConversationStep], sessions: int, lanes: int) -> str:
    steps = list(steps)
    tokens_in = sum(int(_usage(step.answer).get("input") or 0) for step in steps)
    tokens_cached = sum(int(_usage(step.answer).get("cache_read") or 0) for step in steps)
    tokens_out = sum(int(_usage(step.answer).get("output") or 0) for step in steps)
    tokens_reasoning = sum(int(_usage(step.answer).get("reasoning") or 0) for step in steps)
    cost = sum(call_cost(step.answer) for step in steps)
    failed = sum(1 for step in steps if step.call.outcome != "complete")
    cells = [
        ("calls", len(steps)),
        ("sessions", sessions),
        ("lanes", lanes),
        ("input tokens", tokens_in),
        ("cache read tokens", tokens_cached),
        ("output tokens", tokens_out),
        ("of which reasoning", tokens_reasoning),
        ("cost", f"${cost:.6f}"),
        ("not complete", failed),
    ]
    return (
        '<div class="totals">'
        + "".join(f"<div>{esc(n)}<b>{esc(v)}</b></div>" for n, v in cells)
        + "</div>"
    )


def _lane_name(lane: str) -> str:
    return "root lane" if lane == "" else f"lane {lane}"


def _cache_meta(step: PrefixStep | None) -> str:
    """The prompt cache of a call (docs/recordings-cli.md, ``show --cache``): the share of the
    previous call's request it keeps as a prefix, where it breaks, and the cached tokens the
    vendor reported."""
    if step is None or step.previous is None:
        return ""
    share = step.kept_share or 0.0
    kept = f"keeps {share:.0%} of call {step.previous} as a prompt-cache prefix"
    broken = f", breaks at {step.breaks_at}" if step.breaks_at else ""
    cached = f" ({step.cache_read or 0} tokens read from the cache)"
    classes = "meta cache-break" if step.broken else "meta"
    return f'{FIELD_SEPARATOR}<span class="{classes}">{esc(kept + broken + cached)}</span>'


def render_recording_page(recording: Any) -> str:
    """The whole recording: totals, then each session with its lanes side by side, each call
    a foldable line opening onto its conversation."""
    calls = list(recording.calls)
    grouped = _sessions(calls)
    steps = steps_by_call(calls)
    prefixes = {step.call_index: step for step in prefix_steps(recording_cache_calls(calls))}
    open_all = len(calls) <= OPEN_ALL_UP_TO
    sections = []
    for number, (session, lanes) in enumerate(grouped.items(), start=1):
        columns = []
        for lane, lane_calls in lanes.items():
            rendered = "".join(
                _call_details(
                    steps[c.call_index],
                    open_=open_all,
                    extra=_cache_meta(prefixes.get(c.call_index)),
                )
                for c in lane_calls
            )
            columns.append(
                f'<div class="lane"><h3>{esc(_lane_name(lane))} ({len(lane_calls)} calls)</h3>{rendered}</div>'
            )
        label = f"session {number} of {len(grouped)}" + (f" ({session})" if session else "")
        sections.append(
            f'<section class="session"><h2>{esc(label)}</h2><div class="lanes">{"".join(columns)}</div></section>'
        )
    lane_count = sum(len(lanes) for lanes in grouped.values())
    body = _totals(steps.values(), len(grouped), lane_count) + _controls() + "".join(sections)
    return _page("Recording", [str(recording.path)], body)


# ============================================================================ differences


def changed_span(a: str, b: str) -> tuple[int, int, int]:
    """``(prefix, end_a, end_b)``: ``a[prefix:end_a]`` and ``b[prefix:end_b]`` are the parts
    that differ, between the longest common prefix and the longest common suffix."""
    prefix = 0
    limit = min(len(a), len(b))
    while prefix < limit and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and a[len(a) - 1 - suffix] == b[len(b) - 1 - suffix]:
        suffix += 1
    return prefix, len(a) - suffix, len(b) - suffix


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else _json_text(value)


def highlighted_pair(a: Any, b: Any) -> tuple[str, str]:
    """Both values as escaped text, the changed span of each in ``<mark>``."""
    text_a, text_b = _value_text(a), _value_text(b)
    start, end_a, end_b = changed_span(text_a, text_b)

    def marked(text: str, end: int) -> str:
        middle = f"<mark>{esc(text[start:end])}</mark>" if end > start else ""
        return esc(text[:start]) + middle + esc(text[end:])

    return marked(text_a, end_a), marked(text_b, end_b)


def difference_box(title: str, field_path: str, a: Any, b: Any, labels: tuple[str, str]) -> str:
    """One differing field, the two values beside each other with the change marked."""
    shown_a, shown_b = highlighted_pair(remove_secret_values(a), remove_secret_values(b))
    return (
        f'<div class="difference"><div>{esc(title)} <span class="field">{esc(field_path)}</span></div>'
        f'<div class="pair"><div><h4>{esc(labels[0])}</h4><pre>{shown_a}</pre></div>'
        f"<div><h4>{esc(labels[1])}</h4><pre>{shown_b}</pre></div></div></div>"
    )


def _compared_call(index: int, difference: Any, step_a: Any, step_b: Any, first: bool) -> str:
    status = difference.status
    label = {
        "same": "same",
        "different": "different",
        "only_in_a": "only in A",
        "only_in_b": "only in B",
    }[status]
    boxes = []
    mark = None
    if difference.request_difference is not None:
        found = difference.request_difference
        mark = drift_message_index(found["field_path"])
        boxes.append(
            difference_box(
                "request differs first at", found["field_path"], found["a"], found["b"], ("A", "B")
            )
        )
    for response in difference.response_differences:
        boxes.append(
            difference_box("response", response["field"], response["a"], response["b"], ("A", "B"))
        )
    sides = []
    for name, step in (("A", step_a), ("B", step_b)):
        inner = (
            render_step_body(step, mark_message=mark)
            if step is not None
            else "<p>(no such call)</p>"
        )
        meta = call_meta(step) if step is not None else ""
        sides.append(f'<div><h4>{name}</h4><div class="meta">{meta}</div>{inner}</div>')
    classes = "call " + ("same" if status == "same" else "different") + (" first" if first else "")
    badge = ' <span class="badge">first difference</span>' if first else ""
    element_id = ' id="first-difference"' if first else ""
    return (
        f'<details class="{classes}"{element_id}{"" if status == "same" else " open"}>'
        f'<summary><span class="n">call {index}</span>{FIELD_SEPARATOR}<span>{label}</span>{badge}</summary>'
        f'<div class="body">{"".join(boxes)}<div class="pair">{"".join(sides)}</div></div></details>'
    )


def render_comparison_page(recording_a: Any, recording_b: Any) -> str:
    """Two recordings aligned call by call as ``recordings diff`` aligns them: identical calls
    folded, the first differing call marked and open, its first differing field marked."""
    from .comparison import diff_recordings

    result = diff_recordings(recording_a, recording_b)
    steps_a, steps_b = (
        steps_by_call(list(recording_a.calls)),
        steps_by_call(list(recording_b.calls)),
    )
    first = next((call.call_index for call in result.calls if call.status != "same"), None)
    rows = [
        _compared_call(
            d.call_index,
            d,
            steps_a.get(d.call_index),
            steps_b.get(d.call_index),
            d.call_index == first,
        )
        for d in result.calls
    ]
    body = (
        f'<p class="summary" id="diff-summary">{esc(result.summary())}</p>'
        + _controls()
        + "".join(rows)
    )
    return _page("Recordings compared", [f"A: {recording_a.path}", f"B: {recording_b.path}"], body)


# ============================================================================ drift (pytest)


def render_drift_page(recording: Any, mismatch: Any) -> str:
    """A replayed test drifted: the recorded call beside what the test sent at the first
    differing field, the field marked, then the recorded call in full."""
    where = f" ({mismatch.where})" if getattr(mismatch, "where", None) else ""
    heading = f"replay mismatch at call {mismatch.call_index}{where}, field {mismatch.field_path}"
    parts = [
        f'<p class="summary" id="drift-summary">{esc(heading)}</p>',
        difference_box(
            "first difference at",
            mismatch.field_path,
            mismatch.recorded,
            mismatch.incoming,
            ("recorded", "incoming (the test's request)"),
        ),
    ]
    call = next((c for c in recording.calls if c.call_index == mismatch.call_index), None)
    if call is not None:
        step = next(conversation_steps([call]))  # the whole request: a step of its own
        parts.append(
            "<h2>The recorded call</h2><p>The test's request matched it up to the field above.</p>"
            f'<details class="call first" open><summary>{call_meta(step)}</summary>'
            f'<div class="body">{render_step_body(step, mark_message=drift_message_index(mismatch.field_path))}'
            "</div></details>"
        )
    return _page("Replay drift", [str(recording.path)], "".join(parts))


# ============================================================================ files


def page_name(recording_path: Path, against: Path | None = None) -> str:
    """A page's file name: the recording's (and the one it is compared with), and a short
    digest of their full paths, so that two recordings of one name (``test_x`` of two test
    modules) never share a page."""
    stem = recording_path.name.removesuffix(".jsonl")
    if against is not None:
        stem += "-vs-" + against.name.removesuffix(".jsonl")
    identity = str(recording_path.absolute()) + (
        "\0" + str(against.absolute()) if against is not None else ""
    )
    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{stem}-{digest}{PAGE_SUFFIX}"


def page_path(
    recording_path: Path, against: Path | None = None, folder: Path | None = None
) -> Path:
    """Where a page goes by default: in ``folder`` (the command passes the state folder's
    ``reports``, outside any folder of committed recordings), else beside the recording."""
    if folder is None:
        stem = recording_path.name.removesuffix(".jsonl")
        if against is not None:
            stem += "-vs-" + against.name.removesuffix(".jsonl")
        return recording_path.with_name(stem + PAGE_SUFFIX)
    return folder / page_name(recording_path, against)


def drift_page_path(recording_path: Path) -> Path:
    """Beside the recording: where openprogram 0.2 wrote drift pages (the plugin now writes
    them to its report folder, and removes an old one here when the test passes)."""
    return recording_path.with_name(recording_path.name.removesuffix(".jsonl") + DRIFT_SUFFIX)


class PageOutputError(Exception):
    """An ``--output`` the page must not be written to; ``usage`` is a mistake in the
    arguments (exit 2) rather than a file problem (exit 1). The message names the path."""

    def __init__(self, message: str, *, usage: bool) -> None:
        super().__init__(message)
        self.usage = usage


def check_output(path: Path, reading: Iterable[Path]) -> None:
    """Refuse any ``--output`` but a new ``.html`` file or an existing regular ``.html`` file
    that is not a recording: never a folder, a symbolic link, a FIFO or a device, a file being
    read for the page, or a file that starts like a recording (written over, it would be
    lost). Checked on the path without following a link; the page is then written by rename,
    which replaces a name, never the file behind it."""
    if path.suffix.lower() != PAGE_SUFFIX:
        raise PageOutputError(
            f"--output {path}: must name an .html file (the page is HTML)", usage=True
        )
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise PageOutputError(
            f"--output {path}: cannot inspect: {error.strerror or error}", usage=False
        ) from None
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise PageOutputError(
                f"--output {path}: is a folder; name the HTML file to write", usage=True
            )
        if stat.S_ISLNK(info.st_mode):
            raise PageOutputError(
                f"--output {path}: is a symbolic link; refusing to write through it (name a new file)",
                usage=False,
            )
        if not stat.S_ISREG(info.st_mode):
            raise PageOutputError(
                f"--output {path}: is not a regular file (a FIFO or a device); name a new file",
                usage=False,
            )
        for source in reading:
            if _same_file(path, source):
                raise PageOutputError(
                    f"--output {path}: is the recording being viewed; name another file", usage=True
                )
        if _starts_like_a_recording(path):
            raise PageOutputError(
                f"--output {path}: is a recording; refusing to write a page over it", usage=False
            )
    parent = path.parent
    if not parent.is_dir():
        raise PageOutputError(f"--output {path}: the folder {parent} does not exist", usage=False)


def _same_file(path: Path, other: Path) -> bool:
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def _starts_like_a_recording(path: Path) -> bool:
    from ..file.format import header_of_line

    try:  # never through a link, never waiting on a FIFO swapped in since the check
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        first = os.read(fd, 1 << 16).split(b"\n", 1)[0]
    except OSError:
        return False
    finally:
        os.close(fd)
    return header_of_line(first) is not None


def write_page(text: str, path: Path) -> None:
    """Write the page atomically, readable by its owner only: it holds prompts and outputs."""
    from ..file.atomic import replace_atomically

    replace_atomically(path, text.encode("utf-8", "replace"), 0o600)
