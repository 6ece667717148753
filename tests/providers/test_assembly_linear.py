"""Live assembly is linear: streamed tool arguments are parsed incrementally, and every
``partial`` is still exactly what parsing the whole prefix gives.

Growth is asserted by counting the characters handed to a parser, never by timing."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram.providers.assembly import AssistantStreamAssembler
from openprogram.providers.faux import FauxProvider, chunk_fixed, faux_text, faux_tool_call
from openprogram.providers.partial_json import (
    StreamingJsonObject,
    parse_streaming_json,
    split_unfinished_escape,
)
from openprogram.providers.types import Context, Model, UserMessage

MODEL = Model(id="scripted", api="faux", provider="faux")
CONTEXT = Context(messages=[UserMessage(content="hi", timestamp=1)])
CODE_LINE = 'def f(x):\n    return "caf\u00e9 \U0001f600" + str(x)  # \\ comment\t\n'


def file_arguments(size: int) -> str:
    """Arguments of a file-writing tool call, about ``size`` characters of JSON, with escapes
    (newlines, quotes, backslashes, tabs) and non-ASCII text throughout the content."""
    content = CODE_LINE * (size // len(orjson.dumps(CODE_LINE)) + 1)
    return orjson.dumps({"path": "src/module.py", "content": content, "mode": "w"}).decode()


def feed_all(text: str, size: int) -> tuple[StreamingJsonObject, list[dict]]:
    parser = StreamingJsonObject()
    return parser, [parser.feed(piece) for piece in chunk_fixed(text, size)]


def assert_every_prefix_parsed_fully(
    text: str, size: int
) -> tuple[StreamingJsonObject, list[dict]]:
    """Feed ``text`` in ``size``-character pieces: each value equals the full parse of its prefix."""
    parser, values = feed_all(text, size)
    prefixes = [text[:end] for end in range(size, len(text), size)] + [text]
    assert values == [parse_streaming_json(prefix) for prefix in prefixes]
    return parser, values


# ----------------------------------------------------------------------------- semantics


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("   ", {}),
        ('{"', {}),
        ('{"city', {}),
        ('{"city":', {}),
        ('{"city":"', {"city": ""}),
        ('{"city":"Par', {"city": "Par"}),
        ('{"city":"Paris","unit', {"city": "Paris"}),
        ('{"a":12', {"a": 12}),
        ('{"b":2,"a":1.', {"b": 2}),
        ('{"a":tr', {}),
        ('{"a":[1,2', {"a": [1, 2]}),
        ('{"a":"x\\', {"a": "x"}),
        ('{"a":"x\\u00', {"a": "x"}),
        ('{"a":{"b":"c', {"a": {"b": "c"}}),
        ("[1,2", {}),
        ('"abc', {}),
        ("not json", {}),
    ],
)
def test_prefixes_keep_trailing_strings_and_drop_unfinished_tokens(text, expected):
    assert parse_streaming_json(text) == expected
    _, values = feed_all(text, 1)
    assert (values[-1] if values else {}) == expected


@pytest.mark.parametrize(
    ("fragment", "settled", "carry"),
    [
        ("abc", "abc", ""),
        ("ab\\", "ab", "\\"),
        ("ab\\\\", "ab\\\\", ""),
        ("ab\\\\\\", "ab\\\\", "\\"),
        ("ab\\n", "ab\\n", ""),
        ("ab\\u00", "ab", "\\u00"),
        ("ab\\u00e9", "ab\\u00e9", ""),
        ("ab\\ud83d", "ab", "\\ud83d"),
        ("ab\\ud83d\\u", "ab", "\\ud83d\\u"),
        ("ab\\ud83d\\ude00", "ab\\ud83d\\ude00", ""),
        ("ab\\\\ud83d", "ab\\\\ud83d", ""),
    ],
)
def test_an_unfinished_escape_is_held_back(fragment, settled, carry):
    assert split_unfinished_escape(fragment) == (settled, carry)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 64])
def test_every_prefix_matches_a_full_parse(size):
    text = file_arguments(600)
    parser, values = assert_every_prefix_parsed_fully(text, size)
    assert values[-1] == orjson.loads(text)
    assert parser.text == text


@pytest.mark.parametrize(
    "text",
    [
        file_arguments(300),
        orjson.dumps({"rows": [[i, "s", {"k": [i]}] for i in range(40)]}).decode(),
    ],
)
def test_earlier_values_never_change(text):
    """Each value is its own: what was returned for one fragment is not changed by the next."""
    parser = StreamingJsonObject()
    values, frozen = [], []
    for piece in chunk_fixed(text, 5):
        values.append(parser.feed(piece))
        frozen.append(orjson.dumps(values[-1]))
    assert [orjson.dumps(value) for value in values] == frozen


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(max_size=6), json_values, max_size=5), st.integers(1, 9), st.booleans()
)
def test_any_object_in_any_pieces_matches_a_full_parse(document, size, escape_non_ascii):
    text = json.dumps(
        document, ensure_ascii=escape_non_ascii
    )  # escaped: surrogate pairs split mid-escape
    assert_every_prefix_parsed_fully(text, size)


TRICKY = [
    '{"a":"x\\ud83d"}',  # a lone high surrogate closes the string: the full parse rejects it
    '{"a":"x\\ud83d\\ude00y", "b": "\\\\\\"q"}',  # a pair cut anywhere; escaped backslash and quote
    '{"a":"bad \\q escape"}',
    '{"a":"control \x01 char"}',
    '{"k\\"e\\u0079":"v1", "k\\"ey": "v2"}',  # keys with escapes, the same key twice
    '{"a":{"y":"1"},"b":{"y":"q"},"a":{"y":"long value"}}',  # duplicate keys, nested
    '{"l":[["s1","s2"],{"m":"s3"}],"n":[1.5e3,true,null,"t"]}',
    '{"a": "x" , "b" : [ "y" , "z" ] }',
]


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("size", [1, 2, 3, 5, 7])
def test_tricky_texts_match_a_full_parse_at_every_prefix(text, size):
    assert_every_prefix_parsed_fully(text, size)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(max_size=4), json_values, max_size=4),
    st.integers(1, 6),
    st.integers(0, 10**6),
    st.sampled_from([*' ,:{}[]"\\x1-.e0tn', "\x01", "\ud800", "Infinity", "tru", "1.5e"]),
)
def test_a_corrupted_object_still_matches_the_full_parse(document, size, where, extra):
    """Invalid JSON (a character inserted anywhere) is detected where the full parse detects it."""
    text = json.dumps(document)
    where %= len(text) + 1
    assert_every_prefix_parsed_fully(text[:where] + extra + text[where:], size)


def test_invalid_text_never_raises():
    _, values = feed_all('{"a": "x\x01y", "b": \\q, ]]', 2)
    assert all(isinstance(value, dict) for value in values)


def test_duplicate_keys_are_parsed_like_the_full_parse():
    text = '{"a":"x","b":"q","a":"yyyyyyyyyy'
    _, values = feed_all(text, 3)
    assert values[-1] == {"a": "yyyyyyyyyy", "b": "q"}


# ----------------------------------------------------------------------------- linear work


@pytest.mark.parametrize("size", [8, 1])
def test_parsing_work_grows_linearly_with_the_arguments(size):
    """Characters handed to a parser over 10/20/40/80 KB: at most a constant per input
    character, the same at every size (re-parsing every prefix would hand over about
    n^2 / (2 * size): 640 times the input at 10 KB in 8-character pieces)."""
    work = {}
    for kb in (10, 20, 40, 80):
        text = file_arguments(kb * 1024)
        parser = StreamingJsonObject()
        for piece in chunk_fixed(
            text, size
        ):  # values not kept: 80 KB in 1-char pieces would hold GBs
            parser.feed(piece)
        work[kb] = parser.parsed_chars
        assert parser.parsed_chars <= 8 * len(text), (kb, parser.parsed_chars, len(text))
        assert parser.full_parses == 0
    assert work[80] <= 2.2 * work[40] and work[40] <= 2.2 * work[20] and work[20] <= 2.2 * work[10]


def test_numbers_and_literals_are_parsed_once_each():
    """Many small values (a table of numbers) are parsed token by token, never re-parsed."""
    for rows in (500, 1000, 2000, 4000):
        text = orjson.dumps({"rows": [[i, i * 2.5, True, None, -i] for i in range(rows)]}).decode()
        parser = StreamingJsonObject()
        for piece in chunk_fixed(text, 8):
            value = parser.feed(piece)
        assert value == orjson.loads(text)
        assert parser.full_parses == 0
        assert parser.parsed_chars <= 2 * len(text), (rows, parser.parsed_chars, len(text))


async def test_the_faux_provider_streams_large_arguments_with_linear_parsing(monkeypatch):
    parsers: list[StreamingJsonObject] = []
    original = StreamingJsonObject.__init__

    def tracked(self, text=""):
        original(self, text)
        parsers.append(self)

    monkeypatch.setattr(StreamingJsonObject, "__init__", tracked)
    arguments = orjson.loads(file_arguments(40 * 1024))
    provider = FauxProvider([faux_tool_call("write", arguments)])
    events = [event async for event in provider.stream(MODEL, CONTEXT)]
    deltas = [event for event in events if event.type == "toolcall_delta"]
    text_length = sum(len(event.delta) for event in deltas)
    assert len(deltas) > 4000
    assert deltas[len(deltas) // 2].partial.content[0].arguments == parse_streaming_json(
        "".join(event.delta for event in deltas[: len(deltas) // 2 + 1])
    )
    assert [event.tool_call.arguments for event in events if event.type == "toolcall_end"] == [
        arguments
    ]
    assert len(parsers) == 1 and parsers[0].parsed_chars <= 8 * text_length


def test_google_style_whole_arguments_are_final_at_the_end():
    assembler = AssistantStreamAssembler(MODEL)
    index, _ = assembler.begin_tool_call("call-1", "write")
    assembler.set_tool_arguments(index, {"path": "a", "n": [1, 2]})
    end = assembler.end_tool_call(index)
    assert end.tool_call.arguments == {"path": "a", "n": [1, 2]}


async def test_text_deltas_add_only_their_own_length_to_the_text():
    """Text assembles by appending: each snapshot's text is the previous one plus the delta
    (one new string per event, which the immutable snapshots need, and nothing re-built)."""
    text = " ".join(f"w{i}x" for i in range(5000))
    events = [
        event
        async for event in FauxProvider([faux_text(text)], words_per_chunk=1).stream(MODEL, CONTEXT)
    ]
    previous = ""
    for event in events:
        if event.type == "text_delta":
            assert event.partial.content[0].text == previous + event.delta
            previous = event.partial.content[0].text
    assert previous == text


def test_arguments_given_whole_can_still_be_continued():
    parser = StreamingJsonObject('{"a":"x')
    assert parser.feed('yz", "b": [1') == {"a": "xyz", "b": [1]}
    assert parser.feed("2]}") == {"a": "xyz", "b": [12]}
    assert parser.text == '{"a":"xyz", "b": [12]}'


def test_separators_and_keys_are_not_parsed_again():
    parser = StreamingJsonObject()
    parser.feed('{"a": "x"')
    parses = parser.full_parses
    for piece in [" ", ",", ' "lon', "g key", '"', " :", " "]:
        assert parser.feed(piece) == {"a": "x"}
    assert parser.full_parses == parses
