"""``openprogram.providers.stream`` is the facade's function however modules are imported
(the contract's name), and ``from openprogram.providers.stream import ...`` keeps working
(docs/tutorial.md writes it). Importing a submodule sets it on its package, so the order of
first imports is what this checks: each order in a fresh interpreter of its own, since an
interpreter that has imported the modules once cannot show another order."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

FIRST_IMPORTS = (
    "import openprogram.providers.stream",  # the old module path, as a module
    "from openprogram.providers import stream",  # the package's lazy attribute
    "import openprogram.agent.loop",  # a library module that imports the facade itself
)

CHECK = """
import sys
import openprogram.providers as providers
import openprogram.providers.facade as facade
from openprogram.providers.stream import complete, stream_simple

assert providers.stream is facade.stream, providers.stream
assert providers.stream_simple is stream_simple is facade.stream_simple
assert complete is facade.complete
assert sys.modules["openprogram.providers.stream"] is facade
"""


@pytest.mark.parametrize(
    "order", list(itertools.permutations(FIRST_IMPORTS)), ids=lambda o: " / ".join(o)
)
def test_the_package_attribute_is_the_function_in_every_import_order(order):
    script = "\n".join(order) + "\n" + CHECK
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
