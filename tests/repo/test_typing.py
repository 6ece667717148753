"""The package is typed (``py.typed``, a strict mypy check with 0 errors), and so is its public
API for users: a small typed program written against it passes the user's own ``mypy
--strict``, and a program with mistakes is reported exactly at them. Runs mypy in a
subprocess, sharing one cache between the checks (the package is analysed once), across the
workers of a parallel run too."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.conftest import PYTHON, REPO_ROOT

PROGRAMS = Path(__file__).parents[1] / "typing_programs"

pytest.importorskip("mypy", reason="the dev extra installs mypy")


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    """One cache for the run: under xdist, in the folder the workers' temporary folders share
    (a cache per worker would have each worker's first check analyse the whole package)."""
    run_folder = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_folder = run_folder.parent
    folder = run_folder / "mypy-cache"
    folder.mkdir(exist_ok=True)
    return folder


def mypy(cache: Path, *args: str) -> subprocess.CompletedProcess:
    """One check at a time per cache: a check that waits reads what the first one wrote,
    instead of analysing the package again beside it."""
    with open(cache.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(
            [PYTHON, "-m", "mypy", "--cache-dir", str(cache), "--no-color-output", "--no-error-summary", *args],
            cwd=REPO_ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600,
        )  # fmt: skip


@pytest.mark.slow  # first: the user programs' checks, later, find the package in the cache
def test_the_package_passes_its_strict_type_check(cache):
    """``[tool.mypy]`` in pyproject.toml: strict, with the pydantic plugin, over openprogram/."""
    result = mypy(cache)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_a_typed_user_program_passes_a_strict_check(cache):
    result = mypy(cache, "--strict", str(PROGRAMS / "good_user.py"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_mistakes_against_the_public_api_are_reported_where_they_are(cache):
    program = PROGRAMS / "bad_user.py"
    expected = {
        number: match.group(1)
        for number, line in enumerate(program.read_text().splitlines(), start=1)
        if (match := re.search(r"# expect: ([a-z-]+)", line))
    }
    result = mypy(cache, "--strict", str(program))
    assert result.returncode == 1, result.stdout + result.stderr
    reported = {
        int(match.group(1)): match.group(2)
        for match in re.finditer(
            r"bad_user\.py:(\d+): error: .*\[([a-z-]+)\]$", result.stdout, re.MULTILINE
        )
    }
    assert reported == expected, result.stdout


def test_the_wheel_says_the_package_is_typed(tmp_path):
    """The wheel built from the tree ships ``openprogram/py.typed`` (PEP 561)."""
    built = subprocess.run(
        [PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(REPO_ROOT)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = tmp_path.glob("openprogram-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert "openprogram/py.typed" in archive.namelist()


#: The SDK attributes that lead into the modules ``[[tool.mypy.overrides]]`` skips.
SKIPPED_SDK_ATTRIBUTES = {"beta", "admin", "organizations", "realtime", "live"}


def test_the_package_names_none_of_the_sdk_apis_its_check_skips():
    """pyproject.toml has mypy skip the SDKs' beta, admin, organization, realtime and live
    APIs (most of what a check analyses): that costs the check nothing only while the
    package's code reaches none of them, which this keeps true."""
    import ast
    import tomllib

    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    (override,) = config["tool"]["mypy"]["overrides"]
    prefixes = tuple(pattern.removesuffix(".*") for pattern in override["module"])
    assert override["follow_imports"] == "skip" and len(prefixes) == 12
    reached = []
    for path in sorted((REPO_ROOT / "openprogram").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            imported = [name for name in names if name.startswith(prefixes)]
            if imported or (
                isinstance(node, ast.Attribute) and node.attr in SKIPPED_SDK_ATTRIBUTES
            ):
                reached.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert reached == []
