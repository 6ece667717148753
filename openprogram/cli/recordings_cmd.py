"""The old home of ``openprogram recordings``, kept importable: the verbs now live in
:mod:`openprogram.cli.recordings` by group, wired in :mod:`openprogram.cli.recordings.command`."""

from __future__ import annotations

from .recordings.command import VERBS, add_parser, run
from .recordings.verb import Verb

__all__ = ["VERBS", "Verb", "add_parser", "run"]
