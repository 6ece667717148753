"""``openprogram proxy`` on the command line: its start-up lines, a session of its own, and the
usage errors it reports instead of starting."""

from __future__ import annotations

import subprocess

import pytest

from openprogram.proxy import ProxySettings, start_proxy
from openprogram.proxy.server import startup_lines
from tests.conftest import PYTHON, cli_env
from tests.transcripts import openai_completions_streams as c
from tests.vendor_server import ScriptedResponse, VendorServer


@pytest.fixture
def recording(tmp_path):
    """A recording of one Chat Completions call, made through a proxy."""
    import openai

    path = tmp_path / "one.jsonl"
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=c.PLAIN_TEXT))
        settings = ProxySettings(
            upstreams={"openai-completions": server.url + "/v1"}, recording=path, mode="record"
        )
        with start_proxy(settings) as proxy:
            stream = openai.OpenAI(
                base_url=proxy.url + "/v1", api_key="sk-x"
            ).chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            list(stream)
    return path


def test_the_command_says_where_it_listens_the_mode_the_file_and_what_to_set(
    recording, isolated_home
):
    import openai

    process = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "openprogram",
            "proxy",
            "--port",
            "0",
            "--mode",
            "replay",
            "--recording",
            str(recording),
        ],
        env=cli_env(isolated_home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = process.stdout.readline()  # printed once the socket listens
        assert first.startswith("openprogram proxy: listening on http://127.0.0.1:")
        assert first.rstrip().endswith(f"(mode replay, recording {recording})")
        url = first.split("listening on ", 1)[1].split(" ", 1)[0]
        lines = [process.stdout.readline().strip() for _ in range(5)]
        assert lines[1:4] == [
            f"export OPENAI_BASE_URL={url}/v1",
            f"export ANTHROPIC_BASE_URL={url}",
            f"export GOOGLE_GEMINI_BASE_URL={url}",
        ]
        assert "never recorded" in lines[4]
        answer = openai.OpenAI(
            base_url=url + "/v1", api_key="unused", max_retries=0
        ).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content == "Hello world!"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_live_modes_name_where_calls_go():
    settings = ProxySettings(upstreams={"openai-completions": "http://127.0.0.1:11434/v1"})
    lines = startup_lines("http://127.0.0.1:8765", settings)
    assert lines[0] == "openprogram proxy: listening on http://127.0.0.1:8765 (mode off)"
    assert "openai-completions http://127.0.0.1:11434/v1" in lines[-2]
    assert "anthropic-messages https://api.anthropic.com" in lines[-2]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--upstream", "openai-completions"], "--upstream takes API=URL"),
        (["--upstream", "bedrock=http://127.0.0.1:1"], "unknown api 'bedrock'"),
        (["--upstream", "anthropic-messages=ftp://host"], "must be an http(s) URL"),
        (["--mode", "record"], "a mode needs a recording file"),
        (["--port", "70000"], "--port must be between 0 and 65535"),
    ],
)
def test_usage_errors_are_reported_before_starting(arguments, message, isolated_home):
    result = subprocess.run(
        [PYTHON, "-m", "openprogram", "proxy", *arguments],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_recording_that_cannot_replay_is_reported(tmp_path, isolated_home):
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not a recording\n")
    result = subprocess.run(
        [PYTHON, "-m", "openprogram", "proxy", "--port", "0", "--recording", str(broken)],
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert str(broken) in result.stderr and "Traceback" not in result.stderr


def _project(tmp_path, table: str):
    project = tmp_path / "project"
    project.mkdir()
    (project / ".git").mkdir()
    (project / "pyproject.toml").write_text(table)
    return project


def test_the_command_reads_the_project_s_upstream_table(tmp_path, isolated_home):
    """``[tool.openprogram.proxy.upstream]`` names where live calls go, for the command as for
    the llm_proxy fixture; ``--upstream`` wins over it."""
    import openai

    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=c.PLAIN_TEXT))
        project = _project(
            tmp_path,
            f'[tool.openprogram.proxy.upstream]\n"openai-completions" = "{server.url}/v1"\n',
        )
        process = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "openprogram",
                "proxy",
                "--port",
                "0",
                "--mode",
                "record",
                "--recording",
                str(tmp_path / "r.jsonl"),
            ],
            env=cli_env(isolated_home),
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            first = process.stdout.readline()
            url = first.split("listening on ", 1)[1].split(" ", 1)[0]
            lines = [process.stdout.readline().strip() for _ in range(5)]
            assert f"openai-completions {server.url}/v1" in lines[4]
            stream = openai.OpenAI(
                base_url=url + "/v1", api_key="sk-test-cli-0123456789", max_retries=0
            ).chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            assert (
                "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
                == "Hello world!"
            )
        finally:
            process.terminate()
            process.wait(timeout=30)
        assert len(server.requests) == 1


def test_a_bad_upstream_table_is_a_usage_error_naming_the_file(tmp_path, isolated_home):
    project = _project(
        tmp_path, '[tool.openprogram.proxy.upstream]\n"openai-completions" = "ftp://host"\n'
    )
    result = subprocess.run(
        [PYTHON, "-m", "openprogram", "proxy", "--port", "0"],
        env=cli_env(isolated_home),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert (
        "pyproject.toml" in result.stderr
        and "proxy.upstream" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_without_its_extra_the_proxy_names_the_packages_to_install(monkeypatch):
    """Not the extra by the project's name: on PyPI ``openprogram`` is another project
    (docs/install.md). The command installs the packages the extra declares."""
    import importlib.util
    import tomllib

    from openprogram.cli.errors import CliError
    from openprogram.cli.proxy_cmd import _check_installed
    from tests.conftest import REPO_ROOT

    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["proxy"]
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *rest: None if name == "starlette" else real(name, *rest),
    )
    with pytest.raises(CliError) as caught:
        _check_installed()
    wanted = " ".join(f"'{requirement}'" for requirement in declared)
    assert (
        str(caught.value)
        == f"openprogram proxy needs starlette (its proxy extra): pip install {wanted}"
    )
