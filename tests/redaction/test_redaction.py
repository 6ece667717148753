"""Redaction (docs/file-format.md): by field name, by value shape, by known value; prose and
ordinary payloads untouched; ``safe_cut`` lets a growing string be redacted piecewise."""

from __future__ import annotations

import copy
import os
import string
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openprogram.providers.types import (
    AssistantMessage,
    EventTextDelta,
    TextContent,
    ToolCall,
)
from openprogram.recordings import redaction
from openprogram.recordings.redaction import (
    PLACEHOLDER,
    REDACTION_VERSION,
    SECRET_FIELD_NAMES,
    is_secret_field_name,
    redact_text,
    remove_secret_values,
    safe_cut,
)

KEY = "Q7sEcReT0123456789abcd"  # a known value, planted through the environment


@pytest.fixture
def known_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return KEY


# ============================================================================ constants


def test_constants():
    assert PLACEHOLDER == "[secret removed]"
    assert REDACTION_VERSION == 4
    assert isinstance(SECRET_FIELD_NAMES, frozenset)
    assert SECRET_FIELD_NAMES == {
        "authorization", "proxy-authorization", "api_key", "apikey", "x-api-key",
        "x-goog-api-key", "api-key", "token", "access_token", "refresh_token", "id_token",
        "cookie", "set-cookie", "secret", "client_secret", "password", "session_key",
    }  # fmt: skip


# ============================================================================ field names


@pytest.mark.parametrize(
    "name",
    sorted(SECRET_FIELD_NAMES)
    + [name.upper() for name in sorted(SECRET_FIELD_NAMES)]
    + [
        "Authorization", "Proxy-Authorization", "X-API-Key", "X-Goog-Api-Key", "Set-Cookie",
        "apiKey", "APIKey", "XApiKey", "x_api_key", "api key", "X-Session-Token", "refreshToken",
        "clientSecret", "service_api_key", "AWS_SECRET_ACCESS_KEY", "privateKey", "private-key",
        "accessKey", "sessionKey", "secretKey", "OAuthToken", "IDToken", "db_password",
        "github_token", "webhookSecret", "openai_apikey",
    ],
)  # fmt: skip
def test_secret_field_names(name):
    assert is_secret_field_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "max_tokens", "token_count", "tokenCount", "total_tokens", "input_tokens", "maxTokens",
        "sort_key", "cache_key", "primary_key", "key", "keys", "tokens", "passwords_count",
        "secretary", "tokenizer", "content", "text", "partial", "arguments", "", "_", "--",
        "cache_retention", "session_id", "api", "secrets_manager_url",
    ],
)  # fmt: skip
def test_field_names_that_are_not_secrets(name):
    assert not is_secret_field_name(name)


def test_field_name_check_is_memoised_and_tolerates_non_strings():
    assert hasattr(is_secret_field_name, "cache_info")
    assert is_secret_field_name(7) is False
    assert is_secret_field_name(None) is False


# ============================================================================ by name


@pytest.mark.parametrize("value", ["sk-x", None, 0, 12345, True, 1.5, {"a": "b"}, ["a"], ""])
def test_secret_named_key_loses_its_whole_value_whatever_its_type(value):
    assert remove_secret_values({"api_key": value, "n": 1}) == {"api_key": PLACEHOLDER, "n": 1}


def test_names_are_found_at_any_depth_and_counters_survive():
    payload = {
        "model": {"headers": {"Authorization": "Bearer abc", "X-Trace": "t1"}},
        "options": {
            "max_tokens": 100,
            "metadata": {"refreshToken": {"deep": "x"}, "token_count": 3, "sort_key": "k"},
            "items": [{"password": "hunter2"}, ({"cookie": "c=1"},)],
        },
        "usage": {"input_tokens": 5, "total_tokens": 7, "tokenCount": 2, "cache_key": "ck"},
    }
    assert remove_secret_values(payload) == {
        "model": {"headers": {"Authorization": PLACEHOLDER, "X-Trace": "t1"}},
        "options": {
            "max_tokens": 100,
            "metadata": {"refreshToken": PLACEHOLDER, "token_count": 3, "sort_key": "k"},
            "items": [{"password": PLACEHOLDER}, [{"cookie": PLACEHOLDER}]],
        },
        "usage": {"input_tokens": 5, "total_tokens": 7, "tokenCount": 2, "cache_key": "ck"},
    }


def test_result_is_new_and_input_is_not_mutated():
    inner = {"api_key": "x", "list": [1, {"token": "t"}], "tuple": (1, 2)}
    payload = {"a": inner}
    before = copy.deepcopy(payload)
    result = remove_secret_values(payload)
    assert payload == before
    assert result is not payload and result["a"] is not inner
    assert result["a"]["list"] is not inner["list"]
    assert result["a"]["tuple"] == [1, 2] and type(result["a"]["tuple"]) is list
    assert remove_secret_values(("a", ("b",))) == ["a", ["b"]]


def test_scalars_and_other_values_pass_through():
    for value in (None, True, 0, 1.5, "plain text", b"bytes"):
        assert remove_secret_values(value) == value


# ============================================================================ by shape

PROSE = [
    "the key point is basic stuff",
    "bearer of news",
    "Bearer of the ring, keeper of the key",
    "Token economics",
    "token by token",
    "sk-learn",
    "use sk-learn and scikit-learn",
    "Basic English 101",
    "basic auth is described in RFC 7617",
    "risk-adjusted-return-calculation-model",
    "task-scheduler-for-distributed-systems",
    "max_tokens=4096 and token_count: 12",
    "see https://example.com/docs?page=2&sort=asc#top",
    "https://example.com/search?q=api+key&lang=en",
    "mail me at someone@example.com",
    "the key=value pairs",
    "x = a & b; y = c ? d : e",
    "ssh://git@github.com/org/repo.git is a remote",
    "",
    "ünïcödé text with emoji 🎉 and \u2028 separators",
]


@pytest.mark.parametrize("text", PROSE)
def test_prose_is_left_alone(text):
    assert redact_text(text) == text


# The well-known prefixed credentials, JWTs, PEM blocks, sk- keys anywhere.
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAxyz123\nabcDEF456==\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc123def456", f"Authorization: Bearer {PLACEHOLDER}"),
        ("bearer eyJhbGciOi.J9eyJzdWIi.Ok-_~+/=1", f"bearer {PLACEHOLDER}"),
        ("BEARER  a1b2c3d4e5 done", f"BEARER  {PLACEHOLDER} done"),
        ("Basic dXNlcjE6cGFzcw==", f"Basic {PLACEHOLDER}"),
        ("Token\tghp_1234567890abcdef", f"Token\t{PLACEHOLDER}"),
        ('{"auth": "Bearer 1234abcd"}', f'{{"auth": "Bearer {PLACEHOLDER}"}}'),
        ("key sk-abcdefghijklmnopqrstu1 there", f"key {PLACEHOLDER} there"),
        ("sk-proj-ABCDEFGHIJKLMNOPQRSTUVW1_yz", PLACEHOLDER),
        ('"sk-ant-api03-abcdefgh1jklmnopqrstuv"', f'"{PLACEHOLDER}"'),
        ("https://user:pa55word@host.example/path", f"https://{PLACEHOLDER}@host.example/path"),
        ("redis://:s3cret@cache:6379/0", f"redis://{PLACEHOLDER}@cache:6379/0"),
        ("https://u:p@ss@host/x@y", f"https://{PLACEHOLDER}@host/x@y"),
        ("https://ghp_1a2b3c4d5e@github.com/x", f"https://{PLACEHOLDER}@github.com/x"),
        ("https://x/y?api_key=abc12345&q=1", f"https://x/y?api_key={PLACEHOLDER}&q=1"),
        ("https://x/y?q=1&apikey=abc12345#f", f"https://x/y?q=1&apikey={PLACEHOLDER}#f"),
        ("https://x/y?key=AIzaSyABC", f"https://x/y?key={PLACEHOLDER}"),
        ("https://x/y?access_token=a.b.c.d.e&token=t1234567", f"https://x/y?access_token={PLACEHOLDER}&token={PLACEHOLDER}"),
        ("https://x/y?API_KEY=abc12345", f"https://x/y?API_KEY={PLACEHOLDER}"),
        ("https://x/y?client_secret=abc12345", f"https://x/y?client_secret={PLACEHOLDER}"),
        ("https://x/y?a=1?key=abc12345", f"https://x/y?a=1?key={PLACEHOLDER}"),
        ("<a href='https://x/?q=1&amp;key=abc12345'>", f"<a href='https://x/?q=1&amp;key={PLACEHOLDER}'>"),
        ("(see https://x/?key=abc12345)", f"(see https://x/?key={PLACEHOLDER})"),
        # well-known prefixed credentials, JWTs, PEM blocks, sk- keys anywhere
        ("use ghp_1234567890abcdefghijABCDEFGHIJ now", f"use {PLACEHOLDER} now"),
        ("gho_abcdefghijklmnopqrstuvwxyz123456", PLACEHOLDER),
        ("ghu_abcdefghijklmnopqrstuvwxyz123456 ghs_abcdefghijklmnopqrstuvwxyz123456", f"{PLACEHOLDER} {PLACEHOLDER}"),
        ("github_pat_11ABCDEFG0abcdefghij_klmnopqrstuvwxyz0123456789", PLACEHOLDER),
        ("worker-ghp_1234567890abcdefghijABCDEFGHIJ", f"worker-{PLACEHOLDER}"),  # "-" is no token character
        ("key: AIzaSyA1234567890abcdefghijklmnopqrstu", f"key: {PLACEHOLDER}"),
        ("id AKIAIOSFODNN7EXAMPLE.", f"id {PLACEHOLDER}."),
        ("ASIAY34FZKBOKMUTVV7A", PLACEHOLDER),
        ("xoxb-1234567890-abcdefghij", PLACEHOLDER),
        ("xoxp-12345-67890-abcdef", PLACEHOLDER),
        ("xoxp-1234567890123-1234567890123-1234567890123-0123456789abcdef0123456789abcdef", PLACEHOLDER),
        ("xoxa-2-1234567890-1234567890123-abcdef0123456789", PLACEHOLDER),
        ("xoxr-1234567890-abcdefghij", PLACEHOLDER),
        ("xoxb-aB3dE6gH9jK2mN5pQ8sT1vW4", PLACEHOLDER),  # no numeric id, but a generated body
        ("xoxo-1234567890-1234567890-1234567890-0a1b2c3d4e", PLACEHOLDER),  # legacy form
        ("xoxs-1234567890-1234567890-1234567890-0a1b2c3d4e", PLACEHOLDER),
        ("ASIAIOSFODNN7EXAMPLE", PLACEHOLDER),
        ("sk_live_abcdefghij1234567890", PLACEHOLDER),
        ("rk_live_abcdefghij1234567890", PLACEHOLDER),
        ("hf_abcdefghijklmnopqrstuvwxyz123456", PLACEHOLDER),
        (f"jwt={JWT}&x", f"jwt={PLACEHOLDER}&x"),
        (f"the key:\n{PEM}\nok", f"the key:\n{PLACEHOLDER}\nok"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN abc", f"{PLACEHOLDER}"),
        ("(sk-abcdefghijklmnopqrstu1)", f"({PLACEHOLDER})"),
        ("key=sk-abcdefghijklmnopqrstu1", f"key={PLACEHOLDER}"),
        ("Basic dXNlcjE6cGFzcw1=", f"Basic {PLACEHOLDER}"),
        ("Bearer 2024-01-01abcdef9", f"Bearer {PLACEHOLDER}"),
        ("Token 0x1234abcdZZ9", f"Token {PLACEHOLDER}"),
    ],
)  # fmt: skip
def test_value_shapes_are_removed(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Bearer abcdefgh",  # no digit
        "Bearer a1b2c3",  # too short
        "xBearer abc123def456",  # not a word
        "sk-abcdefghijklmnopqrs",  # 19 characters after sk-
        "mask-abcdefghijklmnopqrstuvwxyz",  # the tail of a word, no digit
        # Shapes count on whole tokens only (redaction version 3): "sk-" inside a word, after a
        # character an sk- key may hold, is part of that word.
        "sess-sk-abcdefghijklmnopqrstu1",
        "x_sk-abcdefghijklmnopqrstu1",
        "abcsk-abcdefghijklmnopqrstu1",
        "mask-abcdefghijklmnopqrstuvwxyz123",
        "task-1234-fix-login-redirect",
        "hf_AutoModelForCausalLM",
        "version token 1.2.3-beta4",
        "Basic 2000-series",
        "Bearer 2nd-generation-bonds",
        "Bearer 12345678",  # one character class: not a credential's body
        "https://x/y?token=t",  # a value too short to hold 8 characters of a secret
        "docker://alpine:3.18@sha256:" + "0123456789abcdef" * 4,
        "https://x/y?q=api_key&page=2",
        "https://x/y?max_tokens=100",
    ],
)
def test_near_misses_are_kept(text):
    assert redact_text(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "Basic 2024-01-01 plan",
        "Token 2023/2024 season",
        "the token 0x1234abcd is an address",
        "bearer v1.2.3 release",
        "Bearer 1.2.3.4567 build",
        "Token 10.20.30 notes",
        "ghp_short",
        "AKIA is a prefix, AKIAshort too",
        "hf_hub_download is a function",
        "xox-not-slack",
        "xoxo-love-you-forever-2",  # a sign-off, not a legacy token's documented form
        "Love, xoxo-hugs-and-kisses-2024 and more",
        "xoxb-release-notes-v2",  # no numeric id, nothing generated
        "ASIAPACIFIC2024Q3REV",  # 0, 1, 8 and 9 are not in an access key id's base32
        "sk_test_abcdefghij1234567890",
        "eyJhbGci is the start of a JWT header",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        "risk-assessment-framework-overview",
    ],
)
def test_v1_1_prose_is_left_alone(text):
    assert redact_text(text) == text


def test_redaction_is_idempotent():
    for text in [
        "Bearer abc123def456 and https://u:p@h/?key=k1&token=t2 and sk-abcdefghijklmnopqrstu1",
        f"x?key={PLACEHOLDER}",
        f"https://{PLACEHOLDER}@host",
    ]:
        once = redact_text(text)
        assert redact_text(once) == once


# ============================================================================ by known value


def test_known_values_are_removed_anywhere(known_key):
    assert redact_text(f"key is {KEY}.") == f"key is {PLACEHOLDER}."
    assert redact_text(f"glued{KEY}glued") == f"glued{PLACEHOLDER}glued"
    assert remove_secret_values({"note": [f"x{KEY}"]}) == {"note": [f"x{PLACEHOLDER}"]}
    # Keys are strings too.
    assert remove_secret_values({f"k{KEY}": 1}) == {f"k{PLACEHOLDER}": 1}


def test_short_known_values_are_not_used(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "abc")
    assert redact_text("abc abcabc") == "abc abcabc"


def test_known_value_matcher_is_rebuilt_only_when_the_set_changes(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "first-key-12345")
    first = redaction._known_values()
    assert redaction._known_values() is first
    monkeypatch.setenv("ANTHROPIC_API_KEY", "second-key-12345")
    second = redaction._known_values()
    assert second is not first
    assert redact_text("first-key-12345 second-key-12345") == f"{PLACEHOLDER} {PLACEHOLDER}"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert redact_text("second-key-12345") == "second-key-12345"


def test_a_longer_known_value_containing_a_shorter_one_goes_whole(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "abcdefgh")
    monkeypatch.setenv("GROQ_API_KEY", "abcdefgh-and-more")
    assert redact_text("[abcdefgh-and-more]") == f"[{PLACEHOLDER}]"


# ============================================================================ round trip


def test_ordinary_payloads_round_trip_byte_identical():
    partial = AssistantMessage(
        content=[
            TextContent(text="The key point: Token economics is basic stuff.\nBearer of news."),
            ToolCall(
                id="call_1",
                name="search",
                arguments={
                    "query": "sk-learn vs torch",
                    "url": "https://example.com/a?q=1&page=2",
                    "max_tokens": 10,
                    "limit": 3,
                    "nested": {"flag": True, "ratio": 0.5, "none": None, "items": [1, "two"]},
                },
            ),
        ],
        api="openai-completions",
        provider="openai",
        model="gpt-4o-mini",
        timestamp=1,
    )
    dump = EventTextDelta(content_index=0, delta="Bearer of news.", partial=partial).model_dump(
        mode="json"
    )
    assert orjson.dumps(remove_secret_values(dump)) == orjson.dumps(dump)


# ============================================================================ safe_cut


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("", 0),
        ("word", 0),
        ("a b", 2),
        ("a b ", 4),
        ("one two\nthree", 8),
        ("hello Bearer ", 6),
        ("hello Bearer  \t", 6),
        ("hello token\n", 12),  # only spaces and tabs separate a scheme from its credential
        ("x basic", 2),
        ("Bearer ", 0),
        ("see https://u:p", 4),
    ],
)
def test_safe_cut_points(text, cut):
    assert safe_cut(text) == cut


def test_safe_cut_gives_up_when_a_known_value_contains_whitespace(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "my secret value")
    assert safe_cut("lots of words here ") == 0
    assert redact_text("say my secret value now") == f"say {PLACEHOLDER} now"


_FRAGMENTS = [
    " ", "  ", "\t", "\n", "Bearer ", "bearer ", "Basic ", "Token ", "token", "sk-", "sk",
    "-", "_", "abc", "XYZ", "0", "12345678", "a1b2c3d4", "ghp_", "?key=", "&token=", "?",
    "&", "=", "://", "://u:p@", "https", "@", "/", "#", ".", "secret", "KNOWNkey1",
    "KNOWN", "key1", '"', "[secret removed]",
]  # fmt: skip
_texts = st.lists(st.sampled_from(_FRAGMENTS), max_size=14).map("".join)


@settings(
    max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(prefix=_texts, extension=_texts)
def test_safe_cut_never_splits_a_secret(prefix, extension):
    with mock.patch.dict(os.environ, {"OPENAI_API_KEY": "KNOWNkey1"}):
        cut = safe_cut(prefix)
        assert 0 <= cut <= len(prefix)
        whole = prefix + extension
        assert redact_text(whole) == redact_text(whole[:cut]) + redact_text(whole[cut:])


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_texts, min_size=1, max_size=8))
def test_incremental_redaction_of_a_growing_string_matches_whole_redaction(pieces):
    """The way a recorder uses safe_cut: redact the stable prefix once, re-redact the tail."""
    with mock.patch.dict(os.environ, {"OPENAI_API_KEY": "KNOWNkey1"}):
        text, stable, stable_length = "", "", 0
        for piece in pieces:
            text += piece
            tail = text[stable_length:]
            cut = safe_cut(tail)
            stable += redact_text(tail[:cut])
            stable_length += cut
            assert stable + redact_text(text[stable_length:]) == redact_text(text)


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet=" \t\n\r\f\va\u2028\x00\xa0", max_size=12), end=st.integers(0, 12))
def test_the_last_whitespace_is_found_however_it_is_searched(text, end):
    end = min(end, len(text))
    slow = max(text.rfind(ch, 0, end) for ch in redaction._CUT_WHITESPACE)
    assert redaction._last_whitespace(text, end) == slow


@settings(
    max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=_texts)
def test_a_trigger_free_text_is_its_own_redaction(text):
    """The recorder writes a trigger-free text as it is, without redacting it."""
    with mock.patch.dict(os.environ, {"OPENAI_API_KEY": "KNOWNkey1"}):
        trigger = redaction.current_redactor().trigger()
        if trigger.search(text, 0) is None:
            assert redact_text(text) == text


@settings(
    max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(prefix=_texts, extension=_texts)
def test_searching_only_the_reach_before_appended_text_finds_every_new_trigger(prefix, extension):
    with mock.patch.dict(os.environ, {"OPENAI_API_KEY": "KNOWNkey1"}):
        trigger = redaction.current_redactor().trigger()
        if trigger.search(prefix, 0) is None:
            whole = prefix + extension
            found_near = trigger.search(whole, len(prefix) - trigger.reach + 1) is not None
            assert found_near == (trigger.search(whole, 0) is not None)


@pytest.mark.parametrize(
    "text",
    ["a@b", "x=1", "sk-", "BEARER", "bAsIc", "Token", "xxKNOWNkey1xx"],
)
def test_every_rule_has_a_trigger(text):
    with mock.patch.dict(os.environ, {"OPENAI_API_KEY": "KNOWNkey1"}):
        assert redaction.current_redactor().trigger().search(text, 0) is not None


def test_the_reach_covers_the_longest_known_value(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "a-rather-long-known-value-0123456789")
    trigger = redaction.current_redactor().trigger()
    assert trigger.reach == len("a-rather-long-known-value-0123456789")
    text = "a-rather-long-known-value-01234" + "56789"
    assert trigger.search(text, len(text) - 5 - trigger.reach + 1) is not None


# ============================================================================ planted secrets

_SECRET_NAMES = [
    "api_key", "x-api-key", "apiKey", "X-Session-Token", "refreshToken", "client_secret",
    "AWS_SECRET_ACCESS_KEY", "servicePrivateKey", "Authorization", "Cookie", "db-password",
]  # fmt: skip
_QUERY_NAMES = ["api_key", "apikey", "key", "access_token", "token", "API_KEY", "Token"]
_WORDS = [
    "the", "key", "point", "is", "basic", "stuff", "bearer", "of", "news", "Token", "economics",
    "sk-learn", "Basic", "English", "101", "https://example.com/a?q=1&page=2", "max_tokens",
    "token", "a", "key=value", "user@example.com", "café", "\n",
]  # fmt: skip
_prose = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8).map(" ".join)
# Secrets are drawn from an alphabet and a marker that prose never contains.
_secrets = st.text(string.ascii_letters + string.digits, min_size=10, max_size=24).map(
    lambda s: "Q7" + s
)


@st.composite
def _planted(draw):
    """A payload with secrets planted in every way the contract names, the secrets, and the
    non-secret strings that must survive unchanged."""
    secrets: list[str] = []
    prose: list[str] = []

    def secret() -> str:
        value = draw(_secrets)
        secrets.append(value)
        return value

    def text() -> str:
        value = draw(_prose)
        prose.append(value)
        return value

    known = secret()
    fields = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(
            st.sampled_from(["name", "header", "userinfo", "query", "bearer", "sk", "known"])
        )
        if kind == "name":
            holder = draw(st.sampled_from(["plain", "dict", "list", "none"]))
            value = {
                "plain": secret,
                "dict": lambda: {"inner": secret()},
                "list": lambda: [secret()],
                "none": lambda: None,
            }[holder]()
            fields.append({draw(st.sampled_from(_SECRET_NAMES)): value})
        elif kind == "header":
            fields.append(
                {
                    "headers": {
                        "Authorization": f"Bearer {secret()}",
                        "X-Api-Key": secret(),
                        "Accept": text(),
                    }
                }
            )
        elif kind == "userinfo":
            fields.append(
                {"url": f"https://user:{secret()}@host.example/v1?{text().replace(' ', '')[:5]}=1"}
            )
        elif kind == "query":
            fields.append(
                {
                    "url": f"https://host.example/v1?q=1&{draw(st.sampled_from(_QUERY_NAMES))}={secret()}&page=2"
                }
            )
        elif kind == "bearer":
            fields.append(
                {
                    "text": f"{text()} {draw(st.sampled_from(['Bearer', 'bearer', 'Basic', 'Token']))} {secret()} {text()}"
                }
            )
        elif kind == "sk":
            fields.append({"text": f"{text()} sk-{secret()}{'x' * 10}, {text()}"})
        else:
            fields.append({"text": f"{text()}{known}{text()}"})
    fields.append({"prose": [text() for _ in range(draw(st.integers(0, 4)))]})
    payload = {"messages": fields, "options": ({"temperature": 0.5, "max_tokens": 10},)}
    return payload, known, secrets, prose


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_planted())
def test_no_planted_secret_survives_and_nothing_else_changes(planted):
    payload, known, secrets, prose = planted
    before = copy.deepcopy(payload)
    with mock.patch.dict(os.environ, {"OPENAI_API_KEY": known}):
        result = remove_secret_values(payload)
    encoded = orjson.dumps(result).decode()
    for value in secrets:
        assert value not in encoded
    assert payload == before
    # Non-secret strings are unchanged: the last field holds only prose, and options survive.
    assert result["messages"][-1] == payload["messages"][-1]
    assert result["options"] == [{"temperature": 0.5, "max_tokens": 10}]
    for text in prose:
        assert redact_text(text) == text


def test_a_redactor_snapshot_redacts_like_the_functions(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    redactor = redaction.current_redactor()
    text = f"Bearer abc123def456 {KEY} https://u:p@h/?key=k"
    assert redactor.redact_text(text) == redact_text(text)
    assert redactor.safe_cut("a Bearer ") == safe_cut("a Bearer ") == 2
    assert redactor.remove_secret_values({"token": 1, "t": text}) == remove_secret_values(
        {"token": 1, "t": text}
    )


def test_safe_cut_never_cuts_inside_an_open_private_key_block():
    opened = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIE abc \n-----END RSA "
    assert safe_cut(opened) == len("key:\n")  # before the header, whatever whitespace follows
    closed = opened + "PRIVATE KEY-----\nthen more "
    assert safe_cut(closed) == len(closed)
    assert redact_text(closed) == f"key:\n{PLACEHOLDER}\nthen more "


def test_a_redactor_redacts_a_long_string_met_again_once(monkeypatch):
    """A recorded call meets its finished tool arguments several times (end event, snapshot,
    final message): one redaction pass each for a long value would cost several passes."""
    long_value = "https://example.com/?a=1&token=" + "t" * 200
    other = long_value.replace("a=1", "b=2")
    expected, expected_other = redaction.redact_text(long_value), redaction.redact_text(other)
    assert "t" * 20 not in expected
    passes = []
    real = redaction._redact
    monkeypatch.setattr(
        redaction,
        "_redact",
        lambda known, text: (len(text) > 64 and passes.append(text)) or real(known, text),
    )
    redactor = redaction.current_redactor()
    equal_copy = "".join([long_value[:10], long_value[10:]])  # equal, another object
    value = {"u": long_value, "v": [long_value], "w": {"x": equal_copy}}
    assert redactor.remove_secret_values(value) == {
        "u": expected,
        "v": [expected],
        "w": {"x": expected},
    }
    assert passes == [long_value]
    assert redactor.remove_secret_values([other, long_value]) == [expected_other, expected]
    # A request's long strings are kept with their redaction (an agent resends them every turn).
    assert passes == [long_value, other]
    assert redaction.current_redactor().remove_secret_values({"again": long_value}) == {
        "again": expected
    }
    assert passes == [long_value, other]
    assert redaction._known_values().last_long is None


def test_the_memo_of_long_request_strings_is_bounded(monkeypatch):
    monkeypatch.setattr(redaction, "_LONG_MEMO_MAX_CHARACTERS", 1_000)
    known = redaction._known_values()
    known.long_memo.clear()
    known.long_memo_size[0] = 0
    values = [f"value {n} " + "x" * 300 for n in range(10)]
    redactor = redaction.current_redactor()
    assert redactor.remove_secret_values(values) == values
    assert sum(map(len, known.long_memo)) <= 1_000
    assert known.long_memo_size[0] == sum(map(len, known.long_memo))


def test_a_resent_message_is_redacted_once_and_shared(monkeypatch):
    """Recording an agent: the conversation's messages come back every turn; each is redacted
    once and the same redacted object is stored again, so the writer's patch finds it at once."""
    redactor = redaction.current_redactor()
    key = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"
    message = {"role": "user", "content": f"use {key} please", "timestamp": 1}
    first = redactor.remove_from_request(
        {"model": {}, "context": {"messages": [message]}, "options": None}
    )
    again = redactor.remove_from_request(
        {
            "model": {},
            "context": {"messages": [dict(message), {"role": "user", "content": "next"}]},
            "options": None,
        }
    )
    assert first["context"]["messages"][0]["content"] == f"use {PLACEHOLDER} please"
    assert again["context"]["messages"][0] is first["context"]["messages"][0]
    # Equal in ==, not in JSON: another message, redacted on its own.
    other = redactor.remove_from_request(
        {"model": {}, "context": {"messages": [{**message, "timestamp": True}]}, "options": None}
    )
    assert other["context"]["messages"][0]["timestamp"] is True
