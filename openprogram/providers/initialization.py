"""The provider runtime lifecycle: one initialisation per process, before the first lookup."""

from __future__ import annotations

import threading
from dataclasses import dataclass

_lock = threading.Lock()
_state = "NEW"
_snapshot: RuntimeSnapshot | None = None


@dataclass(frozen=True)
class RuntimeSnapshot:
    mode: str


def initialize_provider_runtime() -> RuntimeSnapshot:
    """Register the built-ins once; concurrent first callers wait for the same result."""
    global _state, _snapshot
    if _snapshot is not None:
        return _snapshot
    with _lock:
        if _snapshot is None:
            from .register import register_builtins

            _state = "INITIALIZING"
            register_builtins()
            _snapshot = RuntimeSnapshot(mode="off")
            _state = "READY"
    return _snapshot


def runtime_state() -> str:
    return _state
