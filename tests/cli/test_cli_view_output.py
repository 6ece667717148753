"""``recordings view --output``: only a new ``.html`` file or an existing page is written; a
recording, the file being viewed, a symbolic link, a FIFO or a device never is (each refused in
one line, nothing written)."""

from __future__ import annotations

import os
import stat

import pytest

from tests.cli.test_recordings_cli import folder_of, make_recording, recordings


@pytest.fixture
def viewed(isolated_home):
    return make_recording(folder_of(isolated_home) / "ok.jsonl")


def test_a_new_or_existing_page_is_written(isolated_home, viewed, tmp_path):
    fresh = tmp_path / "page.html"
    assert recordings(isolated_home, "view", "ok", "--output", str(fresh)).returncode == 0
    assert "<!DOCTYPE html>" in fresh.read_text() and stat.S_IMODE(fresh.stat().st_mode) == 0o600
    fresh.write_text("an old page")
    assert recordings(isolated_home, "view", "ok", "--output", str(fresh)).returncode == 0
    assert "<!DOCTYPE html>" in fresh.read_text()


@pytest.mark.parametrize(
    ("make", "code", "reason"),
    [
        (
            lambda target, viewed: None,
            2,
            "must name an .html file",
        ),  # target is recording-like .jsonl
        (lambda target, viewed: target.symlink_to(viewed), 1, "is a symbolic link"),
        (lambda target, viewed: os.mkfifo(target), 1, "is not a regular file"),
        (lambda target, viewed: target.write_bytes(viewed.read_bytes()), 1, "is a recording"),
    ],
    ids=["not-html", "symlink", "fifo", "a-recording"],
)
def test_a_dangerous_output_is_refused_and_nothing_is_written(
    isolated_home, viewed, tmp_path, make, code, reason
):
    target = tmp_path / ("other.jsonl" if reason.startswith("must") else "page.html")
    if reason.startswith("must"):
        target.write_bytes(viewed.read_bytes())
    else:
        make(target, viewed)
    before = sorted(os.listdir(tmp_path))
    content = viewed.read_bytes()
    result = recordings(isolated_home, "view", "ok", "--output", str(target))
    assert result.returncode == code, result.stderr
    assert (
        reason in result.stderr
        and str(target) in result.stderr
        and "nothing was written" in result.stderr
    )
    assert "Traceback" not in result.stderr
    assert sorted(os.listdir(tmp_path)) == before and viewed.read_bytes() == content
    if target.is_symlink():
        assert target.resolve() == viewed.resolve()
    elif stat.S_ISFIFO(os.lstat(target).st_mode):
        pass  # still the FIFO: nothing opened it for writing
    else:
        assert target.read_bytes() == content


def test_the_file_being_viewed_is_never_the_output(isolated_home, tmp_path):
    recording = make_recording(tmp_path / "session.html")  # a recording with a page's suffix
    before = recording.read_bytes()
    result = recordings(isolated_home, "view", str(recording), "--output", str(recording))
    assert result.returncode == 2 and "is the recording being viewed" in result.stderr
    assert recording.read_bytes() == before
    other = make_recording(tmp_path / "other.jsonl")
    against = recordings(
        isolated_home, "view", str(other), "--against", str(recording), "--output", str(recording)
    )
    assert against.returncode == 2 and recording.read_bytes() == before
