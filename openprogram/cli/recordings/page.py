"""``view``: a recording, or two side by side, as one self-contained HTML page.

The page is built and its output checked by :mod:`openprogram.recordings.views.view`; this
module picks where it goes (the profile's reports folder unless ``--output`` says otherwise).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import EXIT_FAILURE, EXIT_USAGE, CliError
from .console import say, warn_content
from .selecting import check_id_argument, names_local_file, resolve_for_reading
from .verb import VerbGroup, selector_argument

if TYPE_CHECKING:  # imported where used, so that these commands start fast
    from openprogram.recordings.file.reader import Recording

VERBS = VerbGroup()


def _view_arguments(parser: argparse.ArgumentParser) -> None:
    selector_argument(parser)
    parser.add_argument(
        "--against", metavar="ID-or-PATH", help="compare with this recording, call by call"
    )
    parser.add_argument(
        "--output",
        metavar="FILE",
        help="the .html file to write (default: the profile's reports folder, never beside the recording)",
    )


@VERBS.verb(
    "view",
    "write the recording as one self-contained HTML page (prompts and outputs!)",
    arguments=_view_arguments,
)
def run_view(args: argparse.Namespace) -> int:
    """Write the page (docs/recordings-cli.md, ``view``) and print its path."""
    from openprogram.recordings.store.store import ensure_reports_dir
    from openprogram.recordings.views import view

    output = Path(args.output) if args.output else None
    recording = _read_for_view(args.selector)
    against = _read_for_view(args.against) if args.against is not None else None
    reading = [recording.path] + ([against.path] if against is not None else [])
    if output is None:
        output = view.page_path(
            recording.path, None if against is None else against.path, ensure_reports_dir()
        )
    try:
        view.check_output(output, reading)
    except view.PageOutputError as error:
        raise CliError(
            f"{error}; nothing was written", EXIT_USAGE if error.usage else EXIT_FAILURE
        ) from None
    page = (
        view.render_recording_page(recording)
        if against is None
        else view.render_comparison_page(recording, against)
    )
    try:
        view.write_page(page, output)
    except OSError as error:
        raise CliError(
            f"--output {output}: cannot write: {error.strerror or error}; nothing was written"
        ) from None
    warn_content()
    say(str(output))
    return 0


def _read_for_view(selector: str) -> Recording:
    from openprogram.recordings.file.format import RecordingFileError
    from openprogram.recordings.store.store import is_managed_id
    from openprogram.recordings.views.inspection import read_recording

    if is_managed_id(selector) and not names_local_file(selector):
        check_id_argument(selector)
    try:
        return read_recording(resolve_for_reading(selector))
    except RecordingFileError as error:
        raise CliError(str(error)) from None
