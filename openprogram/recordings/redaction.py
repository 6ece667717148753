"""Credential removal for everything that reaches a recording (see ``docs/file-format.md``, "Redaction").

Three rules, applied to a dumped (JSON-shaped) structure:

* **by field name**: a dict key that names a secret loses its whole value;
* **by known value**: the credential values this process knows about (every ``api_key`` it
  was given, and every environment variable whose name is a secret name:
  ``credentials.known_secret_values(is_secret_field_name)``) are removed wherever they occur;
* **by value shape**: ``Bearer``/``Basic``/``Token`` credentials, ``sk-`` keys, the well-known
  prefixed credentials (GitHub, Google, AWS, Slack, Stripe, Hugging Face), JWTs, PEM private-key
  blocks, URL userinfo and secret-named URL query parameters are removed from every remaining
  string.

Everything else must survive byte for byte: a replay hands back what the model said, so prose
that merely looks like a secret ("bearer of news", "Token economics", "sk-learn") is left
alone. The credential of an auth scheme must contain a digit; that is what tells "Basic English"
from "Basic dXNlcjE6cGFzcw==", and a date, a version or a hex address after the scheme word
("Basic 2024-01-01 plan", "Token 2023/2024 season", "the token 0x1234abcd") is prose too.

This runs on every recorded event, so it is written for speed: precompiled patterns, a cheap
substring pre-check before each pattern, the known-value matcher rebuilt only when the set of
known values changes, and memoised field-name checks. ``safe_cut`` lets a caller redact a
growing string incrementally.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache, partial
from itertools import repeat
from typing import Any, NamedTuple

from ..providers import credentials as _credentials

__all__ = [
    "PLACEHOLDER",
    "REDACTION_VERSION",
    "Redactor",
    "SECRET_FIELD_NAMES",
    "Trigger",
    "current_redactor",
    "is_secret_field_name",
    "redact_text",
    "remove_secret_values",
    "safe_cut",
]

PLACEHOLDER = "[secret removed]"

# Bump when the rules change in a way that changes what a recording holds: a recording made
# under other rules may redact a request differently from the replaying process.
REDACTION_VERSION = 2

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
    """Whether a dict key names a secret, so that its whole value must go.

    Memoised: the same few dozen field names come back in every recorded event.
    """
    if not isinstance(name, str):
        return False
    words = _name_words(name)
    if not words:
        return False
    if "_".join(words) in _NORMALISED_SECRET_NAMES or words[-1] in _SECRET_LAST_WORDS:
        return True
    return len(words) >= 2 and (words[-2], words[-1]) in _SECRET_LAST_PAIRS


# ============================================================================ value shapes

# Credentials after an auth scheme word: 8+ token characters, at least one of them a digit.
# ASCII-only case folding keeps the cheap ``lower()`` pre-check below exact.
_AUTH_SCHEMES = ("bearer", "basic", "token")
# What reads as a date, a version or a hex address after a scheme word is prose, not a
# credential: the whole token must be one of these for the scheme word to be left alone. A
# date or version cut short ("2024-01-", "1.2.") stays prose too: a tool call's partial
# arguments show strings cut anywhere.
_PROSE_AFTER_SCHEME = (
    r"(?!(?:[0-9]{4}[-/.](?:[0-9]{1,4}(?:[-/.][0-9]{0,4})?)?|v?[0-9]+(?:\.[0-9]*)+|0x[0-9a-fA-F]{1,40})"
    r"(?![A-Za-z0-9._~+/=-]))"
)
_AUTH = re.compile(
    r"(\b(?:bearer|basic|token)[ \t]+)" + _PROSE_AFTER_SCHEME
    + r"(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}",
    re.IGNORECASE | re.ASCII,
)
# An ``sk-`` key: at the start of a word, or wherever it starts ("sess-sk-...", "x_sk-...",
# "abcsk-...") when it holds a digit, which keeps "risk-assessment-framework-notes" prose.
_SK_KEY = re.compile(
    r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}|sk-(?=[A-Za-z0-9_-]{0,200}[0-9])[A-Za-z0-9_-]{20,}"
)
# Well-known prefixed credentials, JWTs and PEM private-key blocks (an unterminated block loses
# everything after its header). Each alternative starts with a literal from ``_PREFIX_TRIGGERS``.
_PREFIXED = re.compile(
    r"gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|AIza[0-9A-Za-z_-]{20,}"
    r"|(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|[sr]k_live_[A-Za-z0-9]{10,}"
    r"|hf_[A-Za-z0-9]{20,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----(?:.*?-----END[A-Z ]{0,40}PRIVATE KEY-----|.*\Z)",
    re.DOTALL,
)
_PREFIX_TRIGGERS = (
    "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AIza", "AKIA", "ASIA", "xox", "k_live_",
    "hf_", "eyJ", "-----BEGIN",
)
_PREFIX_TRIGGER = re.compile("|".join(map(re.escape, _PREFIX_TRIGGERS))).search
# A PEM header whose block is not closed yet: ``safe_cut`` must not cut inside it.
_PEM_BEGIN = "-----BEGIN"
_PEM_END = re.compile(r"-----END[A-Z ]*-----")
# Userinfo up to the last "@" before the host ends: "https://user:p@ss@host" loses "user:p@ss".
# Without a password it is removed only when it looks like a token ("https://ghp_1a2b3c4d@"),
# so "ssh://git@github.com" survives.
_USERINFO = re.compile(r"://([^\s/?#\[\]\"'<>\\`{}|^]+)@")
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9._~+=-]{8,}")
# A query parameter; the callback decides from its name whether the value is a secret.
_QUERY_PARAM = re.compile(r"([?&;])([A-Za-z0-9_.\-]+)=([^\s&#;?\"'<>\\`{}|^\[\]()]+)")
_QUERY_SECRET_NAMES = frozenset({"api_key", "apikey", "key", "access_token", "token"})

_USERINFO_REPLACEMENT = "://" + PLACEHOLDER + "@"
_DIGITS = frozenset(string.digits)
_AUTH_REPLACEMENT = r"\g<1>" + PLACEHOLDER

# No rule can match a shorter string: "://a@" is the shortest (known values have 8+ chars).
_SHORTEST_SECRET_TEXT = 5
# Short strings (field values such as "assistant", "toolCall", model ids) repeat in every
# event; their redaction is memoised per set of known values, up to this many entries.
_MEMO_MAX_LENGTH = 64
_MEMO_MAX_ENTRIES = 16384

# Characters at which ``safe_cut`` may cut. No shape pattern and no known value (else
# ``safe_cut`` gives up) contains one, except the separator after an auth scheme word and the
# inside of a PEM private-key block (``safe_cut`` never cuts in either).
_CUT_WHITESPACE = " \t\n\r\f\v"


def _userinfo_replacement(match: re.Match[str]) -> str:
    userinfo = match.group(1)
    if ":" in userinfo or (_TOKEN_LIKE.fullmatch(userinfo) and not _DIGITS.isdisjoint(userinfo)):
        return _USERINFO_REPLACEMENT
    return match.group(0)


def _query_replacement(match: re.Match[str]) -> str:
    name = match.group(2)
    if name.lower() in _QUERY_SECRET_NAMES or is_secret_field_name(name):
        return f"{match.group(1)}{name}={PLACEHOLDER}"
    return match.group(0)


# ============================================================================ triggers

# The substrings without which no rule can match (see ``_redact``'s pre-checks): a string with
# none of them, and none of the known values, is its own redaction.
_TRIGGER_WORDS = ("@", "=", "sk-", *_PREFIX_TRIGGERS)
_TRIGGER_WORDS_ANY_CASE = _AUTH_SCHEMES


def _any_case(word: str) -> list[str]:
    """``word`` in any ASCII case, as alternatives that each start with a literal character:
    that lets the regex engine skip every position whose character cannot start a match,
    where ``(?i:...)`` makes it try a match at every position (about 10x slower)."""
    rest = "".join(f"[{c.upper()}{c.lower()}]" for c in word[1:])
    return [word[0].upper() + rest, word[0].lower() + rest]


class Trigger(NamedTuple):
    """Finds what redaction could act on: ``search(text, start)`` is None only if no rule can
    match a substring of ``text`` beginning at ``start`` or later. ``reach`` is the longest
    trigger: a string known to be trigger-free stays so when text is appended to it if
    ``search(extended, len(string) - reach + 1)`` is None (the only new matches end in the
    appended part). A recorder uses it to prove, in time bounded by the delta, that a growing
    text still needs no redaction."""

    search: Callable[[str, int], re.Match[str] | None]
    reach: int


def _trigger_for(values: tuple[str, ...]) -> Trigger:
    words = [*_TRIGGER_WORDS, *values]
    alternatives = [*map(re.escape, words), *(a for w in _TRIGGER_WORDS_ANY_CASE for a in _any_case(w))]
    reach = max(map(len, [*words, *_TRIGGER_WORDS_ANY_CASE]))
    return Trigger(re.compile("|".join(alternatives), re.ASCII).search, reach)


# ============================================================================ known values


def value_token(name: str) -> str:
    """What a recording stores in place of the run value ``name``."""
    return "{{" + name + "}}"


class _KnownValues:
    """A matcher for one set of known secret values (replaced by ``PLACEHOLDER``) and run
    values (each replaced by its ``{{name}}``), built once per distinct set."""

    __slots__ = (
        "values", "pattern", "replacements", "contains_whitespace", "memo", "trigger", "shortest", "last_long",
    )

    def __init__(self, values: frozenset[str], run_values: tuple[tuple[str, str], ...] = ()) -> None:
        replacements = {
            value: PLACEHOLDER for value in values if len(value) >= _credentials.MIN_SECRET_LENGTH
        }
        for name, value in run_values:
            replacements.setdefault(value, value_token(name))
        # Longest first, so a value that contains another is replaced whole.
        ordered = sorted(replacements, key=lambda value: (-len(value), value))
        self.values: tuple[str, ...] = tuple(ordered)
        self.replacements = replacements
        self.pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self.contains_whitespace = any(ch in value for value in ordered for ch in _CUT_WHITESPACE)
        self.memo: dict[str, str] = {}
        self.trigger = _trigger_for(self.values)
        #: No rule can act on a shorter text.
        self.shortest = min([_SHORTEST_SECRET_TEXT, *(len(value) for _, value in run_values)])
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
        return self.pattern.sub(lambda match: self.replacements[match.group(0)], text)


class Redactor:
    """Redaction against one snapshot of the known secret values.

    Looking the known values up reads the environment, which costs more than redacting a short
    string; a caller that redacts many strings at once (the parts of one recorded event) takes
    one ``current_redactor()`` and uses it for all of them.
    """

    __slots__ = ("_known",)

    def __init__(self, known: _KnownValues) -> None:
        self._known = known.scoped()

    def redact_text(self, text: str) -> str:
        return _redact(self._known, str(text))

    def str_redactor(self) -> Callable[[str], str]:
        """``redact_text`` for callers that only ever pass ``str``, without the conversion and
        the extra call: the recorder redacts a growing text at every streamed event."""
        return partial(_redact, self._known)

    def safe_cut(self, text: str) -> int:
        return _safe_cut(text, self._known)

    def redact_unfinished(self, text: str) -> str:
        """The redaction of a text cut short (its stream failed or was abandoned mid-word):
        the last word, if it may be the beginning of a secret, is replaced whole."""
        return _redact_unfinished(text, self._known)

    def trigger(self) -> Trigger:
        return self._known.trigger

    def remove_secret_values(self, value: Any) -> Any:
        return _remove(value, self._known)


_known_cache: tuple[tuple[frozenset[str], tuple[tuple[str, str], ...]], _KnownValues] | None = None

#: The run values (name, text) of the calls made here: ``use_run_values`` sets them for a block
#: of code (``use_recording(..., values=...)``), and every redaction inside replaces each
#: text by ``{{name}}``.
_run_values: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("openprogram_run_values", default=())
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


@contextmanager
def use_run_values(values: Mapping[str, str] | None) -> Iterator[tuple[tuple[str, str], ...]]:
    """Redact every text of ``values`` as ``{{name}}`` inside the block (and its tasks)."""
    pairs = check_run_values(values)
    token = _run_values.set(pairs)
    try:
        yield pairs
    finally:
        _run_values.reset(token)


def current_run_values() -> tuple[tuple[str, str], ...]:
    return _run_values.get()


def _known_values() -> _KnownValues:
    """The matcher for the current known values and run values; rebuilt only when they change."""
    global _known_cache
    key = (_credentials.known_secret_values(is_secret_field_name), _run_values.get())
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
    to ``_TRIGGER_WORDS``: the recorder trusts a trigger-free text to be its own redaction)."""
    if len(text) < known.shortest:
        return text
    if known.pattern is not None:
        for value in known.values:
            if value in text:
                text = known.replace(text)
                break
    if "://" in text and "@" in text:
        text = _USERINFO.sub(_userinfo_replacement, text)
    if "=" in text and ("?" in text or "&" in text or ";" in text):
        text = _QUERY_PARAM.sub(_query_replacement, text)
    if "sk-" in text:
        text = _SK_KEY.sub(PLACEHOLDER, text)
    if _PREFIX_TRIGGER(text):
        text = _PREFIXED.sub(PLACEHOLDER, text)
    lowered = text.lower()
    if "bearer" in lowered or "basic" in lowered or "token" in lowered:
        text = _AUTH.sub(_AUTH_REPLACEMENT, text)
    return text


def _redact_memoised(text: str, known: _KnownValues) -> str:
    """Short strings from the shared memo; a long one from the last long string a
    :class:`Redactor` redacted, if equal: a recorded call's finished tool arguments reach
    redaction several times (the end event, its snapshot, the final message), and a long
    value costs a pass of every rule each time."""
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


def current_redactor() -> Redactor:
    """A redactor bound to the known secret values as they are now."""
    return Redactor(_known_values())


def redact_text(text: str) -> str:
    """``text`` with every credential value removed (known values and value shapes)."""
    return _redact(_known_values(), str(text))


def safe_cut(text: str) -> int:
    """A cut point ``k`` (0 if none) such that, for every string ``s`` starting with
    ``text``, ``redact_text(s) == redact_text(s[:k]) + redact_text(s[k:])``: the last point
    this function can prove safe, which is conservative rather than the last one that is.

    A recorder uses it to redact a growing string incrementally: the part before the cut is
    redacted once and never again. Cuts are made only just after whitespace, which no secret
    pattern can contain, never after the separator of an auth scheme word ("Bearer "),
    which a credential may still follow, nor inside an open PEM private-key block. When a
    known value contains whitespace there is no safe point at all.
    """
    return _safe_cut(text, _known_values())


# What may follow a text cut short, to tell whether its last word may begin a secret: a
# credential's body (token characters with digits), then the ends some rules wait for (a URL's
# "@host", a JWT's further segments).
_SECRET_BODY = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
_CONTINUATIONS = (
    _SECRET_BODY + " ",
    _SECRET_BODY + "@h.io/ ",
    f"{_SECRET_BODY}.{_SECRET_BODY}.{_SECRET_BODY} ",
)
#: A known value whose first this-many characters end a cut-short text may be cut off there.
_KNOWN_START_LENGTH = 4


def _redact_unfinished(text: str, known: _KnownValues) -> str:
    """A text whose stream ended mid-word can hold the start of a secret that no rule
    recognises yet (a key cut off before its length, a URL password before its "@"). Past the
    last safe cut, the unfinished word is replaced by ``PLACEHOLDER`` when it may begin a
    secret: a prefixed credential's prefix, the start of a known secret value, or a word that
    some continuation turns into a secret reaching back into it. Prose is left as it is."""
    cut = _safe_cut(text, known)
    tail = text[cut:]
    if tail and _may_begin_secret(tail, known):
        return _redact(known, text[:cut]) + PLACEHOLDER
    return _redact(known, text)


def _may_begin_secret(tail: str, known: _KnownValues) -> bool:
    if _PREFIX_TRIGGER(tail):
        return True
    for value, replacement in known.replacements.items():
        if replacement == PLACEHOLDER and _ends_with_start_of(tail, value):
            return True
    # A rule that matches the word continued, and replaces something inside the word itself.
    return any(not _redact(known, tail + more).startswith(tail) for more in _CONTINUATIONS)


def _ends_with_start_of(text: str, value: str) -> bool:
    """Whether ``text`` ends with the first ``_KNOWN_START_LENGTH`` or more characters of
    ``value`` (and not with all of it: a whole value is redacted anyway)."""
    longest = min(len(value) - 1, len(text))
    return any(text.endswith(value[:length]) for length in range(longest, _KNOWN_START_LENGTH - 1, -1))


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


def _open_pem(text: str, end: int) -> int:
    """The position of a PEM header in ``text[:end]`` whose block is not closed before
    ``end``, or -1: a private-key block holds whitespace, so no cut may fall inside it."""
    begin = text.rfind(_PEM_BEGIN, 0, end)
    if begin < 0 or _PEM_END.search(text, begin, end):
        return -1
    return begin


# ============================================================================ structures


def _remove(value: Any, known: _KnownValues) -> Any:
    kind = type(value)
    if kind is str:
        return _redact_memoised(value, known)
    if kind is int or kind is float or kind is bool or value is None:
        return value
    if isinstance(value, dict):
        return _remove_from_dict(value, known)
    if isinstance(value, (list, tuple)):
        return [_remove(item, known) for item in value]
    if isinstance(value, str):
        return _redact(known, str(value))
    return value


def _remove_from_dict(value: dict[Any, Any], known: _KnownValues) -> dict[Any, Any]:
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
                redacted_key = _redact_memoised(key, known)
            if is_secret_field_name(key):
                result[redacted_key] = PLACEHOLDER
                continue
            key = redacted_key
        kind = type(item)
        if kind is str:
            redacted = memo.get(item)
            result[key] = _redact_memoised(item, known) if redacted is None else redacted
        elif kind is int or kind is float or kind is bool or item is None:
            result[key] = item
        else:
            result[key] = _remove(item, known)
    return result


def remove_secret_values(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists; tuples become lists) with every secret removed.

    The input is never mutated. Dict keys are redacted like any other string, so a key that
    carries a credential cannot leak it; values that are neither containers nor strings are
    returned as they are.
    """
    return _remove(value, _known_values())
