"""pytest plugin for deterministic agent tests (registered through the ``pytest11`` entry point)."""

from __future__ import annotations


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "llm_recording(name=None): route this test's provider calls to a recording"
    )
