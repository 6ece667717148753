"""The record/replay modes, spelled once: every list of modes in openprogram is taken from here.

A mode names what happens to the provider calls of a run. Four modes exist
(``record_replay.mode``, the proxy's ``--mode``, ``use_recording``'s ``mode``); each place that
takes a mode accepts a subset of them, and two add one word of their own on top:

- ``off``: every call live, nothing recorded.
- ``record``: every call live, each one appended to the recording.
- ``replay``: every call served from the recording, offline; a request that differs fails.
- ``update``: replay while the requests match, live and recorded from the first that drifts;
  the file is rewritten with both when the run ends normally (``docs/tutorial.md``).
- ``rewrite`` (pytest only): record every test anew. The plugin's ``record`` records only the
  tests that have no recording and replays the others (:func:`route_mode_for_test`).
- ``blocked`` (activation only): not a mode one chooses, the outcome of settings that cannot
  be used; every call fails with the diagnosis.

:func:`route_mode_for_test` maps the plugin's five modes onto the modes a route serves, and
:mod:`.routes` turns a mode into providers. ``docs/architecture.md`` ("The modes") has the
table of who accepts which.

This module imports nothing of openprogram: the light ``store`` module and the configuration
check take their lists from it without loading anything else.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final, Literal, TypeVar, get_args

__all__ = [
    "ACTIVATION_MODES",
    "BLOCKED",
    "CONFIG_MODES",
    "FILE_MODES",
    "OFF",
    "PLUGIN_MODES",
    "PROXY_MODES",
    "RECORD",
    "REPLAY",
    "REWRITE",
    "ROUTE_MODES",
    "SCOPED_MODES",
    "UPDATE",
    "WRITING_MODES",
    "ActivationMode",
    "FileMode",
    "PluginMode",
    "ProxyMode",
    "RecordMode",
    "RouteMode",
    "route_mode_for_test",
    "validate_record_mode",
]

OFF: Final = "off"
RECORD: Final = "record"
REPLAY: Final = "replay"
UPDATE: Final = "update"
#: pytest's own word: record every test anew.
REWRITE: Final = "rewrite"
#: Activation's outcome for settings that cannot be used.
BLOCKED: Final = "blocked"

#: The modes. Every other mode type below is a subset of it, or it with one word added.
RecordMode = Literal["off", "record", "replay", "update"]
#: ``record_replay.mode`` takes every mode.
CONFIG_MODES: Final[tuple[RecordMode, ...]] = get_args(RecordMode)

#: The modes that use a recording file (the file is then "the active recording").
FileMode = Literal["record", "replay", "update"]
FILE_MODES: Final[tuple[FileMode, ...]] = get_args(FileMode)
#: ``use_recording``'s modes: the ones with a file.
SCOPED_MODES: Final[tuple[FileMode, ...]] = FILE_MODES
#: The modes that write the file: they take a managed recording ID, never a path.
WRITING_MODES: Final[tuple[FileMode, ...]] = (RECORD, UPDATE)

#: What a route serves (:func:`.routes.route_for`): a file's mode, or ``off`` (live calls,
#: whatever the process-wide configuration installed). The proxy's ``--mode`` takes these.
RouteMode = Literal["record", "replay", "update", "off"]
ROUTE_MODES: Final[tuple[RouteMode, ...]] = get_args(RouteMode)
ProxyMode = RouteMode
PROXY_MODES: Final[tuple[ProxyMode, ...]] = ROUTE_MODES

#: ``--llm-record-mode``: the modes, and ``rewrite``; in the order the option's help gives them.
PluginMode = Literal["replay", "record", "rewrite", "update", "off"]
PLUGIN_MODES: Final[tuple[PluginMode, ...]] = get_args(PluginMode)

#: What the runtime activated: a mode, or ``blocked``.
ActivationMode = Literal["off", "record", "replay", "update", "blocked"]
ACTIVATION_MODES: Final[tuple[ActivationMode, ...]] = get_args(ActivationMode)

Mode = TypeVar("Mode", bound=str)


def validate_record_mode(
    value: object, allowed: Collection[Mode], where: str = "", error: type[Exception] = ValueError
) -> Mode:
    """``value`` when it is one of ``allowed``, else ``error`` saying so and listing them:
    ``"{where} must be one of record, replay, update, not 'rewrite'"`` (without ``where``, the
    message starts at "must", for a caller that names the setting itself)."""
    if value in allowed:
        return value  # type: ignore[return-value]  # one of ``allowed``, which holds Mode values
    subject = f"{where} must" if where else "must"
    raise error(f"{subject} be one of {', '.join(allowed)}, not {value!r}")


def route_mode_for_test(mode: PluginMode, recording_exists: bool) -> RouteMode:
    """What a test's calls do under the plugin's ``mode``: ``record`` replays a test that has a
    recording already and records the others, ``rewrite`` records every test, ``off`` calls
    live; ``replay`` and ``update`` mean what they mean everywhere."""
    if mode == RECORD:
        return REPLAY if recording_exists else RECORD
    if mode == REWRITE:
        return RECORD
    return mode
