"""How ``openprogram recordings status|list|show|diff`` print for people (and ``list
FOLDER``'s rows, from :mod:`openprogram.recordings.store.listing`).

What is printed comes from :mod:`openprogram.recordings.modes.activation` (status) and
:mod:`openprogram.recordings.views.inspection` (list, show), which read the files; this module only
formats. Like them it never prints request or response content, and everything that comes
from a file or a file name is escaped for the terminal (:func:`openprogram.cli.terminal.terminal_safe`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openprogram.recordings.views.inspection import (
    SCHEMA_VERSION,
    CallSummary,
    RecordingInfo,
    ShowReport,
    answered_by,
    reasoning_note,
)

from ..terminal import terminal_safe as safe

if TYPE_CHECKING:
    from openprogram.recordings.modes.activation import ActivationPlan

NEXT_START = "takes effect at the next start"


# ----------------------------------------------------------------------------- status


@dataclass(frozen=True)
class ProjectStatus:
    """The project file ``status`` names (docs/project.md): the one in use, the files the
    search passed by unread, and what is wrong with the one in use, if anything."""

    path: Path | None
    passed_by: tuple[str, ...]
    problem: str | None


def project_status() -> ProjectStatus:
    from openprogram.project import project_config, search_project_file
    from openprogram.state import ConfigError

    search = search_project_file()
    try:
        project_config()
    except ConfigError as error:
        return ProjectStatus(search.path, search.passed_by, str(error))
    return ProjectStatus(search.path, search.passed_by, None)


def status_json(
    plan: ActivationPlan, config_file: Path, project: ProjectStatus | None = None
) -> dict[str, Any]:
    """The stable ``recordings status --json`` schema, from the activation plan."""
    project = project or project_status()
    return {
        "project": {
            "path": None if project.path is None else str(project.path),
            "passed_by": list(project.passed_by),
            "problem": project.problem,
        },
        "schema_version": SCHEMA_VERSION,
        "config_path": str(config_file),
        "mode": plan.configured_mode,
        "selector": plan.selector if isinstance(plan.selector, str) else None,
        "managed_id": plan.managed_id,
        "path": None if plan.path is None else str(plan.path),
        "file_usable": plan.file_usable,
        "blocked": plan.blocked,
        "problem": plan.problem,
        "reason": plan.reason,
        "fix": list(plan.fixes),
        "calls": plan.calls,
        "events": plan.events,
        "warning": plan.warning,
    }


def render_status(
    plan: ActivationPlan, config_file: Path, project: ProjectStatus | None = None
) -> str:
    project = project or project_status()
    mode = plan.configured_mode
    selector = _selector_text(plan.selector)
    lines = [
        f"config    {safe(config_file)}",
        f"project   {safe(project.path) if project.path is not None else 'none'}",
        *(f"          passed by {safe(line)}" for line in project.passed_by),
        *(
            [f"problem   {safe(project.problem)}"]
            if project.problem is not None and plan.problem != "invalid_project"
            else []
        ),
        f"mode      {safe(mode)}",
        f"selector  {selector}" + ("  (kept while off)" if mode == "off" and plan.selector else ""),
        f"path      {safe(plan.path) if plan.path is not None else '-'}",
    ]
    if plan.blocked:
        lines.append(f"problem   {safe(plan.reason)}")
        lines.append(
            "provider calls are BLOCKED at the next start until this is fixed; fix with one of:"
        )
        lines.extend(f"  {safe(fix)}" for fix in plan.fixes)
    elif mode == "off":
        lines.append("file      not used (record/replay is off)")
    elif mode == "record":
        exists = plan.path is not None and os.path.lexists(plan.path)
        lines.append(
            "file      usable: " + ("appending to it" if exists else "created at the next start")
        )
        if plan.warning:
            lines.append(f"warning   {safe(plan.warning)}")
    else:
        lines.append(f"file      usable: {plan.calls} calls, {plan.events} events")
    lines.append(f"(the configuration {NEXT_START}; a running process keeps what it started with)")
    return "\n".join(lines)


def _selector_text(selector: Any) -> str:
    """The selector as typed; a value of the wrong JSON type shown as such, not as missing."""
    if selector is None:
        return "(none)"
    return safe(selector) if isinstance(selector, str) else f"{safe(repr(selector))} (not a string)"


# ----------------------------------------------------------------------------- show


def render_show(report: ShowReport, now: float) -> str:
    header = report.header
    lines = [
        f"recording  {safe(report.id or '(not a managed recording)')}{'  (active)' if report.active else ''}",
        f"path       {safe(report.path)}",
        f"size       {human_size(report.size)}, modified {human_age(now - report.mtime)} ago",
        f"format     version {safe(header.get('format_version'))}, created "
        f"{safe(header.get('created_at', 'unknown'))} by openprogram "
        f"{safe(header.get('openprogram_version', 'unknown'))}",
        f"calls      {len(report.calls)} ({sum(c.event_count for c in report.calls)} events)",
        *(
            [f"usage      {usage_total(report.calls)}"]
            if any(call.usage for call in report.calls)
            else []
        ),
    ]
    if report.calls:
        lines.append("")
        sessions = len({call.session for call in report.calls}) > 1
        lanes = any(call.lane for call in report.calls)
        redacted = [call for call in report.calls if call.redactions]
        proxied = any(call.replays_from for call in report.calls)
        answers = any(call.response_model or call.response_id for call in report.calls)
        rows = [
            [
                str(call.call_index),
                *([str(call.session)] if sessions else []),
                *([safe(call.lane or "-")] if lanes else []),
                safe(call.api or "?"),
                safe(call.provider or "?"),
                safe(call.model or "?"),
                str(call.event_count),
                call.outcome,
                human_ms(call.first_event_ms),
                human_ms(call.duration_ms),
                safe(human_usage(call.usage)),
                human_cost(call.cost),
                *([str(len(call.redactions))] if redacted else []),
                *([_REPLAYS_FROM.get(call.replays_from or "", "events")] if proxied else []),
                *([safe(human_answer(call))] if answers else []),
                safe(one_line(call.error_message)) if call.error_message else "",
            ]
            for call in report.calls
        ]
        headings = [
            "CALL",
            *(["SESSION"] if sessions else []),
            *(["LANE"] if lanes else []),
            "API",
            "PROVIDER",
            "MODEL",
            "EVENTS",
            "OUTCOME",
            "FIRST",
            "DURATION",
            "TOKENS",
            "COST",
            *(["REDACTED"] if redacted else []),
            *(["REPLAYS"] if proxied else []),
            *(["ANSWERED BY"] if answers else []),
            "ERROR",
        ]
        lines.extend(table(headings, rows))
        if redacted:
            lines.append("")
            lines.append(
                f"redaction replaced part of the model's output in {len(redacted)} call(s); a replay "
                "serves [secret removed] there:"
            )
            for call in redacted:
                where = ", ".join(
                    f"{item['path']} ({', '.join(item['rules'])})" for item in call.redactions
                )
                lines.append(f"  call {call.call_index}: {safe(where)}")
        withheld = [call for call in report.calls if call.withheld]
        if proxied:
            lines.append("")
            lines.append(
                "REPLAYS: through openprogram proxy, a call replays the vendor's own answer byte for byte "
                "(vendor), or its events written in the client's wire format (events)"
            )
            for call in withheld:
                lines.append(f"  call {call.call_index}: {safe(call.withheld or '')}")
    return "\n".join(lines)


#: The REPLAYS column of ``show``.
_REPLAYS_FROM = {"vendor": "vendor", "events": "events"}


def human_ms(milliseconds: int | None) -> str:
    """A call timing (``t``): ``-`` for a file written before timings."""
    if milliseconds is None:
        return "-"
    return f"{milliseconds} ms" if milliseconds < 10_000 else f"{milliseconds / 1000:.1f} s"


def human_usage(usage: dict[str, int] | None) -> str:
    """``IN in / OUT out[ (R reasoning)][ / C cache]``: the reasoning tokens are part of OUT."""
    if not usage:
        return "-"
    text = f"{usage.get('input', 0)} in / {usage.get('output', 0)} out{reasoning_note(usage)}"
    cached = (usage.get("cache_read") or 0) + (usage.get("cache_write") or 0)
    return f"{text} / {cached} cache" if cached else text


def human_cost(cost: float | None) -> str:
    """A call's cost, six decimals (a small model's call costs fractions of a cent)."""
    return "-" if cost is None else f"${cost:.6f}"


def usage_total(calls: list[CallSummary]) -> str:
    """The recording's usage summed: what its calls cost live, and a replay does not pay."""
    sums = {
        name: sum(int((call.usage or {}).get(name) or 0) for call in calls)
        for name in ("input", "cache_read", "output", "reasoning")
    }
    cost = sum(call.cost or 0.0 for call in calls)
    return (
        f"{sums['input']} in / {sums['cache_read']} cache read / {sums['output']} out"
        f"{reasoning_note(sums)}, {human_cost(cost)} (what a replay does not pay)"
    )


def render_cache(steps: list[Any]) -> str:
    """``show --cache``: each call against the call before it in its lane (tools, system
    prompt, messages, as vendors cache them): the share of that request it keeps as a prefix,
    where the prefix breaks, and the cached tokens the vendor reported."""
    if not steps:  # a recording holding only its header
        return "prompt cache: the recording holds no calls to compare"
    sessions = len({step.session for step in steps}) > 1
    rows = [
        [
            str(step.call_index),
            *([str(step.session)] if sessions else []),
            safe(step.lane or "-"),
            "-" if step.previous is None else str(step.previous),
            "-" if step.kept_share is None else f"{step.kept_share:.0%}",
            "-" if step.cache_read is None else str(step.cache_read),
            "-" if step.prompt_tokens is None else str(step.prompt_tokens),
            safe(step.breaks_at) if step.breaks_at else "-",
        ]
        for step in steps
    ]
    headings = [
        "CALL",
        *(["SESSION"] if sessions else []),
        "LANE",
        "AFTER",
        "KEPT",
        "CACHED",
        "PROMPT",
        "BREAKS AT",
    ]
    right = frozenset({4, 5, 6} if sessions else {3, 4, 5})  # KEPT, CACHED, PROMPT
    broken = [step for step in steps if step.broken]
    lines = [
        "prompt cache: each call against the call before it in its lane, in the order vendors cache "
        "(tools, system prompt, messages); KEPT is the share of that request kept as a prefix, CACHED the "
        "cached tokens the vendor reported, PROMPT every prompt token",
        *table(headings, rows, right=right),
    ]
    lines.append(
        f"{len(broken)} call(s) break the prefix before the turns they added"
        if broken
        else "every call keeps the whole request before it as a prefix"
    )
    return "\n".join(lines)


def human_answer(call: CallSummary) -> str:
    """The model version that answered and the vendor's id of the answer."""
    return (
        answered_by({"response_model": call.response_model, "response_id": call.response_id}) or "-"
    )


def one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# ----------------------------------------------------------------------------- list


def render_list(infos: list[RecordingInfo], now: float) -> str:
    rows = []
    for info in infos:
        rows.append(
            [
                "*" if info.active else "",
                safe(info.id if info.managed and info.id else info.path),
                info.state,
                _count(info.calls),
                _count(info.events),
                "-" if info.size is None else human_size(info.size),
                "-" if info.mtime is None else human_age(now - info.mtime),
                safe(info.reason or ""),
            ]
        )
    lines = table(
        ["", "ID", "STATE", "CALLS", "EVENTS", "SIZE", "AGE", "NOTE"],
        rows,
        right=frozenset({3, 4, 5, 6}),
    )
    if any(info.active for info in infos):
        lines.append("(* = the active recording)")
    return "\n".join(lines)


def render_folder(rows: list[Any], now: float) -> str:
    """``list FOLDER``: one line per recording below the folder, by its path there."""
    table_rows = [
        [
            safe(row.name),
            row.state,
            _count(row.calls),
            _count(row.sessions),
            "-" if row.size is None else human_size(row.size),
            "-" if row.mtime is None else human_age(now - row.mtime),
            safe(row.reason or ""),
        ]
        for row in rows
    ]
    return "\n".join(
        table(
            ["NAME", "STATE", "CALLS", "SESSIONS", "SIZE", "AGE", "NOTE"],
            table_rows,
            right=frozenset({2, 3, 4, 5}),
        )
    )


def folder_json(folder: Path, rows: list[Any], now: float) -> dict[str, Any]:
    """The stable ``list FOLDER --json`` schema (docs/recordings-cli.md)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "folder": str(folder.absolute()),
        "recordings": [row.to_json(now) for row in rows],
    }


def diff_json(result: Any) -> dict[str, Any]:
    """The stable ``diff --json`` schema (docs/recordings-cli.md): the comparison's document
    under the ``schema_version`` every ``--json`` document has."""
    return {"schema_version": SCHEMA_VERSION, **result.as_json()}


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


# ----------------------------------------------------------------------------- formatting


def table(
    headers: list[str], rows: list[list[str]], right: frozenset[int] = frozenset()
) -> list[str]:
    """Aligned columns (numbers right-aligned); the last column is never padded. Without rows,
    the headers alone."""
    widths = [max([len(headers[i]), *(len(row[i]) for row in rows)]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        parts = []
        for index, cell in enumerate(cells):
            if index == len(cells) - 1:
                parts.append(cell)
            elif index in right:
                parts.append(cell.rjust(widths[index]))
            else:
                parts.append(cell.ljust(widths[index]))
        return "  ".join(parts).rstrip()

    return [line(headers), *(line(row) for row in rows)]


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def human_age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds // length}{unit}"
    return f"{seconds}s"


def now() -> float:
    return time.time()


def render_diff(result: Any) -> str:
    """``recordings diff`` for people: each differing call with its first request difference
    and what came back differently, then the summary line."""
    lines = [f"A: {safe(result.path_a)}", f"B: {safe(result.path_b)}"]
    for call in result.calls:
        if call.status == "same":
            lines.append(f"call {call.call_index}: same")
            continue
        if call.status in ("only_in_a", "only_in_b"):
            lines.append(
                f"call {call.call_index}: only in {'A' if call.status == 'only_in_a' else 'B'}"
            )
            continue
        lines.append(f"call {call.call_index}: different")
        if call.request_difference is not None:
            difference = call.request_difference
            lines.append(f"  request differs first at {safe(difference['field_path'])}:")
            lines.append(f"    A: {_value(difference['a'])}")
            lines.append(f"    B: {_value(difference['b'])}")
        for difference in call.response_differences:
            lines.append(f"  response {safe(difference['field'])}:")
            lines.append(f"    A: {_value(difference['a'])}")
            lines.append(f"    B: {_value(difference['b'])}")
    lines.append(result.summary())
    return "\n".join(lines)


def _value(value: Any) -> str:
    """A differing value on one line: ``repr`` escapes most controls inside strings, but not
    those of dict keys printed bare nor every Unicode control, hence :func:`safe` too."""
    return safe(one_line(repr(value)))
