"""Offline tests of the calculator agent: the first run records, every later run replays."""

from __future__ import annotations

import pytest
from agent import ask


@pytest.mark.llm_recording
async def test_uses_the_calculator():
    answer, expressions = await ask("/calculator 6*7")
    assert expressions == ["6*7"]
    assert "42" in answer


@pytest.mark.llm_recording
async def test_answers_plain_questions_without_tools():
    answer, expressions = await ask("hello")
    assert expressions == []
    assert "hello" in answer
