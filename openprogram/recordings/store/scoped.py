"""``use_recording`` at its old import path: it moved to
:mod:`openprogram.recordings.modes.scoped` (the modes live together there)."""

import sys

from ..modes import scoped as _moved

# The same module object under both names: a test that patches a name of one patches the other.
sys.modules[__name__] = _moved
