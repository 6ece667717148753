"""``openprogram recordings view``, the demo's page and the pytest drift page: what the HTML
holds (checked by parsing it), and what a person sees in headless Chromium (checked through
``--dump-dom``; those tests skip when no browser is installed)."""

from __future__ import annotations

import asyncio
import http.server
import json
import re
import shutil
import stat
import subprocess
import threading
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.cli.test_recordings_cli import cli, folder_of, make_recording, recordings
from tests.plugin.test_pytest_plugin import inner, recording_file, run_inner  # noqa: F401 - fixture

HOSTILE = (
    "<script>alert(1);document.title='pwned';"
    "document.body.appendChild(document.createElement('blink'))</script>"
    "<img src=x onerror=\"document.title='pwned-img'\">"
    '<style>body{display:none}</style><a href="javascript:alert(2)">link</a>'
)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH: install Debian's package (apt-get install chromium) to run the browser tests",
)


def make_session(path: Path, prompt: str = "What is 6*7?") -> Path:
    """A recorded agent-like session by the real recorder: thinking, a tool call with its
    result, an answer; then a call in a second lane."""
    from openprogram.providers.faux import FauxProvider, faux_text, faux_thinking, faux_tool_call
    from openprogram.providers.lanes import lane
    from openprogram.providers.recording import RecordingProvider
    from openprogram.providers.types import (
        Context,
        Model,
        TextContent,
        ToolResultMessage,
        UserMessage,
    )

    faux = FauxProvider(timestamp=0)
    faux.queue(
        faux_tool_call("calculator", {"expression": "6*7", "note": "multiply"}, id="call-1"),
        faux_thinking("The tool said 42, so I answer 42.", "The answer is 42."),
        faux_text("Side lane answer"),
    )
    provider = RecordingProvider(faux, path)
    model = Model(id="echo", api="faux", provider="faux")

    async def answer_to(context):
        message = None
        async for event in provider.stream_simple(model, context):
            message = getattr(event, "message", message)
        return message

    async def go():
        first = UserMessage(content=prompt, timestamp=0)
        system = "You are a careful calculator."
        answer = await answer_to(Context(system_prompt=system, messages=[first]))
        result = ToolResultMessage(
            tool_call_id="call-1",
            tool_name="calculator",
            content=[TextContent(text="42")],
            timestamp=0,
        )
        await answer_to(Context(system_prompt=system, messages=[first, answer, result]))
        with lane("helper"):
            await answer_to(Context(messages=[UserMessage(content="side question", timestamp=0)]))

    asyncio.run(go())
    provider.sink.close()
    return path


def read(path: Path):
    from openprogram.recordings.views.inspection import read_recording

    return read_recording(path)


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> Elements:
    parser = Elements()
    parser.feed(page)
    return parser


# ============================================================================ the HTML


def test_the_page_shows_the_conversation_and_the_recording_cannot_add_markup(tmp_path):
    from openprogram.recordings.views.view import render_recording_page

    page = render_recording_page(read(make_session(tmp_path / "s.jsonl", HOSTILE)))
    parsed = parse(page)
    text = "".join(parsed.text)
    assert HOSTILE in text  # the prompt, character for character, as text
    for expected in ("You are a careful calculator.", "The answer is 42.", "Side lane answer"):
        assert expected in text
    assert '"expression": "6*7"' in text  # pretty-printed tool-call arguments
    assert "The tool said 42" in text and "thinking (" in text
    assert "lane helper (1 calls)" in text and "root lane (2 calls)" in text
    assert "holds prompts" in text
    # Only the page's own elements: one style, one script, no element able to load anything.
    tags = [tag for tag, _ in parsed.tags]
    assert tags.count("script") == 1 and tags.count("style") == 1
    assert not {"img", "a", "iframe", "link", "object", "blink"} & set(tags)
    for _tag, attributes in parsed.tags:
        assert not {"src", "href", "style"} & set(attributes)
        assert not any(name.startswith("on") for name in attributes)


def test_the_content_security_policy_allows_only_the_pages_own_style_and_script(tmp_path):
    import base64
    import hashlib

    from openprogram.recordings.views.view import render_recording_page

    page = render_recording_page(read(make_session(tmp_path / "s.jsonl")))
    parsed = parse(page)
    policy = next(
        a["content"]
        for t, a in parsed.tags
        if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    )
    assert policy.startswith("default-src 'none';")
    for kind in ("style", "script"):
        start = page.index(f"<{kind}>") + len(kind) + 2
        body = page[start : page.index(f"</{kind}>", start)]
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{kind}-src 'sha256-{digest}';" in policy
    assert "http" not in policy and "*" not in policy and "unsafe" not in policy


def test_a_secret_in_a_hand_edited_recording_is_redacted_on_the_page(tmp_path):
    from openprogram.recordings.views.view import render_recording_page

    path = make_session(tmp_path / "s.jsonl")
    lines = path.read_text().splitlines()
    request = json.loads(lines[1])
    request["context"]["messages"][0]["content"] = (
        "key sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd"
    )
    lines[1] = json.dumps(request)
    path.write_text("\n".join(lines) + "\n")
    page = render_recording_page(read(path))
    assert "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd" not in page and "ABCDEFGHIJ" not in page


@pytest.mark.parametrize(
    ("a", "b", "span"),
    [
        ("/calculator 6*7", "/calculator 6*8", (14, 15, 15)),
        ("abc", "abc", (3, 3, 3)),
        ("aXa", "aa", (1, 2, 1)),  # the suffix never overlaps the prefix
        ("", "new", (0, 0, 3)),
    ],
)
def test_changed_span_is_between_the_common_prefix_and_suffix(a, b, span):
    from openprogram.recordings.views.view import changed_span

    assert changed_span(a, b) == span


def test_the_comparison_marks_the_call_and_field_recordings_diff_reports(tmp_path):
    from openprogram.recordings.views.comparison import diff_recordings
    from openprogram.recordings.views.view import render_comparison_page

    a = read(make_recording(tmp_path / "a.jsonl", ("same", "/calculator 6*7", "after")))
    b = read(make_recording(tmp_path / "b.jsonl", ("same", "/calculator 6*8", "after")))
    reported = next(c for c in diff_recordings(a, b).calls if c.status != "same")
    page = render_comparison_page(a, b)
    first = page[page.index('id="first-difference"') :]
    assert first.startswith(
        f'id="first-difference" open><summary><span class="n">call {reported.call_index}</span>'
    )
    field = reported.request_difference["field_path"]
    assert f'request differs first at <span class="field">{field}</span>' in first
    assert "/calculator 6*<mark>7</mark>" in first and "/calculator 6*<mark>8</mark>" in first
    assert page.count('class="call same"') == 2  # the identical calls, folded (not open)
    assert '<details class="call same" open' not in page


# ============================================================================ the command


def test_view_writes_a_private_page_outside_the_recordings_and_prints_its_path(isolated_home):
    make_session(folder_of(isolated_home) / "calc.jsonl")
    result = recordings(isolated_home, "view", "calc")
    assert result.returncode == 0, result.stderr
    page = Path(result.stdout.strip())
    assert (
        page.parent == isolated_home / "reports"
        and page.name.startswith("calc-")
        and page.suffix == ".html"
    )
    assert "prompts, model outputs" in result.stderr
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert stat.S_IMODE(page.parent.stat().st_mode) == 0o700
    assert "The answer is 42." in page.read_text()
    assert sorted(p.name for p in folder_of(isolated_home).iterdir()) == ["calc.jsonl"]


def test_view_against_and_output(isolated_home, tmp_path):
    folder = folder_of(isolated_home)
    make_recording(folder / "one.jsonl", ("a", "b"))
    make_recording(folder / "two.jsonl", ("a", "c"))
    target = tmp_path / "out.html"
    result = recordings(isolated_home, "view", "one", "--against", "two", "--output", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(target)
    assert "1 of 2 calls differ" in target.read_text()
    # Each call's header fields read apart in the page's text (what a reader or a screen
    # reader gets), not run together as "call 1faux/echocomplete".
    text = "".join(parse(target.read_text()).text)
    assert "call 1 · different" in text
    assert re.search(
        r"call 1 · \S+/\S+ · complete · \d+ in / \d+ out tokens · \$\d+\.\d{6}", text
    ), text
    assert not re.search(r"call \d+\S", text)
    default = Path(recordings(isolated_home, "view", "one", "--against", "two").stdout.strip())
    assert default.parent == isolated_home / "reports" and default.name.startswith("one-vs-two-")


def test_view_failures_name_the_problem_and_write_nothing(isolated_home, tmp_path):
    folder = folder_of(isolated_home)
    missing = recordings(isolated_home, "view", "nope")
    assert (
        missing.returncode == 1
        and "nope.jsonl" in missing.stderr
        and "recordings list" in missing.stderr
    )
    assert recordings(isolated_home, "view", "-bad-").returncode == 2
    (folder / "broken.jsonl").write_text('{"type": "header", "format_version": 3}\n')
    broken = recordings(isolated_home, "view", "broken")
    assert broken.returncode == 1 and "broken.jsonl" in broken.stderr
    make_recording(folder / "ok.jsonl")
    into_folder = recordings(isolated_home, "view", "ok", "--output", str(tmp_path))
    assert into_folder.returncode == 2 and "--output" in into_folder.stderr
    no_parent = recordings(isolated_home, "view", "ok", "--output", str(tmp_path / "no" / "p.html"))
    assert (
        no_parent.returncode == 1
        and "does not exist" in no_parent.stderr
        and "nothing was written" in no_parent.stderr
    )
    assert sorted(p.name for p in folder.iterdir()) == ["broken.jsonl", "ok.jsonl"]


def test_the_demo_ends_with_the_page_of_its_recording(isolated_home):
    result = cli(isolated_home, "demo")
    assert result.returncode == 0, result.stdout + result.stderr
    last_page_line = next(
        line for line in reversed(result.stdout.splitlines()) if line.endswith(".html")
    )
    page = Path(last_page_line.rsplit(" ", 1)[1])
    try:
        assert (
            "/calculator 6*7" in page.read_text() and "calculator returned: 42" in page.read_text()
        )
        assert [p.name for p in page.parent.iterdir()] == ["demo.html"]  # the recording is gone
    finally:
        shutil.rmtree(page.parent)


# ============================================================================ pytest drift page


@pytest.mark.slow
def test_a_drifted_replay_writes_the_drift_page_outside_the_recordings_and_a_pass_removes_it(inner):  # noqa: F811
    run_inner(inner, "--llm-record-mode=record").assert_outcomes(passed=2)
    reports = inner.path / "llm-reports"
    drift_page = reports / "recordings" / "test_agent_suite" / "test_agent.drift.html"
    run_inner(inner, "test_agent_suite.py::test_agent").assert_outcomes(passed=1)
    assert not reports.exists()  # passing tests write nothing
    drifted = run_inner(inner, "test_agent_suite.py::test_agent", INNER_PROMPT="/calculator 6*8")
    drifted.assert_outcomes(failed=1)
    drifted.stdout.fnmatch_lines([f"See the drift in a browser: {drift_page}"])
    page = drift_page.read_text()
    assert 'first difference at <span class="field">context.messages[0].content</span>' in page
    assert "/calculator 6*<mark>7</mark>" in page and "/calculator 6*<mark>8</mark>" in page
    assert (reports / ".gitignore").read_text().splitlines()[-1] == "*"  # never committed
    assert sorted(p.name for p in recording_file(inner).parent.iterdir()) == [
        "direct.jsonl",
        "test_agent.jsonl",
    ]

    legacy = recording_file(inner).with_name("test_agent.drift.html")  # where 0.2 wrote it
    legacy.write_text("<html>an old drift</html>")
    run_inner(
        inner, "test_agent_suite.py::test_agent", INNER_PROMPT="/calculator 6*7"
    ).assert_outcomes(passed=1)
    assert not drift_page.exists() and not legacy.exists()  # the test passes again: no stale page


def test_the_report_folder_is_an_option(inner, tmp_path):  # noqa: F811
    run_inner(inner, "--llm-record-mode=record").assert_outcomes(passed=2)
    chosen = tmp_path / "ci-artifacts"
    drifted = run_inner(
        inner,
        "test_agent_suite.py::test_agent",
        f"--llm-report-dir={chosen}",
        INNER_PROMPT="/calculator 6*8",
    )
    drifted.assert_outcomes(failed=1)
    assert (chosen / "recordings" / "test_agent_suite" / "test_agent.drift.html").exists()
    assert not (inner.path / "llm-reports").exists()


# ============================================================================ in the browser


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM after load, as headless Chromium built it (scripts run)."""
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@needs_browser
def test_in_the_browser_hostile_markup_shows_as_text_and_runs_nothing(tmp_path):
    from openprogram.recordings.views.view import render_recording_page, write_page

    page = tmp_path / "page.html"
    write_page(render_recording_page(read(make_session(tmp_path / "s.jsonl", HOSTILE))), page)
    dom = dump_dom(page, tmp_path / "profile")
    assert 'data-script="ran"' in dom  # the page's own script runs in this browser...
    assert "<title>Recording</title>" in dom and "pwned" not in dom.split("<main>")[0]
    assert "<blink" not in dom  # ...the recording's does not
    parsed = parse(dom)
    text = "".join(parsed.text)
    assert "<script>alert(1);" in text and '<img src=x onerror="' in text  # shown as text
    assert "The answer is 42." in text and '"expression": "6*7"' in text
    assert not [tag for tag, _ in parsed.tags if tag in ("img", "a", "blink")]


class Requests(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self):
        Requests.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/gif")
        self.end_headers()

    def log_message(self, *args):
        pass


@needs_browser
def test_in_the_browser_the_page_makes_no_network_request(tmp_path):
    from openprogram.recordings.views.view import render_recording_page, write_page

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Requests)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        Requests.seen = []
        control = tmp_path / "control.html"
        control.write_text(f'<!DOCTYPE html><img src="{url}/control">')
        dump_dom(control, tmp_path / "profile-control")
        assert Requests.seen == ["/control"]  # this harness does see a page's request

        planted = f'<img src="{url}/x"> <link rel=stylesheet href="{url}/css"> {url}/text'
        page = tmp_path / "page.html"
        write_page(render_recording_page(read(make_session(tmp_path / "s.jsonl", planted))), page)
        Requests.seen = []
        dom = dump_dom(page, tmp_path / "profile")
        assert f"{url}/x" in "".join(parse(dom).text)
        assert Requests.seen == []
    finally:
        server.shutdown()
        server.server_close()


@needs_browser
def test_in_the_browser_the_policy_alone_stops_markup_that_escaped(tmp_path):
    """Defence in depth: were escaping ever broken, the page's Content-Security-Policy still
    runs no script and loads nothing (raw markup is planted past the escaping here)."""
    from openprogram.recordings.views.view import render_recording_page

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Requests)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        Requests.seen = []
        raw = (
            f'<img src="{url}/img"><script>document.title="pwned"</script>'
            f'<img src=x onerror="document.title=\'pwned\'"><link rel=stylesheet href="{url}/css">'
        )
        page = tmp_path / "page.html"
        page.write_text(
            render_recording_page(read(make_session(tmp_path / "s.jsonl"))).replace(
                "<main>", "<main>" + raw
            )
        )
        dom = dump_dom(page, tmp_path / "profile")
        assert 'data-script="ran"' in dom and "<title>Recording</title>" in dom
        assert Requests.seen == []
    finally:
        server.shutdown()
        server.server_close()


@needs_browser
def test_in_the_browser_the_drift_page_marks_the_field(tmp_path):
    from openprogram.recordings.replay.differences import ReplayMismatch
    from openprogram.recordings.views.view import render_drift_page, write_page

    recording = read(make_session(tmp_path / "s.jsonl"))
    mismatch = ReplayMismatch(0, "context.messages[0].content", "What is 6*7?", "What is 6*8?")
    page = tmp_path / "drift.html"
    write_page(render_drift_page(recording, mismatch), page)
    dom = dump_dom(page, tmp_path / "profile")
    assert "replay mismatch at call 0, field context.messages[0].content" in dom
    assert "What is 6*<mark>7</mark>?" in dom and "What is 6*<mark>8</mark>?" in dom
    assert 'class="msg user drift"' in dom  # the differing message is outlined in the call


def test_the_page_shows_time_to_first_event_and_duration(tmp_path):
    from openprogram.recordings.file.reader import read_recording_file
    from openprogram.recordings.views.view import _timings

    path = tmp_path / "timed.jsonl"
    path.write_text(
        '{"type":"header","format_version":1}\n'
        '{"type":"request","call_index":0,"model":{"id":"m","api":"faux","provider":"faux"},"context":{"messages":[]},"options":null}\n'
        '{"type":"event","call_index":0,"event_index":0,"t":12,"event":{"type":"start","partial":{"role":"assistant","content":[],"api":"faux","provider":"faux","model":"m","timestamp":1}}}\n'
        '{"type":"event","call_index":0,"event_index":1,"t":340,"event":{"type":"done","reason":"stop","message":{"role":"assistant","content":[],"api":"faux","provider":"faux","model":"m","timestamp":1}}}\n'
        '{"type":"call_end","call_index":0,"event_count":2}\n'
    )
    call = read_recording_file(path).calls[0]
    assert _timings(call) == "first event 12 ms, duration 340 ms"


def test_server_tool_blocks_show_their_kind_and_text_escaped():
    """Grounding citations, searches and tool searches (docs/vendors.md) show on the page by
    their kind and readable text; a block without text shows the vendor's item."""
    from openprogram.recordings.views.view import render_message

    cited = {
        "type": "serverTool",
        "vendor": "google",
        "kind": "grounding_metadata",
        "text": "[1] <b>Paris</b> - https://example.org",
        "payload": {},
    }
    searched = {
        "type": "serverTool",
        "vendor": "openai",
        "kind": "tool_search_call",
        "text": None,
        "payload": {"query": "weather tools"},
    }
    page = render_message(
        {"role": "assistant", "content": [cited, searched], "stop_reason": "stop"}
    )
    assert "server tool google grounding_metadata" in page
    assert "[1] &lt;b&gt;Paris&lt;/b&gt; - https://example.org" in page and "<b>" not in page
    assert "server tool openai tool_search_call" in page and "weather tools" in page
