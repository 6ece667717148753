"""The whole record/replay journey through the real command line, as the README tells it:
record a run, replay it offline with identical output, see a changed prompt fail with the
mismatch report, then manage the recordings."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from tests.cli.test_recordings_cli import cli, recordings
from tests.conftest import PYTHON, cli_env

PROMPT = "/calculator 6*7"

#: Runs ``openprogram ARGS`` with every way of reaching a provider made to fail loudly: no
#: socket can connect and the faux provider (the model the journey uses) raises if asked.
OFFLINE = """
import socket, sys

def refuse_network(*args, **kwargs):
    raise OSError("network disabled: a provider was contacted during replay")

socket.socket.connect = refuse_network
socket.socket.connect_ex = refuse_network
socket.create_connection = refuse_network

from openprogram.providers import faux

def refuse_faux(self, *args, **kwargs):
    raise RuntimeError("the faux provider was contacted during replay")

faux.FauxProvider._next_response = refuse_faux

from openprogram.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def offline(home, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [PYTHON, "-c", OFFLINE, *args],
        env=cli_env(home),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.mark.slow
def test_record_run_replay_offline_mismatch_and_manage(isolated_home):
    home = isolated_home
    folder = home / "recordings"

    # 1. record
    started = recordings(home, "record", "--name", "demo")
    assert started.returncode == 0, started.stderr
    assert "takes effect at the next start" in started.stdout
    live = cli(home, "run", PROMPT)
    assert live.returncode == 0, live.stderr
    assert "calculator returned: 42" in live.stdout

    # 2. replay: identical output, nothing contacted
    selected = recordings(home, "replay", "demo")
    assert selected.returncode == 0, selected.stderr
    assert "2 calls" in selected.stdout and "takes effect at the next start" in selected.stdout
    replayed = offline(home, "run", PROMPT)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == live.stdout
    assert replayed.stderr == ""

    # 3. a changed prompt fails with the contract's report
    changed = offline(home, "run", "/calculator 6*8")
    assert changed.returncode == 1
    assert changed.stdout == ""
    assert (
        "replay mismatch at call 0, field context.messages[0].content:\n"
        "recorded '/calculator 6*7', incoming '/calculator 6*8'\n"
    ) in changed.stderr
    # ... and says that replay is on for the profile, and how to turn it off
    assert (
        "(replay is on: the record_replay configuration replays 'demo' for every model call; "
        "'openprogram recordings off' calls models live again"
    ) in changed.stderr

    # 4. the offline guard is not vacuous: with replay off, the same wrapper fails
    assert recordings(home, "off").returncode == 0
    guarded = offline(home, "run", PROMPT)
    assert guarded.returncode == 1 and "faux provider was contacted" in guarded.stderr

    # 5. manage: list and show the recording, prune an old one, delete the rest
    assert recordings(home, "replay", "demo").returncode == 0
    listing = json.loads(recordings(home, "list", "--json").stdout)
    [demo] = listing["recordings"]
    assert (demo["id"], demo["state"], demo["active"], demo["calls"]) == ("demo", "valid", True, 2)
    shown = json.loads(recordings(home, "show", "demo", "--json").stdout)
    assert [(c["api"], c["model"], c["outcome"]) for c in shown["calls"]] == [
        ("faux", "echo", "complete")
    ] * 2
    assert PROMPT not in recordings(home, "show", "demo").stdout

    assert recordings(home, "record", "--name", "old-one").returncode == 0
    assert cli(home, "run", "hello").returncode == 0
    month_ago = time.time() - 30 * 86400
    os.utime(folder / "old-one.jsonl", (month_ago, month_ago))
    os.utime(folder / "demo.jsonl", (month_ago, month_ago))
    assert recordings(home, "replay", "demo").returncode == 0

    refused = recordings(home, "delete", "demo", "--yes")
    assert refused.returncode == 1 and "is the active recording" in refused.stderr
    pruned = recordings(home, "prune", "--older-than-days", "7", "--yes")
    assert pruned.returncode == 0, pruned.stderr
    assert "deleted 1 recording(s)" in pruned.stdout and "is the active recording" in pruned.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["demo.jsonl"]

    assert recordings(home, "off").returncode == 0
    assert recordings(home, "delete", "demo", "--yes").returncode == 0
    assert json.loads(recordings(home, "list", "--json").stdout)["recordings"] == []
    status = recordings(home, "status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["mode"] == "off"
    assert cli(home, "run", PROMPT).stdout == live.stdout
