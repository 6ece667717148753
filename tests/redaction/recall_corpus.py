"""A deterministic corpus of realistic secrets for the redaction recall tests (no tests here).

Every :class:`Secret` is one credential in a documented, real-world form (``text``, what is
planted) with its secret part marked (``secret``: the random body, a substring of ``text``;
the public prefix of a key, a scheme word, a PEM header and the standard DER start of a key
body are not secret). A check looks for every 8-character window of ``secret``
(:attr:`Secret.windows`): a secret streamed and stored in pieces leaves such a window even
when the whole secret is nowhere.

Everything comes from one seeded ``random.Random`` (:data:`SEED`), so every run plants the
same secrets. Three families:

* **shaped**: recognisable by their form alone wherever they occur (``Bearer``/``Basic``/
  ``Token`` credentials, vendor keys, JWTs, PEM private keys, URL passwords, secret URL query
  parameters);
* **known**: values with no recognisable shape that redaction removes because the process knows
  them (``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` in the environment, an ``options.api_key``
  passed to a call): :attr:`Secret.env` names the variable, :attr:`Secret.option_key` marks
  the call key;
* **field**: values with no recognisable shape that are secret because of the field that holds
  them (:attr:`Secret.field`: a request header, a metadata key, a tool-call argument name).

:func:`sentence` puts a secret at a token boundary: at the start of the string, or after one of
:data:`BEFORE`, and followed by one of :data:`AFTER` or the end of the string.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cached_property

__all__ = [
    "AFTER",
    "BEFORE",
    "CORPUS",
    "FIELD",
    "KNOWN",
    "KNOWN_ENV",
    "OPTION_KEY",
    "SEED",
    "SHAPED",
    "SHAPE_PATTERNS",
    "Secret",
    "TEXT_SECRETS",
    "WINDOW",
    "build_corpus",
    "by_shape",
    "sentence",
]

SEED = 20240611
WINDOW = 8

DIGITS = string.digits
LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
LETTERS = string.ascii_letters
BASE62 = DIGITS + LETTERS
BASE64URL = BASE62 + "-_"
BASE64 = BASE62 + "+/"
HEX = "0123456789abcdef"
BASE32 = UPPER + "234567"
PASSWORD = BASE62 + "!#$%*+-.?@^_~"
URL_PASSWORD = BASE62 + "-._~"

# What may stand right before a planted secret ("" is the start of the string) and right after
# it ("" is the end of the string).
BEFORE = ("", " ", "\n", "\t", '"', "'", "=", ":", "(", ",", "[", "{", "<", ">")
AFTER = (" ", "\n", "\t", '"', "'", "=", ":", "(", ",", "[", "{", "<", ">", "")
_LEADS = ("key", "use", "creds", "value", "got", "see", "here", "auth")
_TAILS = ("ok", "done", "thanks", "next", "end")


@dataclass(frozen=True)
class Secret:
    """One planted credential. ``secret`` (the random body) is a substring of ``text``."""

    shape: str
    number: int  # within its shape
    text: str
    secret: str
    variant: str = ""
    field: str | None = None  # the field name that makes it secret (family "field")
    env: str | None = None  # the environment variable holding it (family "known")
    option_key: bool = False  # passed as options.api_key (family "known")
    index: int = 0  # within the whole corpus

    def __post_init__(self) -> None:
        assert self.secret in self.text, (self.shape, self.text)
        assert len(self.secret) >= 2 * WINDOW, (self.shape, self.secret)

    @property
    def label(self) -> str:
        variant = f" {self.variant}" if self.variant else ""
        return f"{self.shape}#{self.number}{variant}"

    @property
    def family(self) -> str:
        if self.field is not None:
            return "field"
        if self.env is not None or self.option_key:
            return "known"
        return "shaped"

    @cached_property
    def windows(self) -> frozenset[str]:
        """Every run of :data:`WINDOW` characters of the secret part."""
        return frozenset(self.secret[i : i + WINDOW] for i in range(len(self.secret) - WINDOW + 1))

    def mapped(self, change: Callable[[str], str], shape_suffix: str = "") -> Secret:
        """The same secret with ``change`` applied to its text and its secret part (for a
        place that transforms what it is given, such as ``lane_segment``)."""
        return replace(
            self,
            text=change(self.text),
            secret=change(self.secret),
            variant=self.variant + shape_suffix,
        )


# ============================================================================ generators


def _body(
    rng: random.Random, alphabet: str, size: int, *, digit: bool = True, letter: bool = True
) -> str:
    """``size`` characters of ``alphabet``, with a digit and a letter when the alphabet has
    them (asked for), and some variety: what a generated key looks like."""
    has_digit = digit and any(c in DIGITS for c in alphabet)
    has_letter = letter and any(c in LETTERS for c in alphabet)
    while True:
        text = "".join(rng.choice(alphabet) for _ in range(size))
        if has_digit and not any(c in DIGITS for c in text):
            continue
        if has_letter and not any(c in LETTERS for c in text):
            continue
        if len(set(text)) < min(10, size // 2):
            continue
        return text


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _wrap(text: str, width: int = 64) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def _pem(rng: random.Random, label: str, der_start: str, body_length: int) -> tuple[str, str]:
    """A PEM block whose body starts with the standard (public) DER start of its key type;
    the secret part is the rest of the body as it stands in the block, newlines included."""
    body = der_start + _body(rng, BASE64, body_length - len(der_start))
    wrapped = _wrap(body + "=" * ((4 - len(body) % 4) % 4))

    def at(i: int) -> int:  # where body character i stands in the wrapped lines
        return i + i // 64

    return (
        f"-----BEGIN {label}-----\n{wrapped}\n-----END {label}-----",
        wrapped[at(len(der_start)) : at(len(body) - 1) + 1],
    )


def _jwt(rng: random.Random) -> tuple[str, str]:
    alg = rng.choice(["HS256", "RS256", "ES256"])
    header = _b64url(json.dumps({"alg": alg, "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {
        "sub": _body(rng, DIGITS + LOWER, 12),
        "iat": rng.randrange(1_600_000_000, 1_750_000_000),
        "jti": _body(rng, HEX, 24),
        "iss": rng.choice(["https://auth.example.com/", "accounts.example.org", "urn:example:idp"]),
        "email": f"{rng.choice(['ana', 'bo', 'chen', 'dee'])}{rng.randrange(10, 99)}@example.com",
        "scope": rng.choice(["read write", "openid profile", "admin"]),
    }
    keys = list(claims)
    rng.shuffle(keys)
    payload = _b64url(json.dumps({k: claims[k] for k in keys}, separators=(",", ":")).encode())
    signature = _body(rng, BASE64URL, 43 if alg == "HS256" else 86)
    secret = f"{payload}.{signature}"
    return f"{header}.{secret}", secret


def build_corpus(seed: int = SEED) -> tuple[Secret, ...]:
    """Every secret of the corpus, in a fixed order, from ``random.Random(seed)``."""
    rng = random.Random(seed)
    made: list[Secret] = []
    counts: dict[str, int] = {}

    def add(shape: str, text: str, secret: str, **extra) -> None:
        counts[shape] = counts.get(shape, 0) + 1
        made.append(Secret(shape, counts[shape], text, secret, index=len(made), **extra))

    # --- auth scheme credentials (the credential after the scheme word is the secret)
    for alphabet, name in ((HEX, "hex"), (BASE64URL, "base64url"), (BASE64URL, "base64url")):
        token = _body(rng, alphabet, 40)
        add("bearer", f"Bearer {token}", token, variant=name)
    for user in rng.sample(["admin", "deploy", "svc-reports", "jenkins", "alice"], 3):
        password = _body(rng, PASSWORD, rng.randrange(14, 22))
        while True:  # a credential of an auth scheme holds a digit (the documented rule)
            encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
            if any(c in DIGITS for c in encoded):
                break
            password = _body(rng, PASSWORD, len(password))
        add("basic", f"Basic {encoded}", encoded, variant=user)
    for _ in range(3):
        token = _body(rng, HEX, 40)
        add("token", f"Token {token}", token)

    # --- vendor keys (the body after the public prefix is the secret)
    for _ in range(3):
        body = _body(rng, BASE62, 48)
        add("openai", f"sk-{body}", body)
    for _ in range(2):
        body = _body(rng, BASE64URL, rng.randrange(148, 157))
        add("openai-project", f"sk-proj-{body}", body)
    for _ in range(3):
        body = _body(rng, BASE64URL, 93)
        add("anthropic", f"sk-ant-api03-{body}AA", body)
    for _ in range(3):
        body = _body(rng, HEX, 32)
        add("deepseek", f"sk-{body}", body)
    for prefix in ("ghp_", "gho_", "ghu_", "ghs_"):
        body = _body(rng, BASE62, 36)
        add("github", prefix + body, body, variant=prefix)
    for _ in range(2):
        body = f"{_body(rng, BASE62, 22)}_{_body(rng, BASE62, 59)}"
        add("github-pat", f"github_pat_{body}", body)
    for _ in range(3):
        body = _body(rng, BASE64URL, 35)
        add("google", f"AIza{body}", body)
    for prefix in ("AKIA", "AKIA", "ASIA"):
        body = _body(rng, BASE32, 16)
        add("aws", prefix + body, body, variant=prefix)
    for _ in range(3):
        body = f"{rng.randrange(10**10, 10**12)}-{rng.randrange(10**11, 10**13)}-{_body(rng, BASE62, 24)}"
        add("slack", f"xoxb-{body}", body)
    for prefix in ("sk_live_", "rk_live_", "sk_live_"):
        body = _body(rng, BASE62, rng.randrange(24, 41))
        add("stripe", prefix + body, body, variant=prefix)
    for _ in range(3):
        body = _body(rng, LETTERS, 34, digit=False)
        add("huggingface", f"hf_{body}", body)
    for _ in range(3):
        text, secret = _jwt(rng)
        add("jwt", text, secret)

    # --- PEM private keys (the key body after its standard DER start)
    text, secret = _pem(rng, "RSA PRIVATE KEY", "MIIEpAIBAAKCAQEA", 1588)
    add("pem", text, secret, variant="RSA PRIVATE KEY")
    text, secret = _pem(rng, "PRIVATE KEY", "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg", 184)
    add("pem", text, secret, variant="PRIVATE KEY")
    text, secret = _pem(
        rng,
        "OPENSSH PRIVATE KEY",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
        396,
    )
    add("pem", text, secret, variant="OPENSSH PRIVATE KEY")

    # --- URLs: a password in the userinfo, a secret query parameter
    for host, path in (
        ("db.internal.example.com", "v1/items"),
        ("git.example.org", "team/repo.git"),
        ("10.0.3.7:8443", "admin"),
    ):
        user = rng.choice(["admin", "ci", "backup", "root"])
        password = _body(rng, URL_PASSWORD, rng.randrange(16, 25))
        add("url-userinfo", f"https://{user}:{password}@{host}/{path}", password)
    for name, url in (
        ("api_key", "https://api.example.com/v1/search?api_key="),
        ("apikey", "https://maps.example.com/geocode?q=paris&apikey="),
        ("key", "https://www.example-apis.com/v3/videos?key="),
        ("access_token", "https://graph.example.com/me?fields=id,name&access_token="),
        ("token", "https://hooks.example.net/feed?token="),
    ):
        value = _body(rng, HEX, 32)
        add("url-query", url + value, value, variant=name)

    # --- known values: no recognisable shape; removed because the process knows them
    value = _body(rng, HEX, 32)  # an Azure OpenAI key: 32 hex, no prefix
    add("known-env", value, value, env="OPENAI_API_KEY", variant="OPENAI_API_KEY")
    value = _body(rng, BASE62, 40)  # a gateway key set as ANTHROPIC_API_KEY
    add("known-env", value, value, env="ANTHROPIC_API_KEY", variant="ANTHROPIC_API_KEY")
    value = f"{_body(rng, BASE62, 20)}.{_body(rng, BASE62, 12)}~{_body(rng, LOWER, 6)}"
    add("known-option", value, value, option_key=True, variant="options.api_key")

    # --- field-name secrets: no recognisable shape; secret because of the field holding them
    for _ in range(2):
        credential = base64.b64encode(
            f"{_body(rng, BASE62, 20)}:{_body(rng, BASE62, 22)}".encode()
        ).decode()
        add(
            "field",
            f"ApiKey {credential}",
            credential,
            field="Authorization",
            variant="header Authorization",
        )
    for _ in range(2):
        value = _body(rng, BASE62, 40)
        add("field", value, value, field="x-api-key", variant="header x-api-key")
    for _ in range(2):
        body = _body(rng, BASE64URL, 28)
        add(
            "field", f"GOCSPX-{body}", body, field="client_secret", variant="metadata client_secret"
        )
    for name, alphabet, size in (
        ("password", PASSWORD, 18),
        ("password", PASSWORD, 24),
        ("password", PASSWORD, 16),
        ("api_key", BASE62, 32),
        ("api_key", BASE62, 40),
        ("token", BASE62, 40),
        ("token", BASE64URL, 43),
        ("secret", BASE62, 32),
        ("secret", HEX, 40),
    ):
        value = _body(rng, alphabet, size)
        add("field", value, value, field=name, variant=f"tool argument {name}")
    return tuple(made)


CORPUS: tuple[Secret, ...] = build_corpus()
SHAPED = tuple(s for s in CORPUS if s.family == "shaped")
KNOWN = tuple(s for s in CORPUS if s.family == "known")
KNOWN_ENV = tuple(s for s in KNOWN if s.env)
OPTION_KEY = next(s for s in KNOWN if s.option_key)
FIELD = tuple(s for s in CORPUS if s.family == "field")
#: What redaction must find in any text: by shape, or by being known.
TEXT_SECRETS = SHAPED + KNOWN


def by_shape(secrets: Iterable[Secret]) -> dict[str, list[Secret]]:
    groups: dict[str, list[Secret]] = {}
    for secret in secrets:
        groups.setdefault(secret.shape, []).append(secret)
    return groups


def sentence(secret: Secret, k: int | None = None, *, lead: str | None = None) -> str:
    """Prose holding ``secret`` at a token boundary, the ``k``-th such placement (by default
    the secret's own index): after ``BEFORE[k]`` (at the very start when it is ""), before
    ``AFTER[...]`` (at the very end when it is "")."""
    k = secret.index if k is None else k
    before = BEFORE[k % len(BEFORE)]
    after = AFTER[(k * 5 + 3) % len(AFTER)]
    word = lead if lead is not None else _LEADS[k % len(_LEADS)]
    head = "" if before == "" else f"{word}{before}"
    tail = "" if after == "" else f"{after}{_TAILS[k % len(_TAILS)]}"
    return f"{head}{secret.text}{tail}"


#: The documented form of each shape (``text`` must match it whole).
SHAPE_PATTERNS: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.DOTALL)
    for name, pattern in {
        "bearer": r"Bearer (?:[0-9a-f]{40}|[A-Za-z0-9_-]{40})",
        "basic": r"Basic [A-Za-z0-9+/]+={0,2}",
        "token": r"Token [0-9a-f]{40}",
        "openai": r"sk-[A-Za-z0-9]{48}",
        "openai-project": r"sk-proj-[A-Za-z0-9_-]{140,160}",
        "anthropic": r"sk-ant-api03-[A-Za-z0-9_-]{93}AA",
        "deepseek": r"sk-[0-9a-f]{32}",
        "github": r"gh[posu]_[A-Za-z0-9]{36}",
        "github-pat": r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}",
        "google": r"AIza[0-9A-Za-z_-]{35}",
        "aws": r"(?:AKIA|ASIA)[A-Z2-7]{16}",
        "slack": r"xoxb-[0-9]+-[0-9]+-[A-Za-z0-9]{24}",
        "stripe": r"[sr]k_live_[A-Za-z0-9]{24,40}",
        "huggingface": r"hf_[A-Za-z]{34}",
        "jwt": r"eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+",
        "pem": r"-----BEGIN ((?:RSA |OPENSSH )?PRIVATE KEY)-----\n(?:[A-Za-z0-9+/=]{1,64}\n)+-----END \1-----",
        "url-userinfo": r"https://[a-z]+:[A-Za-z0-9._~-]+@[^/\s]+/\S+",
        "url-query": r"https://\S+[?&](?:api_key|apikey|key|access_token|token)=[0-9a-f]{32}",
        "known-env": r"[0-9a-f]{32}|[A-Za-z0-9]{40}",
        "known-option": r"[A-Za-z0-9]{20}\.[A-Za-z0-9]{12}~[a-z]{6}",
        "field": r"ApiKey [A-Za-z0-9+/]+={0,2}|GOCSPX-[A-Za-z0-9_-]{28}|[A-Za-z0-9!#$%*+\-.?@^_~]{16,43}",
    }.items()
}
