"""The facade's first import path, kept for code that imports from it
(``from openprogram.providers.stream import complete``, as docs/tutorial.md writes it).

Importing it gives the facade module itself (:mod:`.facade`, which owns the functions): this
module puts the facade in its place in ``sys.modules``, so that ``import_module`` of either
name, and a test's monkeypatch of either, reach the same module. The package's attribute
``openprogram.providers.stream`` stays the *function* all the same (see the package's
``__init__``)."""

from __future__ import annotations

import sys

from . import facade
from .facade import complete, complete_simple, stream, stream_simple

sys.modules[__name__] = facade

__all__ = ["complete", "complete_simple", "stream", "stream_simple"]
