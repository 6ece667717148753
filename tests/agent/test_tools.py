"""Built-in tools are safe: arithmetic only, reads confined to the working folder."""

from __future__ import annotations

import pytest

from openprogram.tools import builtin_tools, confined_path, evaluate_arithmetic


@pytest.mark.parametrize(
    ("expression", "value"),
    [("1+2*3", 7), ("(2+3)*7", 35), ("2**10", 1024), ("-4/2", -2.0), ("7//2", 3), ("7%4", 3)],
)
def test_calculator_evaluates_arithmetic(expression, value):
    assert evaluate_arithmetic(expression) == value


@pytest.mark.parametrize(
    "expression", ["__import__('os')", "a+1", "2**99999", "1/0", "[1]", "1 if 1 else 2", ""]
)
def test_calculator_refuses_everything_else(expression):
    with pytest.raises(ValueError):
        evaluate_arithmetic(expression)


async def test_calculator_tool_reports_errors_as_results():
    (calculator,) = builtin_tools(["calculator"])
    ok = await calculator.execute("c", {"expression": "6*7"}, None, lambda r: None)
    bad = await calculator.execute("c", {"expression": "open('x')"}, None, lambda r: None)
    assert ok.content[0].text == "42" and not ok.is_error
    assert bad.is_error and "unsupported" in bad.content[0].text


async def test_file_tools_stay_inside_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    (root / "link").symlink_to(tmp_path / "secret.txt")
    read_file, list_files = builtin_tools(["read_file", "list_files"], root)

    ok = await read_file.execute("c", {"path": "sub/a.txt"}, None, lambda r: None)
    assert ok.content[0].text == "inside"
    for escape in ("../secret.txt", str(tmp_path / "secret.txt"), "link"):
        refused = await read_file.execute("c", {"path": escape}, None, lambda r: None)
        assert refused.is_error and "outside the working folder" in refused.content[0].text
    listing = await list_files.execute("c", {"path": "."}, None, lambda r: None)
    assert listing.content[0].text.splitlines() == ["link", "sub/"]
    with pytest.raises(ValueError):
        confined_path(root, "../..")


def test_unknown_tool_name_is_refused():
    with pytest.raises(ValueError, match="unknown tool shell"):
        builtin_tools(["shell"])
