"""``diff`` and ``doctor``: two recordings side by side, call by call.

``diff`` says what differs (:mod:`openprogram.recordings.views.comparison`); ``doctor`` which
of it is only volatile and the rules that make a replay overlook it
(:mod:`openprogram.recordings.insight.doctor`). Either file missing or invalid is exit 2.
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_USAGE, CliError
from ..terminal import terminal_safe
from . import render
from .console import print_json, warn_content
from .selecting import resolve_for_reading
from .verb import VerbGroup, json_flag

VERBS = VerbGroup()


def _diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="recording ID or path")
    parser.add_argument("b", metavar="B", help="recording ID or path")
    json_flag(parser)


@VERBS.verb(
    "diff",
    "compare two recordings call by call (exit 0 same, 1 different, 2 invalid)",
    arguments=_diff_arguments,
)
def run_diff(args: argparse.Namespace) -> int:
    """Exit 0 when the recordings agree (apart from non-deterministic fields), 1 when they
    differ, 2 when either is missing or invalid."""
    from openprogram.config import ConfigError
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.views.comparison import diff_recordings
    from openprogram.recordings.views.inspection import read_recording

    recordings = []
    for selector in (args.a, args.b):
        try:
            recordings.append(read_recording(resolve_for_reading(selector)))
        except RecordingFileError as error:
            raise CliError(str(error), EXIT_USAGE) from None
        except (CliError, ConfigError) as error:
            raise CliError(str(error), EXIT_USAGE) from None
    result = diff_recordings(*recordings)
    if args.json:
        print_json(render.diff_json(result))
    else:
        print(render.render_diff(result))
    return 0 if result.identical else 1


@VERBS.verb(
    "doctor",
    "propose ignore/normalize rules for what two recordings of one run differ in only because it is "
    "volatile (exit 0 nothing else differs, 1 something does, 2 invalid)",
    arguments=_diff_arguments,
)
def run_doctor(args: argparse.Namespace) -> int:
    """Exit 0 when the recordings differ only in volatile values (the rules cover it all), 1
    when something else differs too, 2 when either is missing or invalid."""
    from openprogram.config import ConfigError
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.insight.doctor import diagnose, render_report
    from openprogram.recordings.views.inspection import read_recording

    recordings = []
    for selector in (args.a, args.b):
        try:
            recordings.append(read_recording(resolve_for_reading(selector)))
        except (RecordingFileError, CliError, ConfigError) as error:
            raise CliError(str(error), EXIT_USAGE) from None
    report = diagnose(recordings[0].calls, recordings[1].calls)
    warn_content()
    if args.json:
        print_json({**report.to_json(), "a": str(recordings[0].path), "b": str(recordings[1].path)})
    else:
        print(
            terminal_safe(
                render_report(report, recordings[0].path, recordings[1].path), multiline=True
            )
        )
    return 0 if report.clean else 1
