"""Importing the provider package defines names only: nothing registered, no configuration
read, no recording opened, no transform installed, no vendor SDK imported."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import PYTHON, cli_env

PROBE = r"""
import json, os, sys
home = os.environ["OPENPROGRAM_HOME"]
opened = []
def audit(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith(home):
        opened.append(args[0])
sys.addaudithook(audit)

import openprogram.providers as providers
from openprogram.providers import (api_registry, assembly, credentials, faux, guard, initialization,
    models, partial_json, register, stream, types)
from openprogram.providers.vendors import common
names = [providers.UserMessage, providers.stream_simple, providers.FauxProvider]
print(json.dumps({
    "registered": api_registry.registered_apis(),
    "transform": api_registry.installed_transform() is not None,
    "state": initialization.runtime_state(),
    "opened": opened,
    "vendor_modules": sorted(m for m in sys.modules if m.split(".")[0] in ("openai", "anthropic", "google", "httpx")),
    "config_loaded": "openprogram.config" in sys.modules,
}))
"""


def test_importing_providers_has_no_side_effects(isolated_home):
    (isolated_home / "config.json").write_text('{"record_replay": {"mode": "replay", "file": "x"}}')
    completed = subprocess.run(
        [PYTHON, "-c", PROBE],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(completed.stdout)
    assert report == {
        "registered": [],
        "transform": False,
        "state": "NEW",
        "opened": [],
        "vendor_modules": [],
        "config_loaded": False,
    }
