"""config.json: locations, atomic owner-only writes, validation that writes nothing, profiles."""

from __future__ import annotations

import stat

import pytest

from openprogram import config


def mode_of(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_transaction_creates_private_folder_and_file(isolated_home):
    with config.config_transaction() as current:
        config.set_value(current, "default_model", "faux/echo")
    path = config.config_path()
    assert path == isolated_home / "config.json"
    assert mode_of(path) == 0o600
    assert mode_of(isolated_home) == 0o700
    assert config.load_config() == {"default_model": "faux/echo"}


def test_failed_transaction_leaves_the_file_unchanged(isolated_home):
    with config.config_transaction() as current:
        config.set_value(current, "default_model", "faux/echo")
    before = config.config_path().read_bytes()
    with pytest.raises(RuntimeError), config.config_transaction() as current:
        config.set_value(current, "default_model", "openai/gpt-4o-mini")
        raise RuntimeError("interrupted")
    assert config.config_path().read_bytes() == before
    assert not [p for p in isolated_home.iterdir() if p.name.endswith(".tmp")]


def test_whole_config_check_failure_writes_nothing(isolated_home, monkeypatch):
    def refuse(before, after):
        raise config.ConfigError("no")

    monkeypatch.setattr(config, "WHOLE_CONFIG_CHECKS", [refuse])
    with pytest.raises(config.ConfigError), config.config_transaction() as current:
        config.set_value(current, "default_model", "faux/echo")
    assert not config.config_path().exists()


def test_dotted_keys_set_get_unset():
    data: dict = {}
    config.set_value(data, "record_replay.mode", "off")
    config.set_value(data, "record_replay.file", "x")
    assert config.get_value(data, "record_replay.mode") == "off"
    assert config.unset_value(data, "record_replay.mode")
    assert data == {"record_replay": {"file": "x"}}
    assert config.unset_value(data, "record_replay.file")
    assert data == {}
    assert not config.unset_value(data, "missing.key")
    with pytest.raises(KeyError):
        config.get_value(data, "record_replay.mode")


def test_validation_names_the_key_and_the_fix():
    with pytest.raises(config.ConfigError, match="default_model: must look like provider/model-id"):
        config.validate_value("default_model", "gpt")
    with pytest.raises(config.ConfigError, match="unknown configuration key 'colour'"):
        config.validate_value("colour", "blue")
    with pytest.raises(config.ConfigError, match=r"models: entry 0: api"):
        config.validate_value("models", [{"id": "x", "provider": "p"}])
    with pytest.raises(config.ConfigError, match="unknown tool shell"):
        config.validate_value("tools.enabled", ["calculator", "shell"])
    assert config.validate_value("tools.enabled", ["read_file"]) == ["read_file"]


def test_profiles_are_isolated(isolated_home, monkeypatch):
    with config.config_transaction() as current:
        config.set_value(current, "default_model", "faux/echo")
    monkeypatch.setenv("OPENPROGRAM_PROFILE", "work")
    assert config.state_dir() == isolated_home / "profiles" / "work"
    assert config.load_config() == {}
    with config.config_transaction() as current:
        config.set_value(current, "default_model", "openai/gpt-4o-mini")
    assert config.load_config()["default_model"] == "openai/gpt-4o-mini"
    monkeypatch.delenv("OPENPROGRAM_PROFILE")
    assert config.load_config()["default_model"] == "faux/echo"


def test_bad_profile_name_and_corrupt_file_are_clear(isolated_home):
    with pytest.raises(config.ConfigError, match="invalid profile name '../x'"):
        config.state_dir("../x")
    (isolated_home / "config.json").write_text("{not json")
    with pytest.raises(config.ConfigError, match="config.json is not valid JSON"):
        config.load_config()


def test_symlinked_config_file_is_refused(isolated_home, tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    (isolated_home / "config.json").symlink_to(target)
    with (
        pytest.raises(config.ConfigError, match="symbolic link"),
        config.config_transaction() as current,
    ):
        config.set_value(current, "default_model", "faux/echo")
    assert target.read_text() == "{}"
