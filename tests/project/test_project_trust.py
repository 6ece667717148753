"""Trust boundaries of project files and keys (docs/project.md, "Security"): the upward search
stops at the repository or the home and passes by files another user owns or may write; a key
from the environment goes only to its vendor's hosts, loopback, or hosts the user trusts; a
project cannot move a built-in model elsewhere with the user's key."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from openprogram.project import find_project_file, project_config, search_project_file
from openprogram.providers.models import get_model
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage
from openprogram.state import ConfigError, config_path
from tests.cli.test_cli_local_server import ANSWER_TURN
from tests.conftest import PYTHON, cli_env
from tests.vendor_server import ScriptedResponse, VendorServer

KEY = "sk-proj-" + "Zx9Qw2Er7Ty1Ui8Op3As6Df0Gh5Jk4Lz" + "Xc7Vb2Nm9Qa1Ws3Ed"
NOBODY = 65534


def moved_model_table(url: str, *, table: str = "[[models]]") -> str:
    return f'{table}\nid = "gpt-4o-mini"\napi = "openai-completions"\nprovider = "openai"\nbase_url = "{url}/v1"\n'


@pytest.fixture
def shared_tmp(tmp_path):
    """A world-writable sticky folder like /tmp, above a victim's project."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    victim = shared / "victim" / "project"
    victim.mkdir(parents=True)
    return shared, victim


needs_root = pytest.mark.skipif(
    os.getuid() != 0, reason="making a file owned by another user needs root"
)


@needs_root
def test_another_users_file_in_a_shared_parent_changes_nothing_and_says_so_once(
    shared_tmp, monkeypatch, isolated_home, capsys
):
    shared, victim = shared_tmp
    planted = shared / "openprogram.toml"
    planted.write_text(
        moved_model_table("http://127.0.0.1:9")
        + '[record_replay]\nignore = ["context.messages"]\nnormalize = [[".+", "x"]]\n'
    )
    os.chown(planted, NOBODY, NOBODY)
    monkeypatch.chdir(victim)
    assert find_project_file() is None
    config = project_config()
    assert config.path is None and config.record_replay == {}
    assert config.passed_by == (
        f"{planted}: not read, it belongs to user id {NOBODY}, not to you (user id 0); a project file must be yours",
    )
    assert get_model("openai/gpt-4o-mini").base_url == "https://api.openai.com/v1"
    project_config()
    err = capsys.readouterr().err
    assert err.count(str(planted)) == 1  # said once per process, not per lookup


@needs_root
def test_another_users_invalid_toml_above_breaks_nothing(shared_tmp, monkeypatch, isolated_home):
    shared, victim = shared_tmp
    planted = shared / "pyproject.toml"
    planted.write_text("[tool.openprogram\nnot toml")
    os.chown(planted, NOBODY, NOBODY)
    monkeypatch.chdir(victim)
    assert project_config().path is None
    assert get_model("openai/gpt-4o-mini").base_url == "https://api.openai.com/v1"


def test_a_file_others_may_write_is_passed_by_with_the_fix(tmp_path, monkeypatch, isolated_home):
    (tmp_path / "openprogram.toml").write_text(moved_model_table("http://127.0.0.1:9"))
    os.chmod(tmp_path / "openprogram.toml", 0o666)
    monkeypatch.chdir(tmp_path)
    search = search_project_file()
    assert search.path is None
    assert search.passed_by == (
        f"{tmp_path / 'openprogram.toml'}: not read, others may write to it (mode 0666); "
        f"make it yours alone with: chmod go-w {tmp_path / 'openprogram.toml'}",
    )
    os.chmod(tmp_path / "openprogram.toml", 0o644)
    assert search_project_file().path == tmp_path / "openprogram.toml"


def test_a_group_writable_file_counts_only_for_the_users_own_group(tmp_path, monkeypatch):
    project = tmp_path / "openprogram.toml"
    project.write_text("")
    os.chmod(project, 0o664)
    monkeypatch.chdir(tmp_path)
    assert search_project_file().path == project  # the user's own group (a umask of 002)
    if os.getuid() == 0:
        os.chown(project, 0, NOBODY)
        assert search_project_file().path is None


def test_the_search_stops_at_the_repository_root(tmp_path, monkeypatch):
    (tmp_path / "openprogram.toml").write_text(moved_model_table("http://127.0.0.1:9"))
    repository = tmp_path / "checkout"
    (repository / ".git").mkdir(parents=True)
    (repository / "src").mkdir()
    monkeypatch.chdir(repository / "src")
    assert find_project_file() is None
    (repository / "openprogram.toml").write_text("")
    assert find_project_file() == repository / "openprogram.toml"  # the root itself is read


def test_the_search_stops_at_the_home(tmp_path, monkeypatch):
    (tmp_path / "openprogram.toml").write_text(moved_model_table("http://127.0.0.1:9"))
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "work")
    assert find_project_file() is None
    (home / "openprogram.toml").write_text("")
    assert find_project_file() == home / "openprogram.toml"


def test_a_project_file_cannot_set_trusted_hosts(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.openprogram]\ntrusted_hosts = ["evil.example"]\n'
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        project_config()
    assert str(caught.value).startswith(
        f"{tmp_path / 'pyproject.toml'}: tool.openprogram.trusted_hosts: not a project setting"
    )
    assert "openprogram config set trusted_hosts" in str(caught.value)


def _ask(model: Model):
    return complete(model, Context(messages=[UserMessage(content="hi", timestamp=1)]))


async def test_a_repository_cannot_move_a_builtin_model_with_the_users_key(
    tmp_path, monkeypatch, isolated_home
):
    """The repository's own pyproject.toml moves openai/gpt-4o-mini to a local server: the call
    is not sent with the key (the error names the host and the command that trusts it); once the
    user trusts the host, the key goes there."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    with VendorServer() as server:
        (tmp_path / "pyproject.toml").write_text(
            moved_model_table(server.url, table="[[tool.openprogram.models]]")
        )
        model = get_model("openai/gpt-4o-mini")
        assert model.base_url == f"{server.url}/v1"
        refused = await _ask(model)
        assert server.requests == []
        assert refused.stop_reason == "error"
        assert (
            "key not sent to the built-in model openai/gpt-4o-mini moved to 127.0.0.1"
            in refused.error_message
        )
        assert "openprogram config set trusted_hosts '[\"127.0.0.1\"]'" in refused.error_message
        assert KEY[:8] not in refused.error_message
        config_path().parent.mkdir(parents=True, exist_ok=True)
        config_path().write_text(json.dumps({"trusted_hosts": ["127.0.0.1"]}))
        server.queue(ScriptedResponse(chunks=ANSWER_TURN))
        answered = await _ask(get_model("openai/gpt-4o-mini"))
        assert answered.stop_reason == "stop", answered.error_message
        assert [request.headers["authorization"] for request in server.requests] == [
            f"Bearer {KEY}"
        ]


async def test_a_local_server_of_the_project_works_with_no_step(
    tmp_path, monkeypatch, isolated_home
):
    """A project's own model on loopback (not a built-in moved there) gets the key as before."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.chdir(tmp_path)
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=ANSWER_TURN))
        (tmp_path / "openprogram.toml").write_text(
            f'[[models]]\nid = "my-local"\napi = "openai-completions"\nprovider = "openai"\nbase_url = "{server.url}/v1"\n'
        )
        answered = await _ask(get_model("openai/my-local"))
        assert answered.stop_reason == "stop", answered.error_message
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_an_environment_key_never_goes_to_an_untrusted_remote_host(
    monkeypatch, isolated_home
):
    """Refused before anything is sent (no connection is attempted: the host does not exist)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = Model(
        id="gpt-x",
        api="openai-completions",
        provider="openai",
        base_url="https://collector.invalid/v1",
    )
    refused = await _ask(model)
    assert refused.stop_reason == "error"
    assert refused.error_message.startswith("openai: key not sent to collector.invalid:")
    assert "trusted_hosts" in refused.error_message


async def test_the_users_own_configured_model_host_is_trusted(tmp_path, monkeypatch, isolated_home):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.chdir(tmp_path)
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=ANSWER_TURN))
        mine = {
            "id": "gpt-4o-mini",
            "api": "openai-completions",
            "provider": "openai",
            "base_url": f"{server.url}/v1",
        }
        config_path().parent.mkdir(parents=True, exist_ok=True)
        config_path().write_text(json.dumps({"models": [mine]}))
        answered = await _ask(get_model("openai/gpt-4o-mini"))
        assert answered.stop_reason == "stop", answered.error_message
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_trusted_hosts_is_checked_when_set(isolated_home):
    env = cli_env(isolated_home)
    bad = subprocess.run(
        [
            PYTHON,
            "-m",
            "openprogram",
            "config",
            "set",
            "trusted_hosts",
            '["https://gw.example/v1"]',
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert (
        "'https://gw.example/v1' is not a host name" in bad.stderr and "Traceback" not in bad.stderr
    )
    assert not config_path().exists()
    good = subprocess.run(
        [
            PYTHON,
            "-m",
            "openprogram",
            "config",
            "set",
            "trusted_hosts",
            '["gw.example", "10.0.0.5"]',
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(config_path().read_text())["trusted_hosts"] == ["gw.example", "10.0.0.5"]


def test_status_names_the_project_file_and_fails_on_an_invalid_one(tmp_path, isolated_home):
    env = cli_env(isolated_home)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.openprogram.record_replay]\nignore = ["options.metadata.*"]\n'
    )
    shown = subprocess.run(
        [PYTHON, "-m", "openprogram", "recordings", "status"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert f"project   {tmp_path / 'pyproject.toml'}" in shown.stdout.splitlines()
    (tmp_path / "pyproject.toml").write_text("[tool.openprogram]\nbogus = 1\n")
    broken = subprocess.run(
        [PYTHON, "-m", "openprogram", "recordings", "status", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert broken.returncode == 1
    assert json.loads(broken.stdout)["project"] == {
        "path": str(tmp_path / "pyproject.toml"),
        "passed_by": [],
        "problem": f"{tmp_path / 'pyproject.toml'}: tool.openprogram.bogus: unknown key; a project file takes models, record_replay, proxy, budget",
    }


def test_pytest_names_the_project_file_and_reports_an_invalid_one_once(pytester):
    pytester.makepyfile("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    pytester.makepyprojecttoml(
        '[tool.openprogram.record_replay]\nignore = ["options.metadata.*"]\n'
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"openprogram: project file {pytester.path / 'pyproject.toml'}"])
    pytester.makepyprojecttoml("[tool.openprogram]\nbogus = 1\n")
    broken = pytester.runpytest_subprocess()
    assert broken.ret == pytest.ExitCode.USAGE_ERROR
    text = broken.stderr.str() + broken.stdout.str()
    assert text.count("tool.openprogram.bogus: unknown key") == 1
    assert "Traceback" not in text
