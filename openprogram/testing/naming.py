"""Where a test's recording lives: ``<test folder>/recordings/<module>/<name>.jsonl``, a file
name unique per test id and redacted as a recording is; two tests that would share one are
refused; the drift page's place under the report folder."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import cast

import pytest

from .options import MARKER, report_dir

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def recording_path(item: pytest.Item) -> Path:
    test_file = Path(str(item.path))
    stem = file_stem(_original_name(item), _marker_secrets(item))
    return test_file.parent / "recordings" / test_file.stem / f"{stem}.jsonl"


def legacy_recording_path(item: pytest.Item) -> Path | None:
    """Where openprogram 0.1 stored this test's recording, when that name differs (it was not
    unique for ids with punctuation); used only to point a user at an old file, and never for
    a name that holds a secret (it would be shown)."""
    name = _original_name(item)
    if file_stem(name) == _legacy_stem(name) or _redacted_name(name, _marker_secrets(item)) != name:
        return None
    return recording_path(item).with_name(f"{_legacy_stem(name)}.jsonl")


def _original_name(item: pytest.Item) -> str:
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        name: str | None = marker.kwargs.get("name") or (marker.args[0] if marker.args else None)
        if name:
            return name
    return item.name


def file_stem(name: str, secrets: tuple[str, ...] = ()) -> str:
    """A readable file name for a test (or marker) name, unique per exact name.

    ``test_x`` and a parametrised ``test_x[3-abc]`` keep the names openprogram always gave them
    (``test_x``, ``test_x_3-abc``). Where other characters had to be replaced by ``_``, a short
    hash of the exact name is appended, so parametrised ids that differ only in such characters
    (``[a/b]``, ``[a_b]``, ``[a b]``; ``6*7`` and ``6+7``) get files of their own instead of
    sharing one.

    A recording's name is committed with it, so the name is redacted first by the rules of
    the file (``docs/file-format.md``, "Redaction"; ``secrets``: the marker's declared values):
    a parametrised id that holds a key becomes ``test_x_secret_removed_-1a2b3c4d``, the hash
    of the exact id keeping two such ids apart (a hash does not give back the key).
    """
    shown = _redacted_name(name, secrets)
    readable = _legacy_stem(shown)
    base, bracket, rest = name.partition("[")
    lossless = shown == name and (
        name == readable or (bracket and rest.endswith("]") and f"{base}_{rest[:-1]}" == readable)
    )
    if lossless:
        return readable
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{readable}-{digest}"


def _redacted_name(name: str, secrets: tuple[str, ...]) -> str:
    """``name`` redacted as a recording would store it, the marker's secrets included."""
    from openprogram.recordings.redaction import redact_text, use_declared_secrets

    with use_declared_secrets(secrets):
        return redact_text(name)


def _marker_secrets(item: pytest.Item) -> tuple[str, ...]:
    """The values the test's marker declares secret (``secrets=``), as far as they are valid
    (an invalid one fails the test when its recording is opened, not here)."""
    from openprogram.recordings.redaction import check_declared_secrets

    marker = item.get_closest_marker(MARKER)
    try:
        return tuple(
            sorted(
                check_declared_secrets(marker.kwargs.get("secrets") if marker is not None else None)
            )
        )
    except (ValueError, TypeError):
        return ()


def _legacy_stem(name: str) -> str:
    """The name openprogram 0.1 gave a recording (not unique: kept to point users at it)."""
    return _UNSAFE.sub("_", name).strip("_") or "recording"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker(MARKER) is not None and MARKER not in getattr(
            item, "fixturenames", ()
        ):
            cast(pytest.Function, item).fixturenames.append(
                MARKER
            )  # declared on Function, not Item
    _refuse_shared_recordings(items)


def _refuse_shared_recordings(items: list[pytest.Item]) -> None:
    """Two tests whose names map to one file (``test_load[user_admin]`` and
    ``test_load_user[admin]`` both read ``test_load_user_admin``; methods of two classes with
    one name) would record over and replay each other's calls: both fail, saying how to part
    them, and the rest of the suite runs. Tests that give the marker the same ``name=`` share
    a recording on purpose and are left alone."""
    owners: dict[Path, list[pytest.Item]] = {}
    for item in items:
        if MARKER in getattr(item, "fixturenames", ()) and not _named_by_marker(item):
            owners.setdefault(recording_path(item), []).append(item)
    for path, sharing in owners.items():
        if len(sharing) < 2:
            continue
        names = " and ".join(item.nodeid for item in sharing)
        for item in sharing:
            item._openprogram_shared_recording = (  # type: ignore[attr-defined]
                f"{names} would share the recording {path}; give each a name of its own: "
                f'@pytest.mark.{MARKER}(name="...")'
            )


def _named_by_marker(item: pytest.Item) -> bool:
    marker = item.get_closest_marker(MARKER)
    return marker is not None and bool(marker.kwargs.get("name") or marker.args)


def drift_page_path(config: pytest.Config, recording: Path) -> Path:
    """Where a test's drift page goes: its recording's path below the rootdir, under the report
    folder (``llm-reports/tests/recordings/test_agent/test_x.drift.html``), so two tests never
    share one page and no page lands among the committed recordings."""
    from openprogram.recordings.views.view import DRIFT_SUFFIX

    try:
        relative = recording.absolute().relative_to(Path(config.rootpath).absolute())
    except ValueError:  # a recording outside the rootdir: by its name and a digest of its path
        digest = hashlib.sha256(
            str(recording.absolute()).encode("utf-8", "surrogatepass")
        ).hexdigest()[:8]
        relative = Path("elsewhere") / f"{recording.stem}-{digest}{recording.suffix}"
    return report_dir(config) / relative.with_name(
        relative.name.removesuffix(".jsonl") + DRIFT_SUFFIX
    )
