"""What a recorded test's calls spend and break, in pytest: the usage report (``--llm-usage``,
``-v``, ``--llm-usage-json``), budgets (the marker's ``budget=`` and the project's
``[tool.openprogram.budget]``), the prompt-cache check (``cache_stable=True``, the project's
``record_replay.cache_stable``) and ``--llm-doctor``. docs/tutorial.md, "What an agent suite
spends and breaks".

A part of the plugin :mod:`openprogram.testing` (loaded by it); the accounting is
:mod:`openprogram.recordings.insight`'s. A run that asks for none of these does nothing here
but look at its options: a replayed call's usage is read from the recording once the test has
run (one look at each served call's final message), a live call's from the final message the
test's call watch already sees, and requests are kept only for the prompt-cache check.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import shlex
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from openprogram.testing.options import MARKER
from openprogram.testing.session import LlmRecording

if TYPE_CHECKING:
    from openprogram.recordings.insight.budget import Budget
    from openprogram.recordings.insight.cache_prefix import CacheCall
    from openprogram.recordings.insight.usage import CallUsage

#: The title of the terminal section of the usage report.
USAGE_SECTION = "openprogram usage"
#: The ``user_properties`` key that carries a test's usage to the terminal summary (under
#: pytest-xdist, from the worker that ran it).
USAGE_PROPERTY = "openprogram_usage"
#: The title of the terminal section of ``--llm-doctor``, and the key that carries a test's
#: report to it.
DOCTOR_SECTION = "openprogram doctor"
DOCTOR_PROPERTY = "openprogram_doctor"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("openprogram", "openprogram LLM recordings")
    group.addoption(
        "--llm-usage",
        action="store_true",
        default=False,
        help="print the tokens and cost of each recorded test's model calls, the totals and what "
        "replaying saved (also shown with -v)",
    )
    group.addoption(
        "--llm-usage-json",
        default=None,
        metavar="PATH",
        help="write the usage report as JSON to PATH (docs/usage-report.schema.json)",
    )
    group.addoption(
        "--llm-doctor",
        action="store_true",
        default=False,
        help="run each selected recorded test twice live (its recording is left alone) and propose the "
        "ignore/normalize rules for what differs between the two runs only because it is volatile",
    )


def pytest_configure(config: pytest.Config) -> None:
    """``--llm-doctor`` runs the tests live: each body twice, recorded into the report folder."""
    if not config.getoption("--llm-doctor"):
        return
    mode = config.getoption("--llm-record-mode")
    if mode not in (None, "off"):
        raise pytest.UsageError(
            f"--llm-doctor runs each test twice live and leaves its recording alone; drop --llm-record-mode={mode}"
        )
    config.option.llm_record_mode = "off"


# ============================================================================ settings


@dataclass(frozen=True)
class Settings:
    """What this plugin does for one test."""

    usage: bool
    budget: Budget | None
    cache_stable: bool


def usage_wanted(config: pytest.Config) -> bool:
    return bool(
        config.getoption("--llm-usage")
        or config.getoption("--llm-usage-json")
        or config.getoption("verbose", 0) > 0
    )


def settings_of(item: pytest.Item) -> Settings:
    """The test's budget (the marker's over the project's, key by key) and whether its calls
    must keep the prompt cache's prefix (the marker's ``cache_stable``, else the project's)."""
    from openprogram.recordings.insight.budget import Budget

    default, project_stable = _project_defaults(item.config)
    marker = item.get_closest_marker(MARKER)
    keywords = marker.kwargs if marker is not None else {}
    budget = default
    if "budget" in keywords:
        try:
            own = Budget.parse(keywords["budget"], f"@pytest.mark.{MARKER}(budget=...)")
        except ValueError as error:
            pytest.fail(str(error), pytrace=False)
        budget = own.over(budget)
    stable = keywords.get("cache_stable", project_stable)
    if type(stable) is not bool:
        pytest.fail(
            f"@pytest.mark.{MARKER}(cache_stable=...) takes True or False, not {stable!r}",
            pytrace=False,
        )
    return Settings(usage=usage_wanted(item.config), budget=budget or None, cache_stable=stable)


_PROJECT_DEFAULTS = pytest.StashKey[tuple["Budget", bool]]()


def _project_defaults(config: pytest.Config) -> tuple[Budget, bool]:
    """The project's budget and ``record_replay.cache_stable``, read once per run (the plugin
    has checked the project file when the run started)."""
    from openprogram.project import project_config
    from openprogram.recordings.insight.budget import Budget
    from openprogram.state import ConfigError

    found = config.stash.get(_PROJECT_DEFAULTS, None)
    if found is None:
        try:
            project = project_config(Path(str(config.rootpath)))
        except ConfigError as error:
            raise pytest.UsageError(f"openprogram project configuration: {error}") from None
        budget = (
            Budget.parse(project.budget, project.where("budget")) if project.budget else Budget()
        )
        found = config.stash[_PROJECT_DEFAULTS] = (
            budget,
            bool(project.record_replay.get("cache_stable", False)),
        )
    return found


# ============================================================================ the test's calls


def _replay_provider(handle: LlmRecording) -> Any:
    scope = handle.scope
    return None if scope is None else scope.replay_provider


def calls_of(handle: LlmRecording) -> list[CallUsage]:
    """The usage of every call the test made: the recorded usage of the calls a replay
    served, else what the vendor reported (the final message each watched call ended with);
    in ``update`` the calls before the drift are the replayed ones."""
    from openprogram.recordings.insight.usage import call_usage, recorded_usage

    replay = _replay_provider(handle)
    if replay is not None:
        return recorded_usage(replay.consumed_calls())
    scope = handle.scope
    replayed = len(scope.update.replayed) if scope is not None and scope.update is not None else 0
    watched = sorted(handle.watch.calls, key=lambda seen: seen.call)
    return [
        call_usage(seen.message, call=seen.call, lane=seen.lane, replayed=seen.call < replayed)
        for seen in watched
    ]


def cache_calls_of(handle: LlmRecording) -> list[CacheCall]:
    """The requests of every call the test made, for the prompt-cache check: the recorded
    ones a replay served, else the ones the watch kept."""
    from openprogram.recordings.insight.cache_prefix import CacheCall, recording_cache_calls
    from openprogram.recordings.insight.usage import call_usage

    replay = _replay_provider(handle)
    if replay is not None:
        return recording_cache_calls(replay.consumed_calls())
    found = []
    for seen in sorted(handle.watch.calls, key=lambda seen: seen.call):
        if seen.request is None:
            continue
        usage = call_usage(seen.message, call=seen.call)
        found.append(
            CacheCall(
                seen.call,
                seen.request,
                lane=seen.lane,
                cache_read=usage.cache_read,
                prompt_tokens=usage.input + usage.cache_read + usage.cache_write,
            )
        )
    return found


# ============================================================================ hooks


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Around the test body (inside the recording session the plugin wraps it in): keep the
    requests when the prompt cache is checked; when the body passed, hold its calls to the
    budget and to the prompt cache's prefix."""
    handle: LlmRecording | None = getattr(item, "_openprogram_recording", None)
    settings = settings_of(item) if handle is not None else None
    if handle is not None and settings is not None and settings.cache_stable:
        handle.watch.keep_requests = True
    doctor = (
        _doctor_paths(item)
        if handle is not None and item.config.getoption("--llm-doctor")
        else None
    )
    function = getattr(item, "obj", None)
    if doctor is not None and handle is not None and function is not None:
        cast(pytest.Function, item).obj = _twice(function, handle, doctor)
    try:
        result = yield
    finally:
        if doctor is not None and function is not None:
            cast(pytest.Function, item).obj = function
    if (
        handle is not None and settings is not None and doctor is None
    ):  # two runs are no one run's spending
        problems = _budget_problems(handle, settings) + _cache_problems(handle, settings)
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
    if doctor is not None:
        item.user_properties.append((DOCTOR_PROPERTY, _diagnosis(doctor)))
    return result


def _budget_problems(handle: LlmRecording, settings: Settings) -> list[str]:
    from openprogram.recordings.insight.budget import budget_overrun

    if settings.budget is None:
        return []
    overruns = budget_overrun(settings.budget, calls_of(handle))
    if not overruns:
        return []
    counted = (
        "the recorded usage of the replayed calls"
        if _replay_provider(handle) is not None
        else "the vendor's usage"
    )
    lines = [f"{handle.nodeid} went over its budget ({counted}):"]
    lines.extend(f"  {overrun.describe()}" for overrun in overruns)
    lines.append(
        f"Make the agent spend less, or raise the limit: @pytest.mark.{MARKER}(budget={{...}}) for this "
        "test, [tool.openprogram.budget] for the project"
    )
    return lines


def _cache_problems(handle: LlmRecording, settings: Settings) -> list[str]:
    from openprogram.recordings.insight.cache_prefix import prefix_steps
    from openprogram.recordings.replay.differences import short_repr

    if not settings.cache_stable:
        return []
    broken = [step for step in prefix_steps(cache_calls_of(handle)) if step.broken]
    if not broken:
        return []
    lines = [f"{handle.nodeid}: calls break the prompt cache's prefix (cache_stable):"]
    for step in broken:
        lane = f" in lane {step.lane!r}" if step.lane else ""
        share = step.kept_share or 0.0
        values = ""
        if step.values is not None:
            values = f": was {short_repr(step.values[0], 80)}, now {short_repr(step.values[1], 80)}"
        lines.append(
            f"  call {step.call_index}{lane} changes {step.breaks_at} of call {step.previous} "
            f"(keeps {share:.0%} of its request as a prefix){values}"
        )
    lines.append(
        "A vendor caches tools, then the system prompt, then the messages, by prefix: keep what changes "
        "(a time, an id) out of them or after the newest turn, keep the tools in one order, and never edit an "
        f"earlier message; or drop cache_stable=True from @pytest.mark.{MARKER}"
    )
    return lines


# ============================================================================ --llm-doctor


def _doctor_paths(item: pytest.Item) -> tuple[Path, Path]:
    """Where the two runs of a test are recorded: its drift page's place in the report folder,
    never beside the committed recordings (the folder ignores itself for git)."""
    from openprogram.recordings.views.view import DRIFT_SUFFIX
    from openprogram.testing.hooks import _ensure_report_folder
    from openprogram.testing.naming import drift_page_path, recording_path

    page = drift_page_path(item.config, recording_path(item))
    stem = page.name.removesuffix(DRIFT_SUFFIX)
    folder = page.parent
    _ensure_report_folder(folder)
    paths = (folder / f"{stem}.doctor-1.jsonl", folder / f"{stem}.doctor-2.jsonl")
    for path in paths:
        path.unlink(missing_ok=True)
    return paths


def _twice(
    function: Callable[..., Any], handle: LlmRecording, paths: tuple[Path, Path]
) -> Callable[..., Any]:
    """``function`` (sync or async) run twice, each run recorded live into one of ``paths``."""

    def recording(path: Path) -> contextlib.AbstractContextManager[Any]:
        from openprogram.recordings.modes.scoped import use_recording

        return use_recording(
            path,
            "record",
            ignore=handle.ignore,
            normalize=handle.normalize,
            values=handle.values,
            secrets=handle.secrets,
        )

    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            result = None
            for path in paths:
                with recording(path):
                    result = await function(*args, **kwargs)
            return result

        return run_async

    @functools.wraps(function)
    def run_sync(*args: Any, **kwargs: Any) -> Any:
        result = None
        for path in paths:
            with recording(path):
                result = function(*args, **kwargs)
        return result

    return run_sync


def _diagnosis(paths: tuple[Path, Path]) -> str:
    """The doctor's report on the two runs of a test."""
    from openprogram.recordings.file.reader import read_recording_file
    from openprogram.recordings.insight.doctor import diagnose, render_report

    first, second = (read_recording_file(path, summary_only=True) for path in paths)
    return render_report(diagnose(first.calls, second.calls), paths[0], paths[1])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """A test's usage, carried in its report to the terminal summary."""
    outcome = yield
    handle: LlmRecording | None = getattr(item, "_openprogram_recording", None)
    if handle is None or call.when != "call" or not usage_wanted(item.config):
        return
    from openprogram.recordings.insight.usage import TestUsage

    report = outcome.get_result()
    # The mode the test ran in: record mode replays a recording that exists.
    mode = "replay" if _replay_provider(handle) is not None else handle.mode
    usage = TestUsage(handle.nodeid, mode, report.outcome, calls_of(handle))
    report.user_properties.append((USAGE_PROPERTY, usage.to_json()))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The ``openprogram doctor`` and ``openprogram usage`` sections, and the JSON report."""
    diagnoses = [
        (report.nodeid, value)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for key, value in getattr(report, "user_properties", ())
        if key == DOCTOR_PROPERTY
    ]
    if diagnoses:
        terminalreporter.write_sep("-", DOCTOR_SECTION)
        for nodeid, text in diagnoses:
            terminalreporter.write_line(f"{nodeid}: two live runs compared")
            for line in str(text).splitlines():
                terminalreporter.write_line(f"  {line}" if line else "")
    if not usage_wanted(config):
        return
    from openprogram.recordings.insight.usage import TestUsage, render_usage, usage_document

    tests = [
        TestUsage.from_json(value)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for key, value in getattr(report, "user_properties", ())
        if key == USAGE_PROPERTY
    ]
    target = config.getoption("--llm-usage-json")
    if target:
        path = Path(str(config.invocation_params.dir)) / Path(str(target)).expanduser()
        try:
            path.write_text(json.dumps(usage_document(tests), indent=2) + "\n")
        except OSError as error:
            terminalreporter.write_line(
                f"openprogram: --llm-usage-json {shlex.quote(str(target))}: cannot write: {error.strerror or error}"
            )
    if not tests:
        return
    terminalreporter.write_sep("-", USAGE_SECTION)
    for line in render_usage(tests):
        terminalreporter.write_line(line)
