"""Project configuration (docs/project.md): the models and record/replay rules a project
commits, found from the current directory upward."""

from __future__ import annotations

import json

import pytest

from openprogram.project import find_project_file, project_config
from openprogram.providers.models import get_model
from openprogram.state import ConfigError, config_path

PYPROJECT = """\
[project]
name = "my-agent"

[[tool.openprogram.models]]
id = "smollm2"
api = "openai-completions"
provider = "llamacpp"
base_url = "http://127.0.0.1:8765/v1"
context_window = 2048

[tool.openprogram.record_replay]
ignore = ["options.metadata.*"]
normalize = [["\\\\d{4}-\\\\d\\\\d-\\\\d\\\\d", "<date>"]]
secret_env = ["INTERNAL_TOKEN"]
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "my-agent"
    (root / "tests" / "deep").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    monkeypatch.chdir(root / "tests" / "deep")
    return root


def test_a_clone_finds_the_projects_models_from_any_folder_below_it(project):
    assert find_project_file() == project / "pyproject.toml"
    model = get_model("llamacpp/smollm2")
    assert (model.api, model.base_url, model.context_window) == (
        "openai-completions",
        "http://127.0.0.1:8765/v1",
        2048,
    )
    rules = project_config().record_replay
    assert rules == {
        "ignore": ["options.metadata.*"],
        "normalize": [["\\d{4}-\\d\\d-\\d\\d", "<date>"]],
        "secret_env": ["INTERNAL_TOKEN"],
    }


def test_the_users_configuration_overrides_a_project_model_of_the_same_provider_and_id(
    project, isolated_home
):
    config = config_path()
    config.parent.mkdir(parents=True, exist_ok=True)
    mine = {
        "id": "smollm2",
        "api": "openai-completions",
        "provider": "llamacpp",
        "base_url": "http://127.0.0.1:9999/v1",
    }
    config.write_text(json.dumps({"models": [mine]}))
    assert get_model("llamacpp/smollm2").base_url == "http://127.0.0.1:9999/v1"
    config.write_text(json.dumps({"models": []}))
    assert (
        get_model("llamacpp/smollm2").base_url == "http://127.0.0.1:8765/v1"
    )  # read again: it changed


def test_an_openprogram_toml_works_and_a_pyproject_without_the_table_is_passed_by(
    tmp_path, monkeypatch
):
    (tmp_path / "openprogram.toml").write_text(
        '[[models]]\nid = "qwen"\napi = "openai-completions"\nprovider = "ollama"\nbase_url = "http://127.0.0.1:11434/v1"\n'
    )
    inner = tmp_path / "service"
    inner.mkdir()
    (inner / "pyproject.toml").write_text(
        '[project]\nname = "service"\n\n[tool.ruff]\nline-length = 100\n'
    )
    monkeypatch.chdir(inner)
    assert find_project_file() == tmp_path / "openprogram.toml"
    assert get_model("ollama/qwen").base_url == "http://127.0.0.1:11434/v1"


def test_a_project_file_changed_is_read_again(project):
    assert get_model("llamacpp/smollm2").context_window == 2048
    (project / "pyproject.toml").write_text(
        PYPROJECT.replace("context_window = 2048", "context_window = 4096")
    )
    assert get_model("llamacpp/smollm2").context_window == 4096


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            '[[tool.openprogram.models]]\nid = "x"\napi = "openai-completions"\n',
            "pyproject.toml: tool.openprogram.models[0]: provider: Field required",
        ),
        (
            '[tool.openprogram]\nmodel = "faux/echo"\n',
            "pyproject.toml: tool.openprogram.model: unknown key; a project file takes models, record_replay, proxy",
        ),
        (
            "[tool.openprogram.proxy]\nupstreams = {}\n",
            "tool.openprogram.proxy must be a table with one key, upstream",
        ),
        (
            '[tool.openprogram.proxy.upstream]\n"openai-completions" = 8080\n',
            "tool.openprogram.proxy.upstream must be a table of API = URL strings",
        ),
        (
            '[tool.openprogram.record_replay]\nmode = "record"\n',
            "tool.openprogram.record_replay.mode: not a project setting",
        ),
        (
            '[tool.openprogram.record_replay]\nnormalize = [["(", "x"]]\n',
            "tool.openprogram.record_replay.normalize:",
        ),
        (
            '[tool.openprogram.record_replay]\nsecret_env = ["9LIVES"]\n',
            "tool.openprogram.record_replay.secret_env: '9LIVES' is not an environment variable name",
        ),
        ("[tool.openprogram\nmodels = 1\n", "pyproject.toml is not valid TOML"),
        (
            '[tool.openprogram.record_replay]\ncache_stable = "yes"\n',
            "tool.openprogram.record_replay.cache_stable must be true or false, not 'yes'",
        ),
        (
            "[tool.openprogram.budget]\ncalls = 2.5\n",
            "tool.openprogram.budget.calls must be a whole number, 0 or more; not 2.5",
        ),
        (
            "[tool.openprogram.budget]\ncost = -1\n",
            "tool.openprogram.budget.cost must be a number of dollars (0.05), 0 or more; not -1",
        ),
        (
            "[tool.openprogram.budget]\nmoney = 1\n",
            "tool.openprogram.budget.money: unknown limit; a budget takes calls, tokens, cost, e.g. \n[tool.openprogram.budget]\ncalls = 10",
        ),
        (
            "[tool.openprogram]\nbudget = 5\n",
            "tool.openprogram.budget must be a table of calls, tokens, cost, not 5",
        ),
    ],
)
def test_errors_name_the_file_the_key_and_the_fix(tmp_path, monkeypatch, table, message):
    (tmp_path / "pyproject.toml").write_text(table)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        project_config()
    assert message in str(caught.value)
    assert str(tmp_path / "pyproject.toml") in str(caught.value)


def test_a_budget_and_cache_stable_are_project_settings(tmp_path, monkeypatch):
    (tmp_path / "openprogram.toml").write_text(
        "[budget]\ncalls = 4\ncost = 0.5\n[record_replay]\ncache_stable = true\n"
    )
    monkeypatch.chdir(tmp_path)
    project = project_config()
    assert project.budget == {"calls": 4, "cost": 0.5}
    assert project.record_replay == {"cache_stable": True}
    (tmp_path / "openprogram.toml").write_text("[budget]\ntokens = 1.5\n")
    with pytest.raises(
        ConfigError,
        match=r"openprogram.toml: budget.tokens must be a whole number, 0 or more; not 1.5$",
    ):
        project_config()


def test_an_unknown_model_names_both_places_a_model_can_be_defined(project):
    with pytest.raises(LookupError) as caught:
        get_model("llamacpp/missing")
    message = str(caught.value)
    assert f"the project's {project / 'pyproject.toml'}" in message
    assert "openprogram config set models" in message
    assert "llamacpp/smollm2" in message  # the project's model is among the known ones


def test_without_a_project_the_error_says_where_one_would_go(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        LookupError, match=r"a \[tool.openprogram\] table in the project's pyproject.toml"
    ):
        get_model("llamacpp/smollm2")


def test_the_activation_plan_takes_the_projects_rules_before_the_users(project, isolated_home):
    from openprogram.recordings.store.activation import plan_activation

    config = {
        "record_replay": {
            "mode": "record",
            "file": "demo",
            "ignore": ["options.metadata.user"],
            "secret_env": ["MINE"],
        }
    }
    plan = plan_activation(config)
    assert plan.problem is None, plan.reason
    assert plan.ignore == ("options.metadata.*", "options.metadata.user")
    assert plan.normalize == (("\\d{4}-\\d\\d-\\d\\d", "<date>"),)
    assert plan.secret_env == ("INTERNAL_TOKEN", "MINE")


def test_an_invalid_project_blocks_the_plan_naming_the_file(tmp_path, monkeypatch, isolated_home):
    from openprogram.recordings.store.activation import plan_activation

    (tmp_path / "openprogram.toml").write_text('[record_replay]\nignore = "everything"\n')
    monkeypatch.chdir(tmp_path)
    plan = plan_activation({"record_replay": {"mode": "record", "file": "demo"}})
    assert plan.problem == "invalid_project"
    assert (
        f"{tmp_path / 'openprogram.toml'}: record_replay.ignore must be a list of field patterns"
        in plan.reason
    )


@pytest.mark.slow
def test_the_plugin_replays_with_the_projects_rules(pytester):
    """A project's normalize rule makes a volatile date in the prompt replay green."""
    pytester.makefile(
        ".toml",
        pyproject='[tool.openprogram.record_replay]\nnormalize = [["\\\\d{4}-\\\\d\\\\d-\\\\d\\\\d", "<date>"]]\n',
    )
    pytester.makepyfile(
        test_dated="""
import os
import pytest
from openprogram.providers.stream import complete
from openprogram.providers.types import Context, Model, UserMessage

@pytest.mark.llm_recording
async def test_dated():
    prompt = "today is " + os.environ["TODAY"]
    message = await complete(Model(id="echo", api="faux", provider="faux"), Context(messages=[UserMessage(content=prompt)]))
    assert message.content[0].text.startswith("echo: today is")
"""
    )
    args = (
        "-p",
        "asyncio",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-q",
    )
    pytester._monkeypatch.setenv("TODAY", "2026-12-01")
    pytester.runpytest_subprocess(*args, "--llm-record-mode=record").assert_outcomes(passed=1)
    pytester._monkeypatch.setenv("TODAY", "2026-12-02")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    (pytester.path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    pytester.runpytest_subprocess(*args).assert_outcomes(failed=1)  # without the rule it drifts
