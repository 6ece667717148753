"""pytest plugin for deterministic agent tests (active once openprogram is installed, through
the ``pytest11`` entry point).

Mark a test with ``@pytest.mark.llm_recording`` (or request the ``llm_recording`` fixture) and
every provider call made inside it, by an agent loop or a direct facade call, sync or async,
goes to ``<test folder>/recordings/<test module>/<test name>.jsonl``:

- ``--llm-record-mode=replay`` (default): served offline from the recording; a missing
  recording fails the test with the command that records it; recorded calls left unused by a
  passing test fail it.
- ``record``: record recordings that are missing, replay the ones that exist.
- ``rewrite``: record every recording anew.
- ``update``: replay each test's calls while they match its recording; from the first call that
  drifts, call the model live and record; when the test passes, rewrite the recording with both,
  as one session. A test whose requests did not drift, or that failed, keeps its file byte for
  byte; the outcome of each updated test is said at the end of the run.
- ``off``: live calls, nothing recorded.

A test that uses ``tmp_path`` gets it as the run value ``tmp_path``: the recording stores
``{{tmp_path}}`` wherever the folder appears, and a later run replays with its own folder.

A test that fails while recording keeps no new recording unless ``--llm-keep-failed``.

Reports stay out of the committed recordings: a replayed test that drifts writes its drift page
under ``--llm-report-dir`` (default ``llm-reports/`` in the rootdir, which ignores itself for git
and is what CI uploads as an artifact), and the page is removed when the test passes again.

The routing is entered inside the test function itself (the plugin wraps it), through
``use_recording``'s context variable: it is scoped to the test, safe with pytest-xdist and with
tests that share an event loop, and it never touches the process-wide provider transform.

This package is the plugin the ``pytest11`` entry point names: pytest finds its hooks and the
fixture among the names below, each defined in the module of its job (``options``: options and
markers; ``naming``: where a recording lives; ``session``: one test's recording session;
``refusal``: no live call in replay mode; ``hooks``: the fixture and the hooks around each
test; ``watch``: what the calls went through). ``proxy_fixture`` (``llm_proxy``) and ``insight``
(usage, budgets, the prompt-cache check, the doctor) are plugins of their own, loaded with it.
"""

from __future__ import annotations

from .hooks import (
    CALLS_SECTION,
    MISSING_PROPERTY,
    RECORDING_SECTION,
    REPLAY_OPTIONS_SECTION,
    UPDATE_SECTION,
    llm_recording,
    missing_recordings_command,
    pytest_runtest_call,
    pytest_runtest_makereport,
    pytest_terminal_summary,
    pytest_terminal_summary_closing_lines,
    replay_options_note,
)
from .naming import (
    drift_page_path,
    file_stem,
    legacy_recording_path,
    pytest_collection_modifyitems,
    recording_path,
)
from .options import (
    DEFAULT_REPORT_DIR,
    LIVE_MARKER,
    MARKER,
    MODES,
    NORMALIZE_SEPARATOR,
    pytest_addoption,
    pytest_configure,
    pytest_configure_node,
    pytest_report_header,
    record_mode,
    replay_options,
    report_dir,
    volatile_settings,
)
from .refusal import (
    NETWORK_APIS,
    live_call_refusal,
)
from .session import (
    LlmRecording,
)

#: The ``llm_proxy`` fixture, and the usage report, budgets, prompt-cache check and doctor:
#: plugins of their own (each has hooks of the same names as this one's).
pytest_plugins = ["openprogram.testing.proxy_fixture", "openprogram.testing.insight"]

__all__ = [
    "CALLS_SECTION",
    "DEFAULT_REPORT_DIR",
    "LIVE_MARKER",
    "LlmRecording",
    "MARKER",
    "MISSING_PROPERTY",
    "MODES",
    "NETWORK_APIS",
    "NORMALIZE_SEPARATOR",
    "RECORDING_SECTION",
    "REPLAY_OPTIONS_SECTION",
    "UPDATE_SECTION",
    "drift_page_path",
    "file_stem",
    "legacy_recording_path",
    "live_call_refusal",
    "llm_recording",
    "missing_recordings_command",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_report_header",
    "pytest_runtest_call",
    "pytest_runtest_makereport",
    "pytest_terminal_summary",
    "pytest_terminal_summary_closing_lines",
    "record_mode",
    "recording_path",
    "replay_options",
    "replay_options_note",
    "report_dir",
    "volatile_settings",
]
