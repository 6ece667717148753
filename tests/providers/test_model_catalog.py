"""``get_model`` answers from a catalog built once per process, rebuilt only when the
configuration file changes (counted through ``catalog_builds``, never timed)."""

from __future__ import annotations

import json
import os

import pytest

from openprogram.providers import models
from openprogram.state import config_path


def write_config(entries: list[dict]) -> None:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"models": entries}))


def test_the_catalog_is_built_once_for_many_lookups():
    write_config([{"id": "local", "api": "openai-completions", "provider": "lab"}])
    models.get_model("faux/echo")
    before = models.catalog_builds
    for _ in range(50):
        assert models.get_model("lab/local").provider == "lab"
        assert models.get_model("openai/gpt-5").api == "openai-responses"
    assert models.catalog_builds == before


def test_a_changed_configuration_is_seen_at_the_next_lookup():
    write_config(
        [{"id": "local", "api": "openai-completions", "provider": "lab", "max_tokens": 100}]
    )
    assert models.get_model("lab/local").max_tokens == 100
    write_config(
        [{"id": "local", "api": "openai-completions", "provider": "lab", "max_tokens": 2000}]
    )
    # Same inode, maybe the same mtime tick: the size differs, so the stamp does.
    assert models.get_model("lab/local").max_tokens == 2000
    os.remove(config_path())
    with pytest.raises(LookupError, match="unknown model 'lab/local'"):
        models.get_model("lab/local")


def test_a_configured_model_overrides_a_builtin_of_the_same_name():
    write_config([{"id": "echo", "api": "faux", "provider": "faux", "name": "mine"}])
    assert models.get_model("faux/echo").name == "mine"
    assert models.get_model("faux/echo", include_configured=False).name.startswith("Faux echo")
    names = [f"{m.provider}/{m.id}" for m in models.all_models()]
    assert names.count("faux/echo") == 1 and names[-1] == "faux/echo"


def test_callers_get_copies_they_may_change():
    first = models.get_model("openai/gpt-5")
    first.cost.input = 999.0
    first.input.append("image")
    first.max_tokens = 1
    second = models.get_model("openai/gpt-5")
    assert second.cost.input == 1.25 and second.max_tokens == 128000
    assert second.input == ["text", "image"]


def test_a_broken_configuration_is_reported_on_every_lookup():
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    for _ in range(2):
        with pytest.raises(Exception, match="not valid JSON"):
            models.get_model("faux/echo")
