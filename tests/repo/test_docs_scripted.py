"""docs/scripted.md runs as written: every Python block is executed in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env

PAGE = Path(__file__).resolve().parents[2] / "docs" / "scripted.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)


def test_the_page_has_its_examples():
    assert len(BLOCKS) == 2
    assert all("assert " in block for block in BLOCKS)  # each example checks what it says


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_every_example_of_the_scripted_provider_runs(number, isolated_home, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", BLOCKS[number]],
        cwd=tmp_path,
        env=cli_env(isolated_home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
