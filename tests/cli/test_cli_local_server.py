"""``openprogram run --model <custom local model>`` against an OpenAI-compatible server on
127.0.0.1 that needs no key (the Ollama / vLLM / llama.cpp case), in a subprocess."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import PYTHON, cli_env
from tests.vendor_server import ScriptedResponse, VendorServer, sse

MODEL_ID = "qwen2.5:0.5b"


def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> dict:
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else [],
        **({"usage": usage} if usage else {}),
    }


TOOL_CALL_TURN = sse(
    chunk({"role": "assistant", "content": None}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"expression": '}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"6*7"}'}}]}),
    chunk({}, finish="tool_calls"),
    chunk({}, usage={"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}),
    done=True,
)
ANSWER_TURN = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "It is "}),
    chunk({"content": "42."}),
    chunk({}, finish="stop"),
    chunk({}, usage={"prompt_tokens": 70, "completion_tokens": 4, "total_tokens": 74}),
    done=True,
)


def test_run_with_a_configured_local_model_needs_no_key(isolated_home):
    with VendorServer() as server:
        server.queue(ScriptedResponse(chunks=TOOL_CALL_TURN), ScriptedResponse(chunks=ANSWER_TURN))
        model = {
            "id": MODEL_ID,
            "api": "openai-completions",
            "provider": "ollama",
            "base_url": f"{server.url}/v1",
        }
        env = cli_env(isolated_home)
        setup = subprocess.run(
            [PYTHON, "-m", "openprogram", "config", "set", "models", json.dumps([model])],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert setup.returncode == 0, setup.stderr
        result = subprocess.run(
            [PYTHON, "-m", "openprogram", "run", "--model", f"ollama/{MODEL_ID}", "What is 6*7?"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        requests = list(server.requests)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        '-> calculator({"expression":"6*7"})',
        "<- calculator returned: 42",
        "It is 42.",
    ]
    assert [r.path for r in requests] == ["/v1/chat/completions", "/v1/chat/completions"]
    assert requests[0].headers["authorization"] == "Bearer not-needed"
    first, second = requests[0].json, requests[1].json
    assert first["model"] == MODEL_ID and first["stream"] is True
    assert first["messages"][-1] == {"role": "user", "content": "What is 6*7?"}
    assert [tool["function"]["name"] for tool in first["tools"]] == ["calculator"]
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}
