"""The redactor: every rule that decides what never reaches a recording (see
``docs/file-format.md``, "Redaction").

Two promises, measured together: no run of 8 or more characters of a secret reaches a file, and
**no value that is not a secret is changed** (a replay serves what the file holds, so an
over-eager rule breaks a user's test for good). Where the two pull apart, the rules are exact
rather than weak:

* **by field name**: in what the caller built (headers, options, metadata, tool schemas) a dict
  key that names a secret, in any of its forms, loses its whole value; in what the model
  produced (tool-call arguments, server-tool payloads) only the exact names do, so
  ``next_page_token`` or ``csrf_token`` stay data the agent passes on;
* **by value shape**, on whole tokens only: a shape counts where it starts at the start of a
  string or after a character its credential cannot hold, and its body must look like a
  credential of its kind (length, alphabet, a mix of character classes), so ``sk-learn``,
  ``task-1234-fix-login-redirect``, ``hf_AutoModelForCausalLM`` and ``Bearer 2nd-generation``
  are prose;
* **by known value**: provider keys, every ``api_key`` the process was given, values the user
  declared (``secrets=``, ``record_replay.secret_env``), and the value of any other
  secret-named environment variable that reads as a credential (``POSTGRES_PASSWORD=postgres``
  must not erase the word "postgres");
* **opaque vendor data loses only known values**: signatures, encrypted reasoning, image data,
  ids are random bytes, in which a shape is chance, so no value shape runs there; a known value
  of 8+ characters is no chance, and goes wherever it occurs. A server tool's fetched or
  searched text (a page's ``data``, a result's ``content``) is text, not opaque.

Run values (``{{name}}``) are replaced as whole tokens, and a literal ``{{name}}`` is escaped so
that replay gives it back literally.

This module owns the rules; the stream stage (:mod:`.stream_redaction`) decides *when* to apply
them to a growing text, and nothing else in the package defines one. The speed shortcuts
(trigger pre-checks, memoised short strings, one matcher per set of known values) are written
here beside the rule they serve, each small.
"""

from __future__ import annotations

import logging
import os
import re
import string
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache, lru_cache, partial
from itertools import repeat
from typing import Any, NamedTuple, Protocol, cast

import orjson

from ..providers import credentials as _credentials

__all__ = [
    "PLACEHOLDER",
    "REDACTION_VERSION",
    "Redactor",
    "SECRET_FIELD_NAMES",
    "Trigger",
    "current_redactor",
    "declare_secret_env",
    "is_secret_field_name",
    "reads_as_credential",
    "redact_lane",
    "redact_text",
    "remove_secret_values",
    "safe_cut",
    "use_declared_secrets",
]

PLACEHOLDER = "[secret removed]"

# Bump when the rules change in a way that changes what a recording holds: a recording made
# under other rules may redact a request differently from the replaying process.
# 3: whole-token shapes, opaque vendor data, exact names in model output, run-value escapes.
# 4: known values in opaque data too, fetched text in server-tool payloads, content blocks only
#    where content stands, Slack and AWS shapes in their documented forms.
REDACTION_VERSION = 4

logger = logging.getLogger("openprogram.recordings")

SECRET_FIELD_NAMES = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api_key",
        "apikey",
        "x-api-key",
        "x-goog-api-key",
        "api-key",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "cookie",
        "set-cookie",
        "secret",
        "client_secret",
        "password",
        "session_key",
    }
)

# ============================================================================ field names

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD_SEPARATORS = re.compile(r"[^a-z0-9]+")
# A name ending in one of these words names a secret ("X-Session-Token", "clientSecret"); a
# plural ("max_tokens") or a following word ("token_count") does not.
_SECRET_LAST_WORDS = frozenset({"token", "secret", "password", "apikey"})
_SECRET_LAST_PAIRS = frozenset(
    {("api", "key"), ("secret", "key"), ("private", "key"), ("access", "key"), ("session", "key")}
)


def _name_words(name: str) -> list[str]:
    """``"X-Session-Token"``, ``"x_session_token"`` and ``"xSessionToken"`` all become
    ``["x", "session", "token"]``."""
    return [word for word in _WORD_SEPARATORS.split(_CAMEL_BOUNDARY.sub("_", name).lower()) if word]


_NORMALISED_SECRET_NAMES = frozenset("_".join(_name_words(name)) for name in SECRET_FIELD_NAMES)


@lru_cache(maxsize=8192)
def is_secret_field_name(name: str) -> bool:
    """Whether a dict key the caller built names a secret, so that its whole value must go
    (every form: exact names and the suffix forms). Memoised: the same few dozen field names
    come back in every recorded event."""
    if not isinstance(name, str):
        return False
    words = _name_words(name)
    if not words:
        return False
    if "_".join(words) in _NORMALISED_SECRET_NAMES or words[-1] in _SECRET_LAST_WORDS:
        return True
    return len(words) >= 2 and (words[-2], words[-1]) in _SECRET_LAST_PAIRS


@lru_cache(maxsize=8192)
def is_exact_secret_name(name: str) -> bool:
    """Whether a key in what the model produced names a secret: only the exact names of
    ``SECRET_FIELD_NAMES`` (in any case or separator style), never the suffix forms."""
    return isinstance(name, str) and "_".join(_name_words(name)) in _NORMALISED_SECRET_NAMES


# ============================================================================ credential bodies

_SEGMENT_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
# A run of capitalised words and acronyms ("AutoModelForCausalLM"): an identifier, not a key.
_WORDS_LIKE = re.compile(r"(?:[A-Z]+[a-z]{2,}|[A-Z]{2,}|[0-9]+)+\Z")


@lru_cache(maxsize=4096)
def looks_random(body: str) -> bool:
    """Whether a token body reads as generated rather than written: one of its alphanumeric
    segments has 8+ characters mixing letters and digits, or 16+ letters mixing cases in no
    word-like pattern. Words, dates, versions, slugs and CamelCase identifiers do not."""
    for segment in _SEGMENT_SEPARATORS.split(body):
        size = len(segment)
        if size < 8:
            continue
        has_digit = not _DIGITS.isdisjoint(segment)
        if has_digit and not segment.isdigit():
            return True
        if size >= 16 and not has_digit and not segment.islower() and not segment.isupper():
            if not _WORDS_LIKE.match(segment):
                return True
    return False


def reads_as_credential(value: str) -> bool:
    """Whether an environment value is credential-like enough to be removed wherever it
    occurs: 8+ characters and not a plain word (``postgres``, ``Admin``, ``changeme``) nor a
    short number (a port)."""
    if len(value) < _credentials.MIN_SECRET_LENGTH:
        return False
    if any(ch in _CUT_WHITESPACE for ch in value):  # a passphrase, or prose
        return len(value) >= 16
    if value.isalpha():
        return len(value) >= 16 or not (value.islower() or value.isupper() or value.istitle())
    if value.isdigit():
        return len(value) >= 12
    return True


# ============================================================================ value shapes

# A shape counts at the start of a token: where nothing, or a character its credential cannot
# hold, stands before it; ``+`` and ``/`` count as part of a token everywhere (base64 text), so
# a shape inside a blob is not one. Each rule names the characters its credential may hold.


def _start(alphabet: str) -> str:
    return rf"(?<![{alphabet}+/])"


def _end(alphabet: str) -> str:
    return rf"(?![{alphabet}])"


_ALNUM = "A-Za-z0-9"


class _Shape(NamedTuple):
    """One value-shape rule: ``pattern`` finds candidates (a literal ``trigger`` must be in
    the text for it to match at all), ``accept`` says which are credentials."""

    name: str
    triggers: tuple[str, ...]
    pattern: re.Pattern[str]
    accept: Callable[[re.Match[str]], bool] | None


def _random_group(number: int) -> Callable[[re.Match[str]], bool]:
    return lambda match: looks_random(match.group(number))


_SLACK_LEGACY = re.compile(r"[0-9]+-[0-9]+-[0-9]+-[0-9a-fA-F]+\Z")


def _slack_body(kind: str, body: str) -> bool:
    """Whether what follows ``xox?-`` is a Slack token's body: it starts with the numeric team
    or user id (``xoxb-1234567890-...``) or reads as generated. ``xoxo-`` and ``xoxs-`` (legacy
    tokens, and ``xoxo`` is also a word) count only in their documented form,
    ``xoxo-<id>-<id>-<id>-<hex>``: ``xoxo-love-you-forever-2`` is a signature line."""
    if kind in "os":
        return bool(_SLACK_LEGACY.match(body))
    if _DIGITS.isdisjoint(body):
        return False
    return body.partition("-")[0].isdigit() or looks_random(body)


_SHAPES: tuple[_Shape, ...] = (
    _Shape(
        "sk-key",
        ("sk-",),
        re.compile(_start(r"A-Za-z0-9_\-") + r"sk-([A-Za-z0-9_-]{20,})" + _end(r"A-Za-z0-9_\-")),
        _random_group(1),
    ),
    _Shape(
        "github-token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        re.compile(_start(_ALNUM) + r"gh[pousr]_([A-Za-z0-9]{30,})" + _end(_ALNUM)),
        _random_group(1),
    ),
    _Shape(
        "github-token",
        ("github_pat_",),
        re.compile(_start(_ALNUM) + r"github_pat_([A-Za-z0-9_]{40,})" + _end(_ALNUM + "_")),
        _random_group(1),
    ),
    _Shape(
        "google-api-key",
        ("AIza",),
        re.compile(_start(r"A-Za-z0-9_\-") + r"AIza([0-9A-Za-z_-]{30,})" + _end(r"A-Za-z0-9_\-")),
        _random_group(1),
    ),
    _Shape(
        # The 16 characters after the prefix are base32 (A-Z, 2-7): "ASIAPACIFIC2024Q3REV" is not.
        "aws-access-key-id",
        ("AKIA", "ASIA"),
        re.compile(_start(_ALNUM) + r"(?:AKIA|ASIA)[A-Z2-7]{16}" + _end(_ALNUM)),
        None,
    ),
    _Shape(
        "slack-token",
        ("xox",),
        re.compile(
            _start(r"A-Za-z0-9\-") + r"xox([abposr])-([0-9A-Za-z-]{10,})" + _end(r"A-Za-z0-9\-")
        ),
        lambda match: _slack_body(match.group(1), match.group(2)),
    ),
    _Shape(
        "stripe-key",
        ("k_live_",),
        re.compile(_start(_ALNUM) + r"[sr]k_live_([A-Za-z0-9]{10,})" + _end(_ALNUM)),
        _random_group(1),
    ),
    _Shape(
        "huggingface-token",
        ("hf_",),
        re.compile(_start(_ALNUM) + r"hf_([A-Za-z0-9]{30,})" + _end(_ALNUM)),
        _random_group(1),
    ),
    _Shape(
        "jwt",
        ("eyJ",),
        re.compile(
            _start(r"A-Za-z0-9_\-.")
            + r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
            + _end(r"A-Za-z0-9_\-")
        ),
        None,
    ),
    _Shape(
        "private-key",
        ("-----BEGIN",),
        re.compile(
            r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----(?:.*?-----END[A-Z ]{0,40}PRIVATE KEY-----|.*\Z)",
            re.DOTALL,
        ),
        None,
    ),
)

# Credentials after an auth scheme word: 8+ token characters that read as generated. What reads
# as a date, a version or a hex address after the scheme word is prose.
_AUTH_SCHEMES = ("bearer", "basic", "token")
_AUTH = re.compile(
    r"\b((?:[Bb][Ee][Aa][Rr][Ee][Rr]|[Bb][Aa][Ss][Ii][Cc]|[Tt][Oo][Kk][Ee][Nn])[ \t]+)"
    r"([A-Za-z0-9._~+/=-]{8,})(?![A-Za-z0-9._~+/=-])",
    re.ASCII,
)
_HEX_ADDRESS = re.compile(r"0x[0-9a-fA-F]{1,40}\Z")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}\Z")


def _auth_credential(match: re.Match[str]) -> bool:
    body = match.group(2)
    if _HEX_ADDRESS.match(body):
        return False
    if match.group(1)[:5].lower() == "basic" and not _BASE64.match(body):
        return False
    return looks_random(body)


# Userinfo up to the last "@" before the host ends: "https://user:p@ss@host" loses "user:p@ss".
# Without a password it is removed only when it looks like a token ("https://ghp_1a2b3c4d@"),
# so "ssh://git@github.com" survives; "docker://alpine:3.18@sha256:..." is an image digest.
_USERINFO = re.compile(r"://([^\s/?#\[\]\"'<>\\`{}|^]+)@(?!sha(?:256|512):)")
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9._~+=-]{8,}")
_VERSION_LIKE = re.compile(r"[0-9.]+\Z")
# A query parameter; the callback decides from its name whether the value is a secret.
_QUERY_PARAM = re.compile(r"([?&;])([A-Za-z0-9_.\-]+)=([^\s&#;?\"'<>\\`{}|^\[\]()]+)")
_QUERY_SECRET_NAMES = frozenset({"api_key", "apikey", "key", "access_token", "token"})

_USERINFO_REPLACEMENT = "://" + PLACEHOLDER + "@"
_DIGITS: frozenset[str] = frozenset(string.digits)

# No rule can match a shorter string: "://a@" is the shortest (known values have 8+ chars).
_SHORTEST_SECRET_TEXT = 5
# Short strings (field values such as "assistant", "toolCall", model ids) repeat in every
# event; their redaction is memoised per set of known values, up to this many entries.
_MEMO_MAX_LENGTH = 64
#: The long strings of requests kept with their redaction, in characters (about 32 MB).
_LONG_MEMO_MAX_CHARACTERS = 8_000_000
#: The context messages kept with their redaction, in bytes of their JSON.
_MESSAGE_MEMO_MAX_BYTES = 32_000_000
_MEMO_MAX_ENTRIES = 16384

# Characters at which ``safe_cut`` may cut. No shape pattern and no known value (else
# ``safe_cut`` gives up) contains one, except the separator after an auth scheme word and the
# inside of a PEM private-key block (``safe_cut`` never cuts in either).
_CUT_WHITESPACE = " \t\n\r\f\v"


def _userinfo_replacement(match: re.Match[str]) -> str:
    userinfo = match.group(1)
    user, colon, password = userinfo.partition(":")
    if colon:
        if not password or _VERSION_LIKE.match(password):  # "host:8080@", "alpine:3.18@"
            return match.group(0)
        return _USERINFO_REPLACEMENT
    if _TOKEN_LIKE.fullmatch(userinfo) and looks_random(userinfo):
        return _USERINFO_REPLACEMENT
    return match.group(0)


@lru_cache(maxsize=1024)
def _is_query_secret_name(name: str) -> bool:
    return name.lower() in _QUERY_SECRET_NAMES or is_exact_secret_name(name)


def _query_replacement(match: re.Match[str]) -> str:
    name, value = match.group(2), match.group(3)
    if len(value) >= _credentials.MIN_SECRET_LENGTH and _is_query_secret_name(name):
        return f"{match.group(1)}{name}={PLACEHOLDER}"
    return match.group(0)


# ============================================================================ triggers

# The substrings without which no rule can match (see ``_redact``'s pre-checks): a string with
# none of them, and none of the known values, is its own redaction.
_SHAPE_TRIGGERS = tuple(dict.fromkeys(trigger for shape in _SHAPES for trigger in shape.triggers))
_TRIGGER_WORDS = ("@", "=", *_SHAPE_TRIGGERS)
_TRIGGER_WORDS_ANY_CASE = _AUTH_SCHEMES
_PREFIX_TRIGGER = re.compile("|".join(map(re.escape, _SHAPE_TRIGGERS))).search


def _any_case(word: str) -> list[str]:
    """``word`` in any ASCII case, as alternatives that each start with a literal character:
    that lets the regex engine skip every position whose character cannot start a match,
    where ``(?i:...)`` makes it try a match at every position (about 10x slower)."""
    rest = "".join(f"[{c.upper()}{c.lower()}]" for c in word[1:])
    return [word[0].upper() + rest, word[0].lower() + rest]


class TriggerSearch(Protocol):
    """``re.Pattern.search`` of the trigger pattern: ``start`` is optional (0 by default)."""

    def __call__(self, text: str, start: int = 0, /) -> re.Match[str] | None: ...


class Trigger(NamedTuple):
    """Finds what redaction could act on: ``search(text, start)`` is None only if no rule can
    match a substring of ``text`` beginning at ``start`` or later. ``reach`` is the longest
    trigger: a string known to be trigger-free stays so when text is appended to it if
    ``search(extended, len(string) - reach + 1)`` is None (the only new matches end in the
    appended part). The stream stage uses it to prove, in time bounded by the delta, that a
    growing text still needs no redaction."""

    search: TriggerSearch
    reach: int


def _trigger_for(values: tuple[str, ...], escapes: bool) -> Trigger:
    words = [*_TRIGGER_WORDS, *values, *(["{{"] if escapes else [])]
    alternatives = [
        *map(re.escape, words),
        *(a for w in _TRIGGER_WORDS_ANY_CASE for a in _any_case(w)),
    ]
    reach = max(map(len, [*words, *_TRIGGER_WORDS_ANY_CASE]))
    return Trigger(re.compile("|".join(alternatives), re.ASCII).search, reach)


# ============================================================================ known values


def value_token(name: str, escapes: int = 0) -> str:
    """What a recording stores in place of the run value ``name`` (``escapes`` 0), or of a
    literal ``{{name}}`` written with ``escapes - 1`` bangs: ``{{!name}}`` stands for the
    literal ``{{name}}``, so replay can tell the two apart."""
    return "{{" + "!" * escapes + name + "}}"


def _whole_token(value: str) -> str:
    """A pattern matching ``value`` only where it is not glued to a letter or digit on an end
    that is itself a letter or digit: ``8080`` matches in ``:8080/`` but not in ``18080``."""
    pattern = re.escape(value)
    if value[:1].isalnum():
        pattern = r"(?<![A-Za-z0-9])" + pattern
    if value[-1:].isalnum():
        pattern += r"(?![A-Za-z0-9])"
    return pattern


class _KnownValues:
    """A matcher for one set of known secret values (replaced by ``PLACEHOLDER`` wherever they
    occur) and run values (each replaced, as a whole token, by its ``{{name}}``), built once
    per distinct set."""

    __slots__ = (
        "values",
        "secrets",
        "pattern",
        "replacements",
        "run_names",
        "escape",
        "contains_whitespace",
        "opaque_secrets",
        "opaque_pattern",
        "opaque_memo",
        "memo",
        "trigger",
        "shortest",
        "last_long",
        "long_memo",
        "long_memo_size",
        "message_memo",
        "message_memo_size",
    )

    def __init__(
        self, values: frozenset[str], run_values: tuple[tuple[str, str], ...] = ()
    ) -> None:
        secrets = sorted(
            (value for value in values if len(value) >= _DECLARED_MIN_LENGTH),
            key=lambda value: (-len(value), value),
        )
        self.secrets: tuple[str, ...] = tuple(secrets)
        #: The known values removed from opaque vendor data too (see :func:`_opaque_text`):
        #: 8+ characters, which random bytes do not hold by chance.
        self.opaque_secrets = tuple(
            value for value in secrets if len(value) >= _credentials.MIN_SECRET_LENGTH
        )
        self.opaque_pattern = (
            re.compile("|".join(map(re.escape, self.opaque_secrets)))
            if self.opaque_secrets
            else None
        )
        #: Short opaque strings (ids, payload keys) and their redaction: they repeat in every event.
        self.opaque_memo: dict[str, str] = {}
        replacements = dict.fromkeys(secrets, PLACEHOLDER)
        alternatives = [re.escape(value) for value in secrets]
        runs = sorted(
            ((name, value) for name, value in run_values if value not in replacements),
            key=lambda pair: (-len(pair[1]), pair[1]),
        )
        for name, value in runs:
            replacements.setdefault(value, value_token(name))
            alternatives.append(_whole_token(value))
        self.run_names = tuple(sorted({name for name, _ in run_values}))
        # A literal "{{name}}" (or an escaped one) the model wrote gains one bang.
        self.escape = (
            re.compile(r"\{\{(!*)(" + "|".join(map(re.escape, self.run_names)) + r")\}\}")
            if self.run_names
            else None
        )
        self.values: tuple[str, ...] = tuple([*secrets, *(value for _, value in runs)])
        self.replacements = replacements
        self.pattern = re.compile("|".join(alternatives)) if alternatives else None
        self.contains_whitespace = any(
            ch in value for value in self.values for ch in _CUT_WHITESPACE
        )
        self.memo: dict[str, str] = {}
        #: Long strings of requests and their redaction (see :func:`_redact_request_string`),
        #: up to :data:`_LONG_MEMO_MAX_CHARACTERS` in all.
        self.long_memo: dict[str, str] = {}
        self.long_memo_size = [0]  # a list: the scoped copies share it, with the memo
        #: Context messages (their exact JSON) and their redaction, up to
        #: :data:`_MESSAGE_MEMO_MAX_BYTES` in all (see :meth:`Redactor.remove_from_request`).
        self.message_memo: dict[bytes, Any] = {}
        self.message_memo_size = [0]
        self.trigger = _trigger_for(self.values, bool(self.run_names))
        #: No rule can act on a shorter text.
        self.shortest = min([_SHORTEST_SECRET_TEXT, *(len(value) for value in self.values)])
        #: The last long string redacted and its redaction, kept only by a :meth:`scoped` copy
        #: (None: not kept): see :func:`_redact_memoised`.
        self.last_long: tuple[str, str] | None = None

    def scoped(self) -> _KnownValues:
        """A copy sharing everything but ``last_long``, which it keeps: for one
        :class:`Redactor` (one recorded call), so that no long text outlives its call here."""
        copy = _KnownValues.__new__(_KnownValues)
        for name in _KnownValues.__slots__:
            object.__setattr__(copy, name, getattr(self, name))
        copy.last_long = ("", "")
        return copy

    def replace(self, text: str) -> str:
        assert self.pattern is not None
        return self.pattern.sub(lambda match: self.replacements[match.group(0)], text)

    def escape_literals(self, text: str) -> str:
        assert self.escape is not None
        return self.escape.sub(
            lambda match: value_token(match.group(2), len(match.group(1)) + 1), text
        )


#: Declared secrets are the user's word: removed from 4 characters on.
_DECLARED_MIN_LENGTH = 4


class Redactor:
    """Redaction against one snapshot of the known secret values.

    Looking the known values up reads the environment, which costs more than redacting a short
    string; a caller that redacts many strings at once (the parts of one recorded call) takes
    one ``current_redactor()`` and uses it for all of them.
    """

    __slots__ = ("_known",)

    def __init__(self, known: _KnownValues) -> None:
        self._known = known.scoped()

    def redact_text(self, text: str) -> str:
        return _redact(self._known, str(text))

    def redact_lane(self, path: str) -> str:
        """See :func:`redact_lane`."""
        return _redact_lane(self._known, str(path))

    def str_redactor(self) -> Callable[[str], str]:
        """``redact_text`` for callers that only ever pass ``str``, without the conversion."""
        return partial(_redact, self._known)

    def safe_cut(self, text: str) -> int:
        return _safe_cut(text, self._known)

    def redact_unfinished(self, text: str) -> str:
        """The redaction of a text cut short (its stream failed or was abandoned mid-word):
        the unfinished last word is replaced when a high-confidence rule says it may begin a
        secret."""
        return _redact_unfinished(text, self._known)

    def trigger(self) -> Trigger:
        return self._known.trigger

    def cuts_anywhere(self) -> bool:
        """Whether whitespace is a safe cut at all (False when a known value holds some)."""
        return not self._known.contains_whitespace

    def remove_secret_values(self, value: Any) -> Any:
        """What the caller built (a request, options, headers): every field-name form."""
        return _remove_part(value, self._known, is_secret_field_name)

    def remove_from_request(self, payloads: dict[str, Any]) -> dict[str, Any]:
        """:meth:`remove_secret_values` of a request's payloads, each message of its context
        redacted once: an agent resends its whole conversation on every turn, and redacting
        it again every time would cost time quadratic in the turns. A message is looked up
        by its exact JSON (equal bytes, equal message), and the redacted message is the same
        object turn after turn, so the writer sees at once what a turn shares with the last."""
        known = self._known
        context = payloads.get("context")
        messages = context.get("messages") if type(context) is dict else None
        if type(messages) is not list:
            return cast("dict[str, Any]", _remove(payloads, known, is_secret_field_name))
        result: dict[str, Any] = {}
        for name, value in payloads.items():
            if name != "context":
                result[name] = _remove(value, known, is_secret_field_name)
                continue
            redacted: dict[str, Any] = {}
            for key, item in value.items():
                if key == "messages":
                    redacted[_redact_request_string(key, known)] = [
                        _redact_message(message, known) for message in item
                    ]
                else:
                    redacted.update(_remove({key: item}, known, is_secret_field_name))
            result[name] = redacted
        return result

    def remove_from_output(self, value: Any) -> Any:
        """What the model produced (tool-call arguments): exact secret names only."""
        return _remove(value, self._known, is_exact_secret_name)

    def redact_arguments_text(self, text: str, *, unfinished: bool = False) -> str:
        """Tool-call argument text that is not valid JSON (a trailing comma, single quotes, a
        raw newline, a stream cut short): the value after an exact secret name is removed as
        text, then the text rules apply."""
        return _redact_arguments_text(text, self._known, unfinished)

    def rules_in(self, text: str) -> list[str]:
        """The names of the rules that change ``text`` (for the warning and ``show``; slow,
        called only for a text that redaction changed)."""
        return _rules_in(text, self._known)


_known_cache: tuple[tuple[frozenset[str], tuple[tuple[str, str], ...]], _KnownValues] | None = None

#: The run values (name, text) of the calls made here: ``use_run_values`` sets them for a block
#: of code (``use_recording(..., values=...)``), and every redaction inside replaces each
#: text by ``{{name}}``.
_run_values: ContextVar[tuple[tuple[str, str], ...]] = ContextVar(
    "openprogram_run_values", default=()
)
#: Values declared secret for a block of code (``use_recording(..., secrets=...)``).
_declared_values: ContextVar[frozenset[str]] = ContextVar(
    "openprogram_declared_secrets", default=frozenset()
)
#: Names of environment variables whose values are secrets (``record_replay.secret_env``).
_declared_env: tuple[str, ...] = ()
MIN_RUN_VALUE_LENGTH = 3
_VALUE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_run_values(values: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """``values`` as sorted ``(name, text)`` pairs; ``ValueError`` names a bad name or text."""
    if not values:
        return ()
    pairs = []
    for name, text in values.items():
        if not isinstance(name, str) or not _VALUE_NAME.match(name):
            raise ValueError(f"a run value name must be an identifier like tmp_path, not {name!r}")
        if not isinstance(text, str) or len(text) < MIN_RUN_VALUE_LENGTH:
            raise ValueError(
                f"run value {name!r} must be a string of at least {MIN_RUN_VALUE_LENGTH} "
                f"characters (every occurrence is replaced), not {text!r}"
            )
        pairs.append((name, text))
    return tuple(sorted(pairs))


def check_declared_secrets(secrets: Iterable[str] | None) -> frozenset[str]:
    """``secrets`` as a set; ``ValueError`` names a value too short to remove safely."""
    if not secrets:
        return frozenset()
    if isinstance(secrets, str):
        raise ValueError("secrets must be a list of strings, not one string")
    checked = set()
    for value in secrets:
        if not isinstance(value, str) or len(value) < _DECLARED_MIN_LENGTH:
            shown = "a string" if isinstance(value, str) else repr(type(value).__name__)
            raise ValueError(
                f"a declared secret must be a string of at least {_DECLARED_MIN_LENGTH} characters "
                f"(every occurrence is removed), not {shown} of length {len(value) if isinstance(value, str) else '-'}"
            )
        checked.add(value)
    return frozenset(checked)


@contextmanager
def use_run_values(values: Mapping[str, str] | None) -> Iterator[tuple[tuple[str, str], ...]]:
    """Redact every text of ``values`` as ``{{name}}`` inside the block (and its tasks)."""
    pairs = check_run_values(values)
    token = _run_values.set(pairs)
    try:
        yield pairs
    finally:
        _run_values.reset(token)


@contextmanager
def use_declared_secrets(secrets: Iterable[str] | None) -> Iterator[frozenset[str]]:
    """Remove every value of ``secrets`` wherever it occurs, inside the block (and its tasks),
    besides the values the process knows of."""
    values = check_declared_secrets(secrets) | _declared_values.get()
    token = _declared_values.set(values)
    try:
        yield values
    finally:
        _declared_values.reset(token)


def declare_secret_env(names: Iterable[str]) -> None:
    """The environment variables whose values are secrets whatever they look like (the
    configuration's ``record_replay.secret_env``), for the whole process."""
    global _declared_env
    _declared_env = tuple(sorted(set(names)))


def current_run_values() -> tuple[tuple[str, str], ...]:
    return _run_values.get()


def _environment_secrets() -> frozenset[str]:
    """The provider keys of the environment, the values of secret-named environment variables
    that read as credentials, and those of the declared ones whatever they look like. Looked
    up again whenever the environment differs in any name or value from the last look (a
    variable set while another is removed is seen at once), else remembered: decoding every
    variable costs more than redacting a call's request."""
    global _environment_cache
    fingerprint = (_environment_fingerprint(), _declared_env)
    cached = _environment_cache
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    values = set()
    for names in _credentials.PROVIDER_ENV_VARS.values():
        for name in names:
            value = os.environ.get(name, "").strip()
            if len(value) >= _credentials.MIN_SECRET_LENGTH:
                values.add(value)
    for name, value in os.environ.items():
        if is_secret_field_name(name):
            value = value.strip()
            if reads_as_credential(value):
                values.add(value)
    for name in _declared_env:
        value = os.environ.get(name, "").strip()
        if len(value) >= _DECLARED_MIN_LENGTH:
            values.add(value)
    result = frozenset(values)
    _environment_cache = (fingerprint, result)
    return result


_environment_cache: tuple[Any, frozenset[str]] | None = None


def _environment_fingerprint() -> Any:
    """Every name and value of the environment, cheaply: the raw mapping ``os.environ``
    keeps (bytes on POSIX), copied at C speed; its public items where it has none."""
    data = getattr(os.environ, "_data", None)
    return tuple(data.items()) if isinstance(data, dict) else tuple(os.environ.items())


def _known_values() -> _KnownValues:
    """The matcher for the current known values and run values; rebuilt only when they change."""
    global _known_cache
    secrets = _environment_secrets() | _credentials.seen_secret_values() | _declared_values.get()
    key = (secrets, _run_values.get())
    cached = _known_cache
    if cached is not None and cached[0] == key:
        return cached[1]
    matcher = _KnownValues(*key)
    _known_cache = (key, matcher)
    return matcher


# ============================================================================ text


def _redact(known: _KnownValues, text: str) -> str:
    """``redact_text`` with the known values already looked up. Every pattern runs only when
    a substring it cannot match without is present (a new rule must add its own substring
    to ``_TRIGGER_WORDS``: the stream stage trusts a trigger-free text to be its own
    redaction)."""
    if len(text) < known.shortest:
        return text
    if known.escape is not None and "{{" in text:
        text = known.escape_literals(text)
    if known.pattern is not None:
        for value in known.values:
            if value in text:
                text = known.replace(text)
                break
    if "://" in text and "@" in text:
        text = _USERINFO.sub(_userinfo_replacement, text)
    if "=" in text and ("?" in text or "&" in text or ";" in text):
        text = _QUERY_PARAM.sub(_query_replacement, text)
    if _PREFIX_TRIGGER(text):
        for shape in _SHAPES:
            if any(trigger in text for trigger in shape.triggers):
                text = shape.pattern.sub(_shape_replacement(shape), text)
    lowered = text.lower()
    if "bearer" in lowered or "basic" in lowered or "token" in lowered:
        text = _AUTH.sub(_auth_replacement, text)
    return text


@cache
def _shape_replacement(shape: _Shape) -> Callable[[re.Match[str]], str]:
    accept = shape.accept

    def replacement(match: re.Match[str]) -> str:
        return PLACEHOLDER if accept is None or accept(match) else match.group(0)

    return replacement


def _auth_replacement(match: re.Match[str]) -> str:
    return match.group(1) + PLACEHOLDER if _auth_credential(match) else match.group(0)


def _rules_in(text: str, known: _KnownValues) -> list[str]:
    names = []
    if known.pattern is not None and any(value in text for value in known.secrets):
        names.append("known-value")
    if "://" in text and _USERINFO.sub(_userinfo_replacement, text) != text:
        names.append("url-userinfo")
    if _QUERY_PARAM.sub(_query_replacement, text) != text:
        names.append("url-query-secret")
    for shape in _SHAPES:
        if (
            any(t in text for t in shape.triggers)
            and shape.pattern.sub(_shape_replacement(shape), text) != text
        ):
            names.append(shape.name)
    if _AUTH.sub(_auth_replacement, text) != text:
        names.append("auth-scheme-credential")
    return sorted(set(names))


def _redact_memoised(text: str, known: _KnownValues) -> str:
    """Short strings from the shared memo; a long one from the last long string a
    :class:`Redactor` redacted, if equal: a recorded call's finished tool arguments reach
    redaction several times (the end event, its snapshot, the final message), and a long
    value costs a pass of every rule each time."""
    result: str | None  # None: a short string not in the memo yet
    if len(text) > _MEMO_MAX_LENGTH:
        last = known.last_long
        if last is None:
            return _redact(known, text)
        if last[0] == text:
            return last[1]
        result = _redact(known, text)
        known.last_long = (text, result)
        return result
    memo = known.memo
    result = memo.get(text)
    if result is None:
        if len(memo) >= _MEMO_MAX_ENTRIES:
            memo.clear()
        result = memo[text] = _redact(known, text)
    return result


def _redact_request_string(text: str, known: _KnownValues) -> str:
    """:func:`_redact_memoised` for the strings of a request, whose long ones also come from
    :attr:`_KnownValues.long_memo`: an agent resends its whole conversation on every turn, so
    without it every tool result would be redacted again at every turn, a cost quadratic in
    the turns. The memo holds strings the caller holds anyway (the conversation), is bounded,
    and is dropped with the known values when they change."""
    if len(text) <= _MEMO_MAX_LENGTH:
        return _redact_memoised(text, known)
    long_memo = known.long_memo
    result = long_memo.get(text)  # the same str object turn after turn: its hash is cached
    if result is None:
        result = _redact(known, text)
        size = known.long_memo_size
        if size[0] + len(text) > _LONG_MEMO_MAX_CHARACTERS:
            long_memo.clear()
            size[0] = 0
        long_memo[text] = result
        size[0] += len(text)
    return result


def current_redactor() -> Redactor:
    """A redactor bound to the known secret values as they are now."""
    return Redactor(_known_values())


def redact_text(text: str) -> str:
    """``text`` with every credential value removed (known values and value shapes)."""
    return _redact(_known_values(), str(text))


def redact_lane(path: str) -> str:
    """A lane path (``a/b``), or a session id, as a recording stores it and a message may
    quote it: see :func:`_redact_lane`."""
    return _redact_lane(_known_values(), str(path))


def _redact_lane(known: _KnownValues, path: str) -> str:
    """A lane path redacted whole (a known value may hold a ``/``), then segment by segment:
    each segment is a name of its own (``lane(tool_call.id)``), so a key that makes up a
    segment is a whole token there, though a ``/`` before it reads as part of a base64 word in
    other text."""
    redacted = _redact(known, path)
    if "/" not in redacted:
        return redacted
    return "/".join(_redact(known, segment) for segment in redacted.split("/"))


def safe_cut(text: str) -> int:
    """A cut point ``k`` (0 if none) such that, for every string ``s`` starting with
    ``text``, ``redact_text(s) == redact_text(s[:k]) + redact_text(s[k:])``: the last point
    this function can prove safe, which is conservative rather than the last one that is.

    The stream stage uses it to redact a growing string incrementally: the part before the
    cut is redacted once and never again. Cuts are made only just after whitespace, which no
    secret pattern can contain and every whole-token rule takes as a boundary, never after the
    separator of an auth scheme word ("Bearer "), which a credential may still follow, nor
    inside an open PEM private-key block. When a known value contains whitespace there is no
    safe point at all.
    """
    return _safe_cut(text, _known_values())


# ============================================================================ cut short

# A credential's prefix at a token start, with what followed it so far: the unfinished word of
# a stream cut short is stored as the placeholder from there.
_UNFINISHED_PREFIX = re.compile(
    _start(r"A-Za-z0-9_\-")
    + r"(?:(?:sk-|gh[pousr]_|github_pat_|AIza|xox[abpr]-|[sr]k_live_|hf_|eyJ)[A-Za-z0-9_.-]*"
    + r"|(?:AKIA|ASIA)[A-Z2-7]{0,15}|xox[os]-[0-9][0-9a-fA-F-]*)\Z"
)
_UNFINISHED_SCHEME = re.compile(
    r"\b(?:[Bb][Ee][Aa][Rr][Ee][Rr]|[Bb][Aa][Ss][Ii][Cc]|[Tt][Oo][Kk][Ee][Nn])[ \t]+([A-Za-z0-9._~+/=-]+)\Z"
)
_UNFINISHED_USERINFO = re.compile(r"://[^\s/?#@]*:([^\s/?#@]*)\Z")
_UNFINISHED_QUERY = re.compile(r"[?&;]([A-Za-z0-9_.\-]+)=([^\s&#;?]*)\Z")
#: A known value whose first this-many characters end a cut-short text may be cut off there.
_KNOWN_START_LENGTH = 4


def _credential_under_way(body: str) -> bool:
    """Whether what follows a scheme word so far reads as a credential rather than a word:
    a digit in it, or 8+ characters that are no plain word."""
    if not _DIGITS.isdisjoint(body):
        return True
    return len(body) >= 8 and not (
        body.isalpha() and (body.islower() or body.istitle() or body.isupper())
    )


def _redact_unfinished(text: str, known: _KnownValues) -> str:
    """A text whose stream ended mid-word can hold the start of a secret that no rule
    recognises yet (a key cut off before its length, a URL password before its "@"). Past the
    last safe cut, the unfinished word loses what a high-confidence rule says may begin a
    secret: a credential prefix at a token start, a scheme word's credential with a digit in
    it, a URL password or secret query value under way, or 4+ characters of a known value.
    Ordinary words ("basic") are left as they are."""
    cut = _safe_cut(text, known)
    head, tail = text[:cut], text[cut:]
    start = _unfinished_secret_start(tail, known)
    if start is None:
        return _redact(known, text)
    return _redact(known, head) + _redact(known, tail[:start]) + PLACEHOLDER


def _unfinished_secret_start(tail: str, known: _KnownValues) -> int | None:
    """Where, in the unfinished last word ``tail``, a possible secret begins (None: nowhere)."""
    if not tail:
        return None
    starts = []
    found = _UNFINISHED_PREFIX.search(tail)
    if found:
        starts.append(found.start())
    found = _UNFINISHED_SCHEME.search(tail)
    if found and _credential_under_way(found.group(1)):
        starts.append(found.start(1))
    found = _UNFINISHED_USERINFO.search(tail)
    if found and found.group(1) and not found.group(1).isdigit():
        starts.append(found.start(1))
    found = _UNFINISHED_QUERY.search(tail)
    if found and found.group(2) and _is_query_secret_name(found.group(1)):
        starts.append(found.start(2))
    for value in known.secrets:
        longest = min(len(value) - 1, len(tail))
        for length in range(longest, _KNOWN_START_LENGTH - 1, -1):
            if tail.endswith(value[:length]):
                starts.append(len(tail) - length)
                break
    return min(starts) if starts else None


# ============================================================================ argument text

# ``"password": "..."``, ``'password': '...'``, ``password=...``: the value after a key in text
# that is not valid JSON. Keys are checked against the exact secret names by the callback.
_TEXT_KEY_VALUE = re.compile(
    r"""(["']?)([A-Za-z][A-Za-z0-9_\-]*)\1(\s*[:=]\s*)(?:"((?:[^"\\]|\\.)*)("?)|'((?:[^'\\]|\\.)*)('?)|([^\s,}\]"']+))""",
    re.DOTALL,
)


def _redact_arguments_text(text: str, known: _KnownValues, unfinished: bool) -> str:
    def replacement(match: re.Match[str]) -> str:
        if not is_exact_secret_name(match.group(2)):
            return match.group(0)
        head = match.group(1) + match.group(2) + match.group(1) + match.group(3)
        if match.group(4) is not None:
            return f'{head}"{PLACEHOLDER}{match.group(5)}'
        if match.group(6) is not None:
            return f"{head}'{PLACEHOLDER}{match.group(7)}"
        return head + PLACEHOLDER

    redacted = _TEXT_KEY_VALUE.sub(replacement, text) if _TEXT_KEY_VALUE.search(text) else text
    return _redact_unfinished(redacted, known) if unfinished else _redact(known, redacted)


# ============================================================================ safe cuts


def _last_whitespace(text: str, end: int) -> int:
    """The position of the last ``_CUT_WHITESPACE`` character before ``end``, or -1. Usually
    a space with only printable characters after it (none of the others is printable), which
    takes one search; a recorder cuts a growing text every hundred characters or so."""
    space = text.rfind(" ", 0, end)
    if text[space + 1 : end].isprintable():
        return space
    return max(map(text.rfind, _CUT_WHITESPACE, repeat(0), repeat(end)))


def _safe_cut(text: str, known: _KnownValues) -> int:
    if known.contains_whitespace:
        return 0
    end = len(text)
    while end > 0:
        position = _last_whitespace(text, end)
        if position < 0:
            return 0
        run_start = position
        while run_start > 0 and text[run_start - 1] in _CUT_WHITESPACE:
            run_start -= 1
        pem = _open_pem(text, run_start)
        if pem >= 0:  # inside a private-key block: cut before its header instead
            end = pem
            continue
        before = text[max(0, run_start - 6) : run_start].lower()
        # Only spaces and tabs join a scheme word to its credential.
        if not before.endswith(_AUTH_SCHEMES) or text[run_start : position + 1].strip(" \t"):
            return position + 1
        # A credential may still follow this scheme word: cut before the word instead.
        scheme = next(word for word in _AUTH_SCHEMES if before.endswith(word))
        end = run_start - len(scheme)
    return 0


_PEM_BEGIN = "-----BEGIN"
_PEM_END = re.compile(r"-----END[A-Z ]*-----")


def _open_pem(text: str, end: int) -> int:
    """The position of a PEM header in ``text[:end]`` whose block is not closed before
    ``end``, or -1: a private-key block holds whitespace, so no cut may fall inside it."""
    begin = text.rfind(_PEM_BEGIN, 0, end)
    if begin < 0 or _PEM_END.search(text, begin, end):
        return -1
    return begin


# ============================================================================ structures

# Content blocks by their ``type``, and the fields of each that hold opaque vendor data (only
# known values removed) or what the model produced (exact secret names only). A dict is taken
# for a block where content stands: an element of a ``content`` list, the ``tool_call`` of an
# event, or the value redacted itself (a message, a block, an event: the parts replay redacts
# alone), so a block is redacted the same way whatever holds it, and a dict the caller built
# elsewhere (``options.metadata``) that happens to carry ``"type": "image"`` stays the caller's.
_OPAQUE_BLOCK_FIELDS: dict[str, frozenset[str]] = {
    "text": frozenset({"text_signature"}),
    "thinking": frozenset({"thinking_signature"}),
    "image": frozenset({"data"}),
    "toolCall": frozenset({"id", "thought_signature"}),
    "serverTool": frozenset(),
}
_OUTPUT_BLOCK_FIELDS: dict[str, str] = {"toolCall": "arguments", "serverTool": "payload"}
#: The keys whose values are content blocks, or lists of them.
_BLOCK_KEYS = frozenset({"content", "tool_call"})
# Keys inside a server-tool payload (the vendor's own item) whose values are opaque.
_OPAQUE_PAYLOAD_KEY = re.compile(
    r"(?:^|_)(?:id|signature|encrypted\w*|data|index)$|^encrypted|Signature$|Id$", re.IGNORECASE
)
# A tool result's id, and the id of the call a message answers, are the vendor's.
_OPAQUE_MESSAGE_FIELDS = frozenset({"tool_call_id"})

SecretName = Callable[[str], bool]


def _opaque_text(text: str, known: _KnownValues) -> str:
    """Opaque vendor data (a signature, encrypted reasoning, an image, an id) with the known
    values of 8+ characters removed, and nothing else changed: no value shape runs on random
    bytes, but a whole known key does not occur in them by chance, so where one stands it was
    put there (a reasoning item quoting the key, a tool result id built from it). A text that
    ends with the first 8+ characters of a known value loses them too: a signature that grows
    from one snapshot to the next (a stream cut short between two of its pieces) must not
    leave a key's first half behind."""
    if known.opaque_pattern is None or len(text) < _credentials.MIN_SECRET_LENGTH:
        return text
    if len(text) > _MEMO_MAX_LENGTH:
        return _opaque_redacted(text, known)
    memo = known.opaque_memo
    result = memo.get(text)
    if result is None:
        if len(memo) >= _MEMO_MAX_ENTRIES:
            memo.clear()
        result = memo[text] = _opaque_redacted(text, known)
    return result


def _opaque_redacted(text: str, known: _KnownValues) -> str:
    pattern = known.opaque_pattern
    assert pattern is not None
    for value in known.opaque_secrets:
        if value in text:
            text = pattern.sub(PLACEHOLDER, text)
            break
    return _without_known_start(text, known.opaque_secrets)


def _without_known_start(text: str, values: tuple[str, ...]) -> str:
    """``text`` without a trailing first part (8+ characters, not the whole) of one of
    ``values``."""
    minimum = _credentials.MIN_SECRET_LENGTH
    cut = len(text)
    for value in values:
        start = max(0, len(text) - len(value) + 1)
        head = value[:minimum]
        position = text.find(head, start)
        while position >= 0:
            if position < cut and value.startswith(text[position:]):
                cut = position
                break
            position = text.find(head, position + 1)
    return text if cut == len(text) else text[:cut] + PLACEHOLDER


def _known_only(value: Any, known: _KnownValues) -> Any:
    """An opaque value (a string, or whatever a vendor put in an opaque field) with
    :func:`_opaque_text` applied to every string in it, dict keys included."""
    if type(value) is str:
        return _opaque_text(value, known)
    if isinstance(value, dict):
        return {
            (_opaque_text(key, known) if type(key) is str else key): _known_only(item, known)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_known_only(item, known) for item in value]
    if isinstance(value, str):
        return _opaque_text(str(value), known)
    return value


def _redact_message(message: Any, known: _KnownValues) -> Any:
    """A context message redacted as the caller's (see :meth:`Redactor.remove_from_request`),
    from :attr:`_KnownValues.message_memo` when the same message was redacted before."""
    try:
        encoded = orjson.dumps(message)
    except (orjson.JSONEncodeError, TypeError):
        return _remove_part(message, known, is_secret_field_name)
    memo = known.message_memo
    redacted = memo.get(encoded)
    if redacted is None:
        redacted = _remove_part(message, known, is_secret_field_name)
        size = known.message_memo_size
        if size[0] + len(encoded) > _MESSAGE_MEMO_MAX_BYTES:
            memo.clear()
            size[0] = 0
        memo[encoded] = redacted
        size[0] += len(encoded)
    return redacted


def _remove(value: Any, known: _KnownValues, secret_name: SecretName) -> Any:
    kind = type(value)
    if kind is str:
        return _redact_request_string(value, known)
    if kind is int or kind is float or kind is bool or value is None:
        return value
    if isinstance(value, dict):
        return _remove_from_dict(value, known, secret_name)
    if isinstance(value, (list, tuple)):
        return [_remove(item, known, secret_name) for item in value]
    if isinstance(value, str):
        return _redact(known, str(value))
    return value


def _remove_part(value: Any, known: _KnownValues, secret_name: SecretName) -> Any:
    """:func:`_remove` of a value where a content block may stand (the value redacted itself,
    a ``content`` list or its elements, an event's ``tool_call``)."""
    if isinstance(value, dict):
        block_type = value.get("type")
        if type(block_type) is str and block_type in _OPAQUE_BLOCK_FIELDS:
            return _remove_from_block(value, block_type, known, secret_name)
        return _remove_from_dict(value, known, secret_name)
    if isinstance(value, (list, tuple)):
        return [
            _remove_part(item, known, secret_name)
            if isinstance(item, dict)
            else _remove(item, known, secret_name)
            for item in value
        ]
    return _remove(value, known, secret_name)


def _remove_from_dict(
    value: dict[Any, Any], known: _KnownValues, secret_name: SecretName
) -> dict[Any, Any]:
    """:func:`_remove` of a dict, with the usual leaves (short strings already seen, numbers)
    handled in the loop: every recorded event and request is mostly such leaves."""
    memo = known.memo
    result = {}
    for key, item in value.items():
        if isinstance(key, str):
            if type(key) is not str:
                key = str(key)
            redacted_key = memo.get(key)
            if redacted_key is None:
                redacted_key = _redact_request_string(key, known)
            if secret_name(key):
                result[redacted_key] = PLACEHOLDER
                continue
            if key in _OPAQUE_MESSAGE_FIELDS:
                result[redacted_key] = _known_only(item, known)
                continue
            if key in _BLOCK_KEYS and type(item) is not str:
                result[redacted_key] = _remove_part(item, known, secret_name)
                continue
            key = redacted_key
        kind = type(item)
        if kind is str:
            redacted = memo.get(item)
            result[key] = _redact_request_string(item, known) if redacted is None else redacted
        elif kind is int or kind is float or kind is bool or item is None:
            result[key] = item
        else:
            result[key] = _remove(item, known, secret_name)
    return result


def _remove_from_block(
    block: dict[Any, Any], block_type: str, known: _KnownValues, secret_name: SecretName
) -> dict[Any, Any]:
    opaque = _OPAQUE_BLOCK_FIELDS[block_type]
    output = _OUTPUT_BLOCK_FIELDS.get(block_type)
    result = {}
    for key, item in block.items():
        if key in opaque:
            result[key] = _known_only(item, known)
        elif key == output:
            result[key] = (
                _remove_from_payload(item, known)
                if block_type == "serverTool"
                else _remove(item, known, is_exact_secret_name)
            )
        elif type(key) is str and secret_name(key):
            result[key] = PLACEHOLDER
        else:
            result[key] = _remove(item, known, secret_name)
    return result


# A payload's ``data`` whose dict says it is text (an Anthropic ``web_fetch`` page's
# ``"source": {"type": "text", "media_type": "text/plain", "data": ...}``) is fetched text.
_PAYLOAD_DATA_KEY = re.compile(r"(?:^|_)data$", re.IGNORECASE)
_MEDIA_TYPE_KEYS = (
    "media_type",
    "mime_type",
    "mimeType",
    "mediaType",
    "content_type",
    "contentType",
)
_TEXT_MEDIA_TYPE = re.compile(
    r"\s*(?:text/|application/(?:[\w.-]+\+)?(?:json|xml|javascript|x-www-form-urlencoded)\b)",
    re.IGNORECASE,
)
_ENCODED_DATA = re.compile(r"[A-Za-z0-9+/_-]*={0,2}\Z")


def _is_fetched_text(data: str, siblings: dict[Any, Any]) -> bool:
    """Whether a server-tool payload's ``data`` string is text a tool fetched or searched (a
    page) rather than encoded bytes: its dict says so (``"type": "text"``, a text, JSON or XML
    media type), or says nothing and the value is not base64 (it holds a space, say). Such
    text is the web's, not the vendor's: every rule applies to it."""
    kind = siblings.get("type")
    media = next(
        (siblings[name] for name in _MEDIA_TYPE_KEYS if type(siblings.get(name)) is str), None
    )
    if kind == "text" or (media is not None and _TEXT_MEDIA_TYPE.match(media)):
        return True
    if media is not None or kind == "base64":
        return False
    return not _ENCODED_DATA.match(data)


def _remove_from_payload(value: Any, known: _KnownValues) -> Any:
    """A vendor's server-tool item: its opaque values (ids, signatures, encrypted content,
    encoded data) with only known values removed, exact secret names removed, the text rules
    on the rest (queries, titles, fetched pages, search results' content)."""
    if isinstance(value, dict):
        result = {}
        keys_may_change = known.opaque_pattern is not None
        for key, item in value.items():
            if type(key) is not str:
                result[key] = _remove_from_payload(item, known)
                continue
            stored_key = _opaque_text(key, known) if keys_may_change else key
            opaque = _opaque_payload_key(key)
            if opaque and type(item) is str:
                if opaque == "data" and _is_fetched_text(item, value):
                    result[stored_key] = _remove(item, known, is_exact_secret_name)
                else:
                    result[stored_key] = _opaque_text(item, known)
            elif is_exact_secret_name(key):
                result[stored_key] = PLACEHOLDER
            else:
                result[stored_key] = _remove_from_payload(item, known)
        return result
    if isinstance(value, (list, tuple)):
        return [_remove_from_payload(item, known) for item in value]
    return _remove(value, known, is_exact_secret_name)


@lru_cache(maxsize=4096)
def _opaque_payload_key(key: str) -> str | None:
    """``"data"`` for a payload key naming data (text or encoded bytes: see
    :func:`_is_fetched_text`), ``"opaque"`` for any other opaque key, None for the rest."""
    if _PAYLOAD_DATA_KEY.search(key):
        return "data"
    return "opaque" if _OPAQUE_PAYLOAD_KEY.search(key) else None


def remove_secret_values(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists; tuples become lists) with every secret removed.

    The input is never mutated. Dict keys are redacted like any other string, so a key that
    carries a credential cannot leak it; values that are neither containers nor strings are
    returned as they are. Content blocks keep their opaque vendor data but for known values,
    and the arguments of a tool call lose only exact secret names.
    """
    return _remove_part(value, _known_values(), is_secret_field_name)
